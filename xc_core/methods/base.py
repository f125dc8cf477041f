"""What a method is: it trains (with any trainer), scores test queries (top-k labels with scores) and is served
from the registry. The stages, the report, the registry and ``xc predict`` call only what :class:`Method`
declares and find a method by name here, so none of them names a method or assumes a text encoder.

A method module builds an object that satisfies :class:`Method` and calls :func:`register`; ``xc_core.methods``
imports every built-in module, so ``get_method(name)`` sees all of them. Adding a method is adding a module
(docs/training.md, "Adding a method"); the dual-encoder family is one implementation (``methods/encoder``). What a
method needs (:class:`Requires`) and the parts it plays (:class:`Roles`) are declared on it, so run order, the default
lists and the references come from the registry (``methods/roles.py``), never from a list of names.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.profiles import Profile
from xc_core.training.record import TrainedModel

#: ``on_metrics(metrics, step)``: live training metrics for a caller (Dagster logs them)
MetricsCallback = Callable[[dict[str, float], int], None]
#: ``scorer(texts, k) -> (scores, label ids)``, both (len(texts), k); id -1 pads a row with fewer than k labels
Scorer = Callable[[list[str], int], tuple[np.ndarray, np.ndarray]]


def stage_one(home: Path, dataset: str, profile: str, method: str, who: str) -> TrainedModel:
    """The trained encoder that ``who`` (IRENE, TextGNN on a stage I) builds on: ``method``'s model of this home, data
    set and profile (never the registry's live champion: the command and its config decide)."""
    from xc_core.paths import model_dir
    from xc_core.training.record import SUMMARY

    folder = model_dir(home, dataset, method, profile)
    if not (folder / SUMMARY).exists():
        raise FileNotFoundError(f"{who}'s stage I is {method}'s trained encoder and {folder} has none: train it "
                                f"first (`xc train --dataset {dataset} --method {method} --profile {profile}`)")
    trained = TrainedModel.load(folder)
    if "encoder_dir" not in trained.summary:
        raise ValueError(f"{who}'s stage I must be a method with a text encoder; {method} records none")
    return trained


def stage_one_of(job: TrainJob, method: str, cfg: Any, who: str) -> TrainedModel:
    """Stage I's trained model for a method that trains on from its encoder (TextGNN, OAK) with the TrainConfig
    ``cfg``; refused when ``cfg`` would draw other validation rows than stage I held out (its validation documents
    would be trained on, and the epoch choice would read rows stage I learnt)."""
    from xc_core.training.validation import recorded_split_config, split_record

    base = stage_one(job.home, job.dataset.name, job.profile.name, method, who)
    theirs = split_record(recorded_split_config(base.summary, f"{who}'s stage I ({method} on {job.dataset.name})"))
    ours = split_record(cfg)
    if differ := {k: (ours[k], theirs.get(k)) for k in ours if ours[k] != theirs.get(k)}:
        raise ValueError(f"{who} on stage I {method}: its validation split differs from stage I's ("
                         + ", ".join(f"{k} {a!r} here, {b!r} there" for k, (a, b) in differ.items())
                         + f"): train both with the same profile, seed and split settings, or retrain {method}")
    return base


def stage_one_encoder(enc_cfg: Any, base: TrainedModel | None) -> Any:
    """The EncoderConfig ``enc_cfg`` pointed at stage I's encoder folder (its light tower included) and max length;
    unchanged without a stage I."""
    if base is None:
        return enc_cfg
    return enc_cfg.model_copy(update={"model_path": base.summary["encoder_dir"],
                                      "max_length": int(base.summary.get("max_length", enc_cfg.max_length))})


def stage_one_record(base: TrainedModel | None) -> dict[str, Any]:
    """What a model trained on from a stage I records of it (the registry tags the version with the encoder's run)."""
    if base is None:
        return {"stage_one": ""}
    return {"stage_one": base.method, "stage_one_model_uri": base.model_uri, "depends_on_run_id": base.mlflow_run_id}


@dataclass(frozen=True)
class TrainJob:
    """One training as the stage hands it to a method, inside the MLflow run the stage opened for it."""

    dataset: XCDataset
    profile: Profile
    home: Path
    out: Path  # the method's model folder (paths.model_dir): empty unless resuming
    resume: bool = False
    progress: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)  # the caller's TrainConfig fields (Dagster launchpad)
    on_metrics: MetricsCallback | None = None


@dataclass(frozen=True)
class Fitted:
    """What a method's training leaves: the MLflow model it logged in the run (what the registry registers and
    serving loads) and its own record, kept in ``train_summary.json`` and read back as ``TrainedModel.summary``."""

    model_uri: str
    summary: dict[str, Any]


@dataclass
class Predictions:
    scores: sp.csr_matrix  # test documents × labels, top-k scores per row
    index_dir: Path  # where the method saved its index and the test queries' top-k
    test_split: str  # evaluation.record.fingerprint_test_split of the data set the predictions are for
    model_uri: str = ""  # the MLflow model that scored them
    index_recall_at_10: float | None = None  # approximate vs exact search on the test queries (None: no ANN index)
    index_ms_per_query: float | None = None
    exact_ms_per_query: float | None = None
    #: where a test query's time goes, ms per query by step: ``encoder`` (texts → vectors), ``graph`` (a method's
    #: graph steps at inference: linker, neighbours, GNN), ``search`` (the label index) — the costs table's split
    steps_ms_per_query: dict[str, float] = field(default_factory=dict)

    def index_metrics(self) -> dict[str, float]:
        """The search measurements a method with an ANN index has, under the evaluation summary's keys
        (each step as ``<step>_ms_per_query``)."""
        found = {"hnsw_recall@10": self.index_recall_at_10, "ms_per_query": self.index_ms_per_query,
                 "exact_ms_per_query": self.exact_ms_per_query,
                 **{f"{step}_ms_per_query": ms for step, ms in self.steps_ms_per_query.items()}}
        return {k: v for k, v in found.items() if v is not None}


@dataclass(frozen=True)
class Served:
    """A registered model version to serve: what a method needs to find its model and its artefacts."""

    model_uri: str  # ``models:/<name>@champion``
    home: Path
    dataset: str
    profile: str


def pyfunc_index_scorer(method: str, served: Served) -> Scorer:
    """The common serving path: the registered pyfunc model turns query texts into vectors, and the label index the
    evaluation built for ``method`` (manifest-checked against the data set) is searched."""
    import mlflow

    from xc_core.index import LabelIndex
    from xc_core.paths import index_dir

    model = mlflow.pyfunc.load_model(served.model_uri)
    index = LabelIndex.load(index_dir(served.home, served.dataset, method, served.profile),
                            expect_dataset=served.dataset)

    def score(texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        return index.search(np.asarray(model.predict(texts), dtype=np.float32), k)

    return score


def scorer_of(method: str, served: Served) -> Scorer:
    """How a model answers: a registry version (``models:/NAME/VERSION``, ``@ALIAS``) by itself — the served model
    registration bundles (``tracking.served``), as a deployment would; a training run's model (or a version
    registered before served models existed) through its method's scorer and the home's index."""
    from xc_core.tracking.served import is_registry_uri, load_registered

    if is_registry_uri(served.model_uri) and (model := load_registered(served.model_uri)) is not None:
        return model.search
    return get_method(method).scorer(served)


@dataclass(frozen=True)
class Requires:
    """What a method needs besides its data set (and its anchor sets: ``Method.needs_anchor_sets``)."""

    #: methods whose trained model this one builds on (a ``-clf`` its base's encoder, IRENE its stage I): run after
    #: them wherever both run (:func:`xc_core.methods.roles.dependency_order`)
    methods: tuple[str, ...] = ()
    #: a test query needs the graph to be answered (linked nodes, neighbours): not a text-only model at serving
    graph_at_inference: bool = False


@dataclass(frozen=True)
class Roles:
    """The parts a method plays in the default runs, the results and the comparisons (all off by default: a new
    method joins a list by saying so here, with no other edit). Lists keep registration order, requirements first."""

    headline: bool = False  # the headline comparison: listed first (CLI help, Dagster partitions)
    run: bool = False  # trained and gated by default: ``make run``, ``xc run``, ``xc promote``, the nightly chain
    results: bool = False  # on the results pages by default (``xc results``)
    default: bool = False  # what a single-method command uses when none is named (one method)
    control: bool = False  # the A/B tests' control arm, every method tested against it (one method)
    cost_reference: bool = False  # the costs table's ratios are to this method's costs (one method)
    #: paired against every other method on the results page; of two references the lower rank reads as the method
    #: (``ramen − dual_encoder``, not both signs). None: not a reference
    reference: int | None = None
    keywords: bool = False  # novel keywords streamed in later go into its serving index (``xc add-keywords``)


class Method(Protocol):
    """A training method: the unit the CLI, Dagster's method partitions, the report and the registry handle."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def needs_anchor_sets(self) -> bool:
        """True: trains on the graph, so the stages refuse to run it before anchor sets are materialized."""
        ...

    @property
    def baselines(self) -> tuple[str, ...]:
        """Methods the report pairs this one against (this − baseline); the first gives the DIFF@k table."""
        ...

    @property
    def ablation_of(self) -> str | None:
        """The full method this one switches an ingredient off; the report pairs full − this."""
        ...

    @property
    def requires(self) -> Requires:
        """What it builds on and needs at inference."""
        ...

    @property
    def roles(self) -> Roles:
        """The parts it plays by default (run, results, headline, control, references)."""
        ...

    def train(self, job: TrainJob) -> Fitted:
        """Train, log parameters, metrics and one MLflow model to the active run.

        Args:
            job: the data set, profile, home, model folder and the caller's overrides, inside the stage's run.

        Returns:
            The logged model's URI and the method's record (``train_summary.json``).
        """
        ...

    def predict(self, dataset: XCDataset, trained: TrainedModel, index_dir: Path, *, reuse: bool = False,
                progress: bool = False) -> Predictions:
        """Top-k labels for every test query.

        Args:
            dataset: the data set whose test queries are scored (a validation view for the promotion split).
            trained: the trained model's record.
            index_dir: where the method saves its index and the queries' top-k.
            reuse: what an earlier call saved in ``index_dir`` for this model and test split may stand (the
                evaluation after the index stage); else score anew.
            progress: show progress bars.

        Returns:
            The top-k scores (test documents × labels), the index folder, the split's fingerprint and the index's
            own metrics.
        """
        ...

    def analyse(self, dataset: XCDataset, trained: TrainedModel, predictions: Predictions,
                out: Path) -> dict[str, Any]:
        """Method-specific analyses saved beside the evaluation.

        Args:
            dataset: the data set the predictions are for.
            trained: the trained model's record.
            predictions: what :meth:`predict` returned.
            out: the evaluation folder.

        Returns:
            Entries that join the evaluation's summary (``tables`` are shown in the report); empty for none.
        """
        ...

    def scorer(self, served: Served) -> Scorer:
        """The registered model as a function of query texts: what ``xc predict`` serves.

        Args:
            served: the registered version to serve: its model URI, the home, the data set and the profile.

        Returns:
            ``scorer(texts, k) -> (scores, label ids)``, both (len(texts), k), id -1 padding a short row.
        """
        ...


@runtime_checkable
class TakesKeywords(Protocol):
    """A method whose serving index takes novel keywords without retraining (the ``keywords`` role's method):
    ``xc add-keywords`` and the ``streamed_keywords`` asset call this, naming no method."""

    def add_keywords(self, home: Path, dataset: str, profile: str, path: Path, batch: int = 4096) -> dict[str, Any]:
        """Stream the keywords of a CSV/Parquet file into the method's serving index of ``dataset`` at ``profile``;
        what was added and skipped, and the index after it."""
        ...


@runtime_checkable
class Restrictable(Protocol):
    """A graph method that can be restricted to some anchor sets (``ramen@links``)."""

    def restrict(self, name: str, sets: list[str]) -> Method: ...


METHODS: dict[str, Method] = {}
#: method name → the module that registered it: with the method's class module, the code its version covers
#: (``xc_core.methods.versions``)
REGISTERED_IN: dict[str, str] = {}
M = TypeVar("M", bound=Method)


def register(method: M) -> M:
    """Add ``method`` to the registry under its name (a method module calls this once, at import).

    Returns:
        ``method`` itself, so a module can write ``OAK = register(OakMethod(...))``.

    Raises:
        ValueError: a method of that name is registered already.
    """
    if method.name in METHODS:
        raise ValueError(f"method '{method.name}' registered twice")
    METHODS[method.name] = method
    REGISTERED_IN[method.name] = sys._getframe(1).f_globals.get("__name__", "")
    return method


class SettingError(LookupError, ValueError):
    """A training setting (``xc train --set``, a launchpad override) that the method would not use."""


def check_settings(method: Method, overrides: dict[str, Any]) -> None:
    """Refuse, before anything is trained or removed, a setting the method would silently ignore.

    A method reads ``TrainConfig``'s fields and, where it has one, its own config's (the pydantic ``cfg`` of IRENE,
    TextGNN, OAK). Switches a method sets itself (``EncoderMethod.overrides``: ``ramen`` *is* the bandit) win over
    the caller's, so setting one to another value would be ignored too.

    Raises:
        SettingError: an unknown field (with the nearest known names), or a clash with the method's own switches
            (naming the registered methods that have the asked-for value, e.g. ``ramen_no_bandit``).
    """
    import difflib

    from xc_core.training.config import TrainConfig

    own = getattr(getattr(method, "cfg", None), "model_fields", {})
    known = set(TrainConfig.model_fields) | set(own)
    if unknown := sorted(set(overrides) - known):
        near = sorted({m for k in unknown for m in difflib.get_close_matches(k, known, n=3)})
        raise SettingError(f"{method.name}: no setting named {', '.join(unknown)}"
                           + (f" (did you mean {', '.join(near)}?)" if near else "")
                           + "; the fields are TrainConfig's (docs/training.md)"
                           + (f" and {type(method.cfg).__name__}'s" if own else ""))  # type: ignore[attr-defined]
    switches: dict[str, Any] = getattr(method, "overrides", {})
    if clashes := {k: v for k, v in overrides.items() if k in switches and switches[k] != v}:
        raise SettingError(_clash_message(method, switches, clashes))


def _clash_message(method: Method, switches: dict[str, Any], clashes: dict[str, Any]) -> str:
    """The clash refused by :func:`check_settings`, with the registered methods that have the asked-for values:
    first those that differ from ``method`` in exactly these switches (its ablation), else any that set them."""
    asked = ", ".join(f"{k}={v!r}" for k, v in clashes.items())
    own = ", ".join(f"{k}={switches[k]!r}" for k in clashes)
    wanted = {**switches, **clashes}
    others = [m for m in METHODS.values() if getattr(m, "trains", True) and isinstance(getattr(m, "overrides", None),
                                                                                         dict)]
    fits = ([m.name for m in others if m.overrides == wanted]  # type: ignore[attr-defined]
            or [m.name for m in others if all(m.overrides.get(k) == v  # type: ignore[attr-defined]
                                              for k, v in clashes.items())])
    hint = f"train {' or '.join(fits)} instead" if fits else "no registered method has that setting"
    return (f"{method.name} sets {own} itself (it is what the method is), so --set {asked} would be ignored: "
            f"drop the setting, or {hint}")


def get_method(name: str) -> Method:
    """A registered method, or a graph method restricted to some anchor sets: ``ramen@links`` or
    ``ramen@links+categories`` (both sides, only those sets) — the "which graph helps" ablation on any data
    set without a module per set name.

    Args:
        name: a registered method's name, optionally ``@`` a ``+``-joined list of anchor-set names.

    Returns:
        The method (restricted to those sets when named).

    Raises:
        ValueError: an unknown method, or sets named for a method that does not train on anchor sets.
    """
    base, _, restrict = name.partition("@")
    if base not in METHODS:
        raise ValueError(f"unknown method '{base}': choose one of {', '.join(sorted(METHODS))}")
    method = METHODS[base]
    if not restrict:
        return method
    if not isinstance(method, Restrictable) or not method.needs_anchor_sets:
        raise ValueError(f"'{name}': only a method that trains on anchor sets can be restricted to some")
    return method.restrict(name, restrict.split("+"))
