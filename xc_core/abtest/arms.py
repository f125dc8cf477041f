"""Arms of a simulated A/B test: what retrieves the candidate ads of a query before the shared selection step.

Every arm answers one question — the top-K ads of the query's market for each distinct world query row, with a
score — so the ad selection, the clicks and the metrics are the same code for all of them:

- a **model arm**: any registered or trained xc model (MLflow URI, registry alias or method name), scored by
  the method that trained it (``Method.scorer``: its label index, fused with the classifier stage for ``-clf``
  methods); its candidates are the data set's labels, i.e. the keywords that earned clicks;
- ``bm25``: the simulator's own lexical policy, the deployed system that wrote the logs (the live tests' control);
- ``oracle``: the ground truth itself (score = the true grade's click attractiveness), an upper bound;
- ``random``: random ads of the market, a floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from xc_core.simulate.world import World

_CHUNK = 512


class Arm(Protocol):
    name: str

    def candidates(self, world: World, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores float32, keyword rows int64), both (len(rows), k), best first, -1 padded; only keywords of each
        query row's market."""
        ...

    def describe(self) -> dict[str, str]: ...


def _top(scores: np.ndarray, members: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row the k best columns of a dense (rows × members) score block (ties → lower member), -1 where the
    score is -inf."""
    width = min(k, scores.shape[1])
    order = np.argsort(-scores, axis=1, kind="stable")[:, :width]
    top = np.take_along_axis(scores, order, axis=1)
    kw = np.where(np.isfinite(top), members[order], -1)
    out_s = np.full((len(scores), k), -np.inf, dtype=np.float32)
    out_k = np.full((len(scores), k), -1, dtype=np.int64)
    out_s[:, :width], out_k[:, :width] = top, kw
    return out_s, out_k


def by_market(world: World, rows: np.ndarray, k: int, block) -> tuple[np.ndarray, np.ndarray]:
    """Run ``block(rows_of_market, market, members) -> dense scores`` per market and chunk; top k of each row."""
    scores = np.full((len(rows), k), -np.inf, dtype=np.float32)
    kws = np.full((len(rows), k), -1, dtype=np.int64)
    market = world.q_market[rows]
    for m in np.unique(market):
        members = np.flatnonzero(world.kw_market == m)
        at = np.flatnonzero(market == m)
        for lo in range(0, len(at), _CHUNK):
            part = at[lo:lo + _CHUNK]
            scores[part], kws[part] = _top(block(rows[part], int(m), members), members, k)
    return scores, kws


@dataclass
class Bm25Arm:
    """The simulator's serving policy: BM25 over keyword text in the market with its relevance floor."""

    name: str = "bm25"

    def candidates(self, world: World, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        server = world.server

        def block(part: np.ndarray, market: int, members: np.ndarray) -> np.ndarray:
            sparse = server.scores(part, market)
            floor = world.config.bm25_min_match * server.query_mass(part, market)
            dense = np.asarray(sparse.todense(), dtype=np.float32)
            dense[(dense <= 0) | (dense < floor[:, None])] = -np.inf
            # the server's columns are the market's keywords by bid rank; ours are by keyword row
            out = np.full((len(part), len(members)), -np.inf, dtype=np.float32)
            position = np.searchsorted(members, server.market_keywords(market))
            out[:, position] = dense
            return out

        return by_market(world, rows, k, block)

    def describe(self) -> dict[str, str]:
        return {"arm": self.name, "kind": "the simulator's BM25 serving policy (wrote the logs)"}


@dataclass
class OracleArm:
    """The ground truth as a retriever: score = the true grade's attractiveness relative to grade 3's (so ad rank
    = score × bid is the expected value of a click), grade 0 never retrieved."""

    name: str = "oracle"

    def candidates(self, world: World, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        def block(part: np.ndarray, market: int, members: np.ndarray) -> np.ndarray:
            grade = world.grades(np.repeat(part, len(members)), np.tile(members, len(part))).reshape(len(part), -1)
            value = np.asarray(world.config.attractiveness)[grade] / world.config.attractiveness[3]
            return np.where(grade > 0, value, -np.inf).astype(np.float32)

        return by_market(world, rows, k, block)

    def describe(self) -> dict[str, str]:
        return {"arm": self.name, "kind": "ground-truth oracle (true grade's click attractiveness)"}


@dataclass
class RandomArm:
    """Random ads of the market (seeded): a floor every model must clear."""

    seed: int = 0
    name: str = "random"

    def candidates(self, world: World, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        def block(part: np.ndarray, market: int, members: np.ndarray) -> np.ndarray:
            # one stream per query row: a row's random ads do not depend on which rows share the call
            return np.stack([np.random.default_rng(np.random.SeedSequence([self.seed, 4, int(row)]))
                             .random(len(members), dtype=np.float32) for row in part])

        return by_market(world, rows, k, block)

    def describe(self) -> dict[str, str]:
        return {"arm": self.name, "kind": "random ads of the market"}


@dataclass
class ModelArm:
    """A trained xc model as its method serves it, over the data set's labels (keyword ids of the world)."""

    model_uri: str
    method: str
    profile: str
    dataset: str
    home: Path
    tracking_uri: str  # the MLflow store that resolves model_uri
    run_id: str = ""  # the training run (its offline evaluation is what a replay reads)
    name: str = ""
    batch: int = 2048

    def __post_init__(self) -> None:
        self.name = self.name or self.method

    def candidates(self, world: World, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        from xc_core.datasets.container import XCDataset
        from xc_core.methods.base import Served, scorer_of
        from xc_core.paths import dataset_dir
        from xc_core.tracking.store import activate

        activate(self.tracking_uri)
        label_ids = XCDataset.load(dataset_dir(self.home, self.dataset)).label_ids
        scorer = scorer_of(self.method, Served(self.model_uri, self.home, self.dataset, self.profile))
        return scorer_candidates(world, rows, k, scorer, label_ids, self.batch)

    def describe(self) -> dict[str, str]:
        return {"arm": self.name, "kind": "xc model", "method": self.method, "profile": self.profile,
                "model_uri": self.model_uri}

    def content_key(self) -> str | None:
        """A digest of every file that decides this arm's candidates — the logged model's artifacts and the label
        index folder its method searches (its run-specific records aside) — or None when the model's artifacts are
        not local files. Two runs that serve the same bytes (``ramen`` on the ``dual_encoder`` encoder its graph
        test fell back to, ``ramen-clf`` on the classifier copied from ``dual_encoder-clf``) rank every query
        alike, so one run's candidates serve the other's test."""
        import hashlib
        from urllib.parse import urlparse

        import mlflow
        from mlflow.utils.file_utils import local_file_uri_to_path

        from xc_core.paths import index_dir
        from xc_core.provenance import hash_files

        client = mlflow.MlflowClient(self.tracking_uri)
        model_id = _logged_model_id(client, self.model_uri)
        if model_id is None:  # not a logged model of this store: the run id keys it
            return None
        location = client.get_logged_model(model_id).artifact_location
        if urlparse(location).scheme not in ("", "file"):  # a remote artifact store: not read here
            return None
        digest = hashlib.sha256()
        for root in (Path(local_file_uri_to_path(location)) / "artifacts",
                     index_dir(self.home, self.dataset, self.method, self.profile)):
            hash_files(digest, root, skip=_RUN_RECORDS)
        return digest.hexdigest()[:32]


def scorer_candidates(world: World, rows: np.ndarray, k: int, scorer: Any, label_ids: list[str],
                      batch: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """A model arm's candidates from its scorer (``texts, k -> (scores, label ids)``, as ``Method.scorer`` gives
    it) over the data set's labels ``label_ids``: each distinct query text scored once, then only the keywords of
    each row's market kept, best first, k per row."""
    label_rows = label_keyword_rows(world, label_ids)
    texts = world.queries["text"].to_numpy()[rows]
    distinct, inverse = np.unique(texts, return_inverse=True)
    # labels of other markets fall away below, so ask for enough to keep k in the query's market
    wide = min(len(label_ids), k * len(world.config.markets))
    scores = np.empty((len(distinct), wide), dtype=np.float32)
    ids = np.empty((len(distinct), wide), dtype=np.int64)
    for lo in range(0, len(distinct), batch):
        s, i = scorer(distinct[lo:lo + batch].tolist(), wide)
        scores[lo:lo + batch], ids[lo:lo + batch] = s, i
    kw = np.where(ids >= 0, label_rows[np.maximum(ids, 0)], -1)[inverse]
    s = scores[inverse]
    kw[(kw < 0) | (world.kw_market[np.maximum(kw, 0)] != world.q_market[rows][:, None])] = -1
    return _compact(s, kw, k)


@dataclass
class EncoderArm:
    """An encoder folder scored as the encoder methods serve it (cosine over the data set's labels ``label_ids`` /
    ``label_texts``), with exact search instead of the label index: an arm for any saved encoder (an epoch's
    checkpoint, a variant's served encoder) without a trained method around it."""

    name: str
    folder: Path
    label_ids: list[str]
    label_texts: list[str]
    max_length: int = 32
    _vectors: np.ndarray | None = field(default=None, repr=False)
    _encoder: Any = field(default=None, repr=False)

    def encoder(self) -> Any:
        """The text encoder of :attr:`folder` (loaded once)."""
        if self._encoder is None:
            from xc_core.encoders.text import encoder_for

            self._encoder = encoder_for(self.folder, self.max_length)
        return self._encoder

    def search(self, texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores float32, label positions int64), both (len(texts), k), best first: exact cosine search over
        the labels (their vectors encoded once)."""
        if self._vectors is None:
            self._vectors = self.encoder().encode(self.label_texts)
        queries = self.encoder().encode(texts)
        scores = queries @ self._vectors.T
        ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, ids, axis=1).astype(np.float32), ids.astype(np.int64)

    def candidates(self, world: World, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The model arm's own candidate step (:func:`scorer_candidates`: distinct texts once, enough to keep k in
        the query's market) over :meth:`search`."""
        return scorer_candidates(world, rows, k, self.search, self.label_ids, batch=len(rows) or 1)

    def describe(self) -> dict[str, str]:
        return {"arm": self.name, "kind": "encoder folder (exact search)", "folder": str(self.folder)}


def _logged_model_id(client: Any, uri: str) -> str | None:
    """The training run's logged model (``m-…``) an arm stands for: the one ``models:/m-…`` names; for a registry
    version (``models:/NAME@ALIAS``, ``models:/NAME/VERSION``) the one its ``trained_model_uri`` tag names — a
    registered version is scored as its training run's model, as the cache's run-id key had it. None otherwise."""
    path = uri.removeprefix("models:/")
    if uri.startswith("models:/m-") or not uri.startswith("models:/"):
        return path if uri.startswith("models:/m-") else None
    name, sep, alias = path.partition("@")
    version = (client.get_model_version_by_alias(name, alias) if sep
               else client.get_model_version(*path.rsplit("/", 1)) if "/" in path else None)
    trained = str((getattr(version, "tags", None) or {}).get("trained_model_uri", ""))
    return trained.removeprefix("models:/") if trained.startswith("models:/m-") else None


#: files of an index folder that record a run (its model URI, timings) rather than decide a ranking
_RUN_RECORDS = frozenset({"manifest.json", "index_report.json"})


def label_keyword_rows(world: World, label_ids: list[str]) -> np.ndarray:
    """World keyword row of each label (-1 for a label the world does not know)."""
    position = {kid: i for i, kid in enumerate(world.keywords["keyword_id"].to_list())}
    rows = np.array([position.get(label, -1) for label in label_ids], dtype=np.int64)
    if (rows < 0).all():
        raise ValueError("none of the data set's labels is a keyword of the simulated world: a simulated A/B test "
                         "needs a model trained on that world's data set (`synthetic`)")
    return rows


def _compact(scores: np.ndarray, kw: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Move each row's valid entries (kw ≥ 0) to the front in their order, keep k columns."""
    order = np.argsort(kw < 0, axis=1, kind="stable")[:, :k]
    kw = np.take_along_axis(kw, order, axis=1)
    scores = np.where(kw >= 0, np.take_along_axis(scores, order, axis=1), -np.inf).astype(np.float32)
    if kw.shape[1] < k:
        pad = k - kw.shape[1]
        kw = np.pad(kw, ((0, 0), (0, pad)), constant_values=-1)
        scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
    return scores, kw


BUILT_IN_ARMS = {"bm25": Bm25Arm, "oracle": OracleArm, "random": RandomArm}


def resolve_arm(spec: str, home: Path, dataset: str, profile: str, seed: int = 0) -> Arm:
    """An arm from the CLI's words: ``bm25`` / ``oracle`` / ``random``; an MLflow model URI
    (``models:/xc-encoder-synthetic@champion``, ``models:/xc-encoder-synthetic/3``, or a logged model
    ``models:/m-…`` trained in ``home``); or the name of a method trained in ``home`` at ``profile``."""
    if spec in BUILT_IN_ARMS:
        return RandomArm(seed=seed) if spec == "random" else BUILT_IN_ARMS[spec]()
    method, model_profile, uri, store, run_id = _model(spec, home, dataset, profile)
    return ModelArm(model_uri=uri, method=method, profile=model_profile, dataset=dataset, home=home,
                    tracking_uri=store, run_id=run_id,
                    name=spec if not spec.startswith("models:/") else f"{method} ({spec.removeprefix('models:/')})")


def _model(spec: str, home: Path, dataset: str, profile: str) -> tuple[str, str, str, str, str]:
    """(method, profile, model URI, tracking URI, training run id) of a URI or a method name."""
    from xc_core.paths import model_dir
    from xc_core.tracking.store import tracking_uri
    from xc_core.training.record import TrainedModel

    if not spec.startswith("models:/"):
        from xc_core.methods import get_method

        try:
            get_method(spec)
        except ValueError as error:  # the CLI prints a LookupError as one line
            raise LookupError(f"unknown arm '{spec}': use {', '.join(BUILT_IN_ARMS)}, a model URI "
                              f"(models:/NAME@ALIAS) or a trained method — {error}") from None
        trained = TrainedModel.load(model_dir(home, dataset, spec, profile))
        return spec, profile, trained.model_uri, trained.tracking_uri, trained.mlflow_run_id
    tags = _registry_tags(spec, home)
    if tags is not None:
        return tags["method"], tags["profile"], spec, tracking_uri(home), tags.get("mlflow_run_id", "")
    for summary in sorted((home / "models").glob("*/*/train_summary.json")):
        trained = TrainedModel.load(summary.parent)
        if trained.model_uri == spec:
            return trained.method, trained.profile, spec, trained.tracking_uri, trained.mlflow_run_id
    raise LookupError(f"{spec}: neither a registered version (models:/NAME@ALIAS, models:/NAME/VERSION) nor a "
                      f"model trained in {home}")


def _registry_tags(uri: str, home: Path) -> dict[str, str] | None:
    """Tags of a registry version named by ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` (None otherwise)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from xc_core.tracking.store import tracking_uri

    path = uri.removeprefix("models:/")
    client = mlflow.MlflowClient(tracking_uri(home))
    try:
        if "@" in path:
            name, alias = path.split("@", 1)
            version = client.get_model_version_by_alias(name, alias)
        elif "/" in path:
            name, number = path.rsplit("/", 1)
            version = client.get_model_version(name, number)
        else:
            return None
    except MlflowException as error:
        raise LookupError(f"{uri}: not in the registry of {home} ({error.message.splitlines()[0]})") from None
    if "method" not in version.tags:
        raise LookupError(f"{uri}: version {version.version} has no method tag (registered outside xc?)")
    return dict(version.tags)
