"""The registered model: query texts in, the top-k ads (labels) out — self-contained, so the folder MLflow
stores is everything a machine without an xc home needs to answer.

A served model bundles, as artefacts of one MLflow pyfunc model (logged "from code", ``served_entry.py``):

- ``model/``: the method's own pyfunc model as its training logged it (texts → query vectors: the encoder, or
  TextGNN's / OAK's query tower; a ``-clf`` method's W, fusion weights and lexical channel travel inside it);
- ``index/``: the label index the evaluation built for that model (manifest-checked), with the classifier
  index and label vectors of a ``-clf`` method and the keywords streamed into it so far (IRENE); empty for a
  method whose evaluation builds no index: its model's output is then one score per label (``search: scores``);
- ``labels.parquet``: index id → label id and text;
- ``served.json``: what it is (method, data set, profile, the training run's model URI, the largest k, the
  encoder's runtime);
- ``encoder.onnx``: the method's text encoder for ONNX Runtime, when at registration the export reproduced
  torch's vectors and the served search on it ranked sample queries' labels as on torch, up to ties
  (``encoders/onnx_runtime.py``, ``index/ties.py``; faster on CPU, same rankings); else the encoder runs on torch.

Beside the artefacts it carries the code they need (``code/xc_core``) and pins every package that code imports to
load and answer (``requirements.txt``), so it deploys outside xc's checkout (``log_served``).

Every method answers through the same search as its evaluation: the method's model embeds the queries, and the
index is searched — fused with the classifier index when the method's model carries a classifier stage. The
pyfunc ``predict(queries, params={"k": 10, "output": "labels" | "embeddings"})`` returns, per query,
``{"query", "labels": [{"label_id", "label", "score"}…]}`` (or ``{"query", "embedding"}``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from mlflow.pyfunc import PythonModel

from xc_core.classifier.fusion import CLASSIFIER_INDEX, LABEL_VECTORS, FusedClassifier, fused_search
from xc_core.encoders.text import TextEncoder, transformers_deferred
from xc_core.index import IndexError_, LabelIndex
from xc_core.tracking.requirements import SERVED_REQUIREMENTS, pinned, stage_code

if TYPE_CHECKING:
    from xc_core.encoders.onnx_runtime import ExportCache

FORMAT = 1
SERVED_JSON, LABELS_FILE, ONNX_FILE = "served.json", "labels.parquet", "encoder.onnx"
STREAMED_FILE = "streamed_labels.parquet"  # keywords streamed into an index after training (IRENE's stream.py)
ARTIFACT_NAME = "served"  # the logged model's name inside the training run
#: largest k a request may ask for (a served model's ``max_k`` is this, or the label count when smaller)
MAX_K = 1000
OUTPUTS = ("labels", "embeddings")
#: what the index folder holds that answering needs (the evaluation's test top-k and reports stay behind)
INDEX_FILES = ("index.faiss", "manifest.json", LABEL_VECTORS, STREAMED_FILE)


class ServedModelError(RuntimeError):
    """A served model that cannot load or answer: missing or corrupt parts, or a bad request parameter.
    The message is one line that names the part and what to do."""


@dataclass(frozen=True)
class Labels:
    """Index id → (label id, text): the data set's labels, then the keywords streamed in after training."""

    ids: list[str]
    texts: list[str]
    streamed: dict[int, tuple[str | None, str]] = field(default_factory=dict)

    def name(self, i: int) -> tuple[str | None, str | None, bool]:
        """(label id, text, streamed) of index id ``i``; unknown ids give (None, None, False)."""
        if 0 <= i < len(self.texts):
            return self.ids[i], self.texts[i], False
        if i in self.streamed:
            keyword_id, text = self.streamed[i]
            return keyword_id, text, True
        return None, None, False

    @classmethod
    def load(cls, labels_file: Path, index_folder: Path) -> Labels:
        frame = pl.read_parquet(labels_file)
        return cls(frame["label_id"].to_list(), frame["text"].to_list(), _streamed(index_folder))


def _streamed(index_folder: Path) -> dict[int, tuple[str | None, str]]:
    path = index_folder / STREAMED_FILE
    if not path.exists():
        return {}
    return {int(r["id"]): (r["keyword_id"], r["text"]) for r in pl.read_parquet(path).iter_rows(named=True)}


@dataclass(frozen=True)
class ServedModel:
    """A loaded served model: ``search`` (ids and scores, the evaluation's search path) and ``answer``
    (what a client sees). Immutable: a refreshed index is a new object, so a request in flight keeps the one it
    started with."""

    embedder: Any  # the method's pyfunc model: predict(list[str]) → (n, dim) query vectors, or (n, labels) scores
    index: LabelIndex | None  # None: the method's model scores every label itself (no index)
    labels: Labels
    info: dict[str, Any]
    fused: FusedClassifier | None = None
    classifier_index: LabelIndex | None = None
    label_vectors: np.ndarray | None = None

    @property
    def max_k(self) -> int:
        return int(self.info.get("max_k", MAX_K))

    @property
    def index_sha256(self) -> str:
        return str(self.info.get("index_sha256", ""))

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.embedder.predict(list(texts)), dtype=np.float32)

    @property
    def n_served(self) -> int:
        """Labels it can answer: the data set's and the keywords streamed in."""
        return self.index.count if self.index is not None else len(self.labels.texts)

    def search(self, texts: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, index ids), (len(texts), ≤ k) best first; id −1 pads."""
        vectors = self.embed(texts)
        if self.index is None:
            return top_k(vectors, k, len(self.labels.texts))
        if self.fused is None or self.classifier_index is None or self.label_vectors is None:
            return self.index.search(vectors, k)
        return fused_search(vectors, self.index, self.classifier_index, self.label_vectors, self.fused, k,
                            texts=list(texts))

    def answer(self, texts: list[str], k: int) -> list[dict[str, Any]]:
        check_k(k, self.max_k)
        scores, ids = self.search(texts, k)
        return [{"query": text, "labels": self.named(s, i)} for text, s, i in zip(texts, scores, ids, strict=True)]

    def named(self, scores: np.ndarray, ids: np.ndarray) -> list[dict[str, Any]]:
        out = []
        for score, i in zip(scores, ids, strict=True):
            if i < 0:
                continue
            label_id, text, streamed = self.labels.name(int(i))
            out.append({"label_id": label_id, "label": text, "score": round(float(score), 6),
                        **({"streamed": True} if streamed else {})})
        return out

    def with_index(self, folder: Path) -> ServedModel:
        """The same model over another copy of its index (the home's, after keywords were streamed into it):
        refused unless the index was built for the same trained model and data set."""
        if self.index is None:
            return self
        index = LabelIndex.load(folder, expect_model_uri=self.index.model_uri, expect_dataset=self.index.dataset)
        labels = replace(self.labels, streamed=_streamed(folder))
        info = {**self.info, "index_sha256": _manifest(folder).get("sha256", "")}
        return replace(self, index=index, labels=labels, info=info)


def top_k(scores: np.ndarray, k: int, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of per-label scores (a method served without an index), best first."""
    if scores.ndim != 2 or scores.shape[1] != n_labels:
        raise ServedModelError(f"the method's model gave scores of shape {scores.shape}, expected (queries, "
                               f"{n_labels}) — a method with no label index must score every label")
    k = min(k, n_labels)
    ids = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, ids, axis=1), axis=1, kind="stable")
    ids = np.take_along_axis(ids, order, axis=1)
    return np.take_along_axis(scores, ids, axis=1), ids.astype(np.int64)


def check_k(k: Any, max_k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= int(k) <= max_k:
        raise ServedModelError(f"k must be an integer from 1 to {max_k}, got {k!r}")
    return int(k)


def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / "manifest.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise ServedModelError(f"{path}: unreadable index manifest ({exc})") from exc


def load_served(artifacts: dict[str, str]) -> ServedModel:
    """A served model from its artefact paths (MLflow's ``context.artifacts``); every failure is one
    :class:`ServedModelError` line naming the part."""
    import mlflow

    missing = [name for name in ("model", "index", "labels", "served") if not Path(artifacts.get(name, "")).exists()]
    if missing:
        raise ServedModelError(f"served model incomplete: {', '.join(missing)} missing — re-register the method "
                               "(`xc promote`)")
    info = json.loads(Path(artifacts["served"]).read_text())
    if info.get("format") != FORMAT:
        raise ServedModelError(f"served model format {info.get('format')!r}, this xc reads {FORMAT}: re-register it")
    folder = Path(artifacts["index"])
    try:
        index = LabelIndex.load(folder, expect_dataset=info["dataset"]) if info.get("search") != "scores" else None
        classifier_index = None
        if index is not None and (folder / CLASSIFIER_INDEX).is_dir():
            classifier_index = LabelIndex.load(folder / CLASSIFIER_INDEX, expect_dataset=info["dataset"])
    except IndexError_ as exc:
        raise ServedModelError(str(exc)) from exc
    on_onnx = "onnx" in artifacts and Path(artifacts["onnx"]).exists()
    try:
        # served on ONNX Runtime, the encoder's transformer is never built: its weights are in the graph
        with transformers_deferred() if on_onnx else contextlib.nullcontext():
            embedder = mlflow.pyfunc.load_model(artifacts["model"])
    except Exception as exc:  # MLflow raises many kinds; each means the method's model folder is unusable
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ServedModelError(f"{artifacts['model']}: the method's model does not load ({first})") from exc
    encoder = getattr(embedder.unwrap_python_model(), "encoder", None)
    if on_onnx and isinstance(encoder, TextEncoder):
        encoder.use_onnx(artifacts["onnx"])  # checked against torch at registration
    else:
        info["encoder_runtime"] = "torch"
    fused = getattr(embedder.unwrap_python_model(), "classifier", None)
    if fused is not None and classifier_index is None:
        raise ServedModelError(f"{folder}: the model has a classifier stage but the index has no {CLASSIFIER_INDEX}/")
    vectors = np.load(folder / LABEL_VECTORS) if fused is not None else None
    labels = Labels.load(Path(artifacts["labels"]), folder)
    if len(labels.texts) != int(info["n_labels"]):
        raise ServedModelError(f"{artifacts['labels']}: {len(labels.texts)} labels, served.json says "
                               f"{info['n_labels']}")
    info["index_sha256"] = _manifest(folder).get("sha256", "") if index is not None else ""
    return ServedModel(embedder, index, labels, info, fused if isinstance(fused, FusedClassifier) else None,
                       classifier_index, vectors)


class ServedPyfunc(PythonModel):
    """The MLflow face of :class:`ServedModel`: ``mlflow models serve`` and ``mlflow.pyfunc.load_model`` use it."""

    def load_context(self, context: Any) -> None:
        self.model = load_served(dict(context.artifacts))

    def predict(self, context, model_input: list[str], params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Per query the top-``k`` labels (``output="labels"``, the default) or its vector (``"embeddings"``)."""
        from mlflow.exceptions import INVALID_PARAMETER_VALUE, MlflowException

        params = params or {}
        texts = [str(t) for t in model_input]
        output = params.get("output", "labels")
        try:
            if output not in OUTPUTS:
                raise ServedModelError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
            if output == "embeddings":
                return [{"query": t, "embedding": v.tolist()} for t, v in zip(texts, self.model.embed(texts),
                                                                               strict=True)]
            return self.model.answer(texts, params.get("k", 10))
        except ServedModelError as exc:  # the scoring server answers 400 with this one line
            raise MlflowException(str(exc), error_code=INVALID_PARAMETER_VALUE) from exc


def bundle_parts(index_folder: Path, label_ids: list[str], label_texts: list[str], info: dict[str, Any],
                 out: Path) -> dict[str, str]:
    """Write the served model's own parts into ``out`` (the index's serving files, labels, served.json); returns
    their artefact paths (the method's model is added by the caller)."""
    index = out / "index"
    index.mkdir(parents=True)
    (index / ".keep").touch()  # an artefact folder MLflow keeps even when empty
    info = {**info, "search": "index" if (index_folder / "manifest.json").exists() else "scores"}
    for name in INDEX_FILES if info["search"] == "index" else ():
        if (index_folder / name).exists() and (name != LABEL_VECTORS or (index_folder / CLASSIFIER_INDEX).is_dir()):
            shutil.copy2(index_folder / name, index / name)
    if (index_folder / CLASSIFIER_INDEX).is_dir():
        shutil.copytree(index_folder / CLASSIFIER_INDEX, index / CLASSIFIER_INDEX)
    if info["search"] == "index":
        LabelIndex.load(index, expect_dataset=info["dataset"])  # refuse to register a corrupt index
    labels = out / LABELS_FILE
    ids = list(label_ids) if label_ids else [str(i) for i in range(len(label_texts))]
    pl.DataFrame({"id": np.arange(len(label_texts), dtype=np.int64), "label_id": ids, "text": list(label_texts)},
                 schema={"id": pl.Int64, "label_id": pl.String, "text": pl.String}).write_parquet(labels)
    served = out / SERVED_JSON
    max_k = min(MAX_K, max(len(label_texts), 1))
    served.write_text(json.dumps({"format": FORMAT, "n_labels": len(label_texts), "max_k": max_k, **info},
                                 indent=2) + "\n")
    return {"index": str(index), "labels": str(labels), "served": str(served)}


def log_served(trained_model_uri: str, run_id: str, index_folder: Path, label_ids: list[str],
               label_texts: list[str], info: dict[str, Any], onnx_cache: ExportCache | None = None) -> Any:
    """Log the served model into the training run ``run_id`` (beside the method's own model) and return its
    ``ModelInfo``: the method's model is copied from ``trained_model_uri``, the index from ``index_folder``.

    Deployable as it is: it carries the xc_core package (``code_paths``: the entry point and the method's model
    import it) and pins every package its load and predict import (``requirements.py``), so a fresh virtualenv
    built from its ``requirements.txt`` alone loads it (``benchmarks/deploy_check.py``). ``onnx_cache``: the
    store of exported encoder graphs to reuse (None: export afresh)."""
    import mlflow

    with tempfile.TemporaryDirectory(prefix="xc-served-") as tmp:
        work = Path(tmp)
        artifacts = bundle_parts(index_folder, label_ids, label_texts, info, work)
        artifacts["model"] = mlflow.artifacts.download_artifacts(trained_model_uri, dst_path=str(work / "model"))
        runtime = _onnx_encoder(Path(artifacts["model"]), work / ONNX_FILE, label_texts[:64], onnx_cache)
        if (work / ONNX_FILE).exists():
            artifacts["onnx"] = str(work / ONNX_FILE)
        served = Path(artifacts["served"])
        served.write_text(json.dumps({**json.loads(served.read_text()), **runtime}, indent=2) + "\n")
        example = (["running shoes", "bank of america"], {"k": 10, "output": "labels"})
        code = stage_code(work / "code")
        with mlflow.start_run(run_id=run_id), warnings.catch_warnings():
            # the answer's rows mix strings and floats (dict[str, Any]): MLflow warns it cannot validate Any
            warnings.filterwarnings("ignore", message=".*Any type hint is inferred as AnyType.*")
            return mlflow.pyfunc.log_model(
                name=ARTIFACT_NAME, python_model=str(Path(__file__).with_name("served_entry.py")),
                artifacts=artifacts, pip_requirements=pinned(SERVED_REQUIREMENTS), code_paths=[str(code)],
                input_example=example)


#: labels per sample query whose ranking the ONNX check compares with torch's
ONNX_CHECK_K = 10


def _onnx_encoder(model_folder: Path, path: Path, sample: list[str],
                  cache: ExportCache | None = None) -> dict[str, Any]:
    """Export the text encoder of the method's model (when its pyfunc exposes one as ``.encoder``: the encoder
    family, IRENE, OAK) for ONNX Runtime, checked against torch on ``sample`` (``encoders/onnx_runtime.py``), then
    through the served search itself (:func:`_onnx_ranks_as_torch`). The bundle's other parts (``bundle_parts``)
    lie beside ``path``."""
    from xc_core.encoders.onnx_runtime import export_checked

    bundle = path.parent
    served = load_served({"model": str(model_folder), "index": str(bundle / "index"),
                          "labels": str(bundle / LABELS_FILE), "served": str(bundle / SERVED_JSON)})
    encoder = getattr(served.embedder.unwrap_python_model(), "encoder", None)
    if not isinstance(encoder, TextEncoder):
        return {"encoder_runtime": "torch", "onnx": "the method's model has no text encoder of its own to export"}
    runtime = export_checked(encoder, path, sample, cache)
    return _onnx_ranks_as_torch(served, encoder, path, sample, runtime) if path.exists() else runtime


def _onnx_ranks_as_torch(served: ServedModel, encoder: TextEncoder, path: Path, sample: list[str],
                         runtime: dict[str, Any]) -> dict[str, Any]:
    """Keep the export only when the served model ranks ``sample``'s labels as with torch, up to ties
    (``index/ties.py``). Why the whole search and not the encoder's vectors: what the encoder feeds can amplify
    its float noise — OAK's linker picks graph nodes by score, so a near tie there changes the neighbours the GCN
    convolves and with them the labels; the vectors alone pass such a model."""
    from xc_core.index.ties import TIE, rankings_agree

    k = max(1, min(ONNX_CHECK_K, served.n_served))
    reference = served.search(sample, k)
    encoder.use_onnx(path)
    try:
        agree = rankings_agree(reference, served.search(sample, k))
        why = f"on {int((~agree).sum())} of {len(sample)} label texts"
    except Exception as exc:  # no ONNX is a slower server, not a broken one (as in export_checked)
        agree, why = np.zeros(1, dtype=bool), f"the search on ONNX failed: {type(exc).__name__}"
    finally:
        encoder.use_onnx(None)
    if agree.all():
        return {**runtime, "onnx": f"{runtime['onnx']}; the same top-{k} labels up to ties ({TIE:g})"}
    path.unlink(missing_ok=True)
    return {"encoder_runtime": "torch", "onnx": f"the served top-{k} labels differ from torch's beyond ties "
                                                f"({TIE:g}): {why}"}


def load_registered(model_uri: str, scratch: Path | None = None) -> ServedModel | None:
    """The served model behind a registry URI (``models:/NAME@ALIAS`` / ``models:/NAME/VERSION``), or None when
    that version is not a served model (registered by an older xc: its method's scorer still serves it).

    Downloaded into a temporary folder (under ``scratch``, else the system's) that is removed once loaded:
    every part lives in memory, and a 700 MB aol-1000 copy per call would otherwise pile up."""
    import mlflow

    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    path = list(sys.path)
    with tempfile.TemporaryDirectory(prefix="xc-load-", dir=scratch) as tmp:
        model = mlflow.pyfunc.load_model(model_uri, dst_path=tmp)
        python_model = model.unwrap_python_model()
        # MLflow put the version's code/ on sys.path; this process runs the xc_core it imported before (the
        # checkout's), and the folder is deleted now: a path per reload would pile up in a long-lived `xc serve`
        sys.path[:] = path
        return python_model.model if isinstance(python_model, ServedPyfunc) else None


def is_registry_uri(uri: str) -> bool:
    """``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` (a logged model ``models:/m-…`` is not)."""
    path = uri.removeprefix("models:/")
    return uri.startswith("models:/") and ("@" in path or "/" in path)
