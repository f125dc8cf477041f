"""Novel keywords streamed into IRENE's serving index after training: new keywords arrive every day
without a click, and retraining or rebuilding the index for each would leave them unserved for hours.

Each keyword is represented zero-shot exactly as training represented the data set's novel labels — the frozen
encoder's E(z) → the K seen labels most similar by text (*shortlist*) → those whose classifier agrees,
w_j · E(z) ≥ τ0, best |S| (*refine*) → the combiner — and added to the HNSW index under a new id after the largest
one, so the next query can retrieve it. The index folder's ``streamed_labels.parquet`` (:func:`streamed_labels`)
names each new id; rebuilding the index (``xc index --method irene``) starts it afresh.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from xc_core.logs.errors import IngestError
from xc_core.tracking.served import STREAMED_FILE

if TYPE_CHECKING:
    from xc_core.index import LabelIndex
    from xc_core.methods.irene.fit import IreneModel
    from xc_core.training.record import TrainedModel

KEYWORD_TEXT, KEYWORD_ID = "keyword_text", "keyword_id"
SUFFIXES = (".csv", ".parquet")
STEPS = ("encode", "shortlist", "refine", "combine", "add")
_EXPECTED = f"a CSV or Parquet file with a '{KEYWORD_TEXT}' column (and optionally '{KEYWORD_ID}')"


def read_keywords(path: Path) -> tuple[list[str], list[str] | None]:
    """The stripped texts of a CSV or Parquet keyword file and its ids (None without a ``keyword_id`` column).
    A file without ``keyword_text``, without rows, or with a blank text or id is rejected whole, naming the rows
    (1 = the first data row), so that a half-read file never streams half of its keywords."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise IngestError(path, f"unsupported file type {path.suffix or '(none)'!r}", _EXPECTED)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such keyword file")
    try:  # CSV as text: ids such as 007 keep their zeros
        frame = pl.read_parquet(path) if path.suffix.lower() == ".parquet" else pl.read_csv(path, infer_schema=False)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise IngestError(path, f"unreadable ({exc})", _EXPECTED) from exc
    if KEYWORD_TEXT not in frame.columns:
        raise IngestError(path, f"no '{KEYWORD_TEXT}' column (columns: {', '.join(frame.columns) or 'none'})",
                          _EXPECTED)
    if frame.height == 0:
        raise IngestError(path, "no rows", _EXPECTED)
    texts = _column(path, frame, KEYWORD_TEXT)
    return texts, _column(path, frame, KEYWORD_ID) if KEYWORD_ID in frame.columns else None


def _column(path: Path, frame: pl.DataFrame, name: str) -> list[str]:
    values = ["" if v is None else v.strip() for v in frame.get_column(name).cast(pl.String).to_list()]
    blank = [row + 1 for row, v in enumerate(values) if not v]
    if blank:
        shown = ", ".join(map(str, blank[:10])) + (f" and {len(blank) - 10} more" if len(blank) > 10 else "")
        raise IngestError(path, f"empty '{name}' in row(s) {shown} (1 = the first data row)", _EXPECTED)
    return values


def streamed_labels(index_dir: Path) -> pl.DataFrame:
    """Keywords streamed into the index after training: ``id`` (the index id), ``keyword_id``, ``text``."""
    path = index_dir / STREAMED_FILE
    if path.exists():
        return pl.read_parquet(path)
    return pl.DataFrame(schema={"id": pl.Int64, "keyword_id": pl.String, "text": pl.String})


def add_keywords(home: Path, dataset: str, profile: str, texts: Sequence[str],
                 keyword_ids: Sequence[str] | None = None, batch: int = 4096,
                 index_folder: Path | None = None) -> dict[str, Any]:
    """Represent ``texts`` as IRENE represents novel labels and add them to its serving index (``index_folder``:
    a copy of that index instead, e.g. a benchmark's), without rebuilding it. A keyword already served — by
    ``keyword_id`` (the data set's label ids and streamed ids), or by its text when no ids are given — is
    skipped, as is a repeat within the call. ``ms_per_item`` is the sum of the per-keyword steps; loading the
    model and saving the index happen once per call (``load_ms``, ``save_ms``)."""
    from xc_core.methods.irene import NAME
    from xc_core.paths import index_dir

    if keyword_ids is not None and len(keyword_ids) != len(texts):
        raise ValueError(f"{len(texts)} keyword texts but {len(keyword_ids)} keyword ids")
    started = time.perf_counter()
    trained = _trained(home, dataset, profile)
    folder = index_folder or index_dir(home, dataset, NAME, profile)
    if not (folder / "manifest.json").exists():
        raise FileNotFoundError(f"{folder}: no IRENE index yet — run `xc index --dataset {dataset} --method irene "
                                f"--profile {profile} --home {home}` first")
    with _one_stream_at_a_time(folder):
        return _add(home, dataset, trained, folder, texts, keyword_ids, batch, started)


def _add(home: Path, dataset: str, trained: TrainedModel, folder: Path, texts: Sequence[str],
         keyword_ids: Sequence[str] | None, batch: int, started: float) -> dict[str, Any]:
    from xc_core.methods.irene import _encoder
    from xc_core.methods.irene.fit import MODEL, IreneModel

    index = _index(folder, trained)
    streamed = streamed_labels(folder)
    keep = _new_rows(home, dataset, streamed, texts, keyword_ids)
    new_texts = [texts[i].strip() for i in keep]
    steps = dict.fromkeys(STEPS, 0.0)
    out: dict[str, Any] = {"dataset": dataset, "profile": trained.profile, "added": len(new_texts),
                           "skipped": len(texts) - len(new_texts), "index_dir": str(folder)}
    if not new_texts:
        return {**out, "ms_per_item": 0.0, "steps_ms_per_item": steps, "index_count": index.count,
                "seconds": round(time.perf_counter() - started, 3)}
    model, encoder = IreneModel.load(trained.folder / MODEL), _encoder(trained)
    first_id, loaded = index.next_id, time.perf_counter()
    associated = _represent_and_add(model, encoder, index, new_texts, first_id, batch, steps)
    saving = time.perf_counter()
    n = len(new_texts)
    rows = pl.DataFrame({"id": np.arange(first_id, first_id + n, dtype=np.int64),
                         "keyword_id": [keyword_ids[i] for i in keep] if keyword_ids is not None else [None] * n,
                         "text": new_texts}, schema=streamed.schema)
    tmp = folder / f".{STREAMED_FILE}.tmp-{os.getpid()}"
    pl.concat([streamed, rows]).write_parquet(tmp)
    index.save(folder)
    # after the index: a crash in between leaves ids unnamed, never names unserved
    os.replace(tmp, folder / STREAMED_FILE)
    return {**out, "ms_per_item": round(1000 * sum(steps.values()) / n, 4),
            "steps_ms_per_item": {step: round(1000 * s / n, 4) for step, s in steps.items()},
            "associated_mean": round(associated / n, 3), "first_id": first_id, "index_count": index.count,
            "load_ms": round(1000 * (loaded - started), 1), "save_ms": round(1000 * (time.perf_counter() - saving), 1),
            "seconds": round(time.perf_counter() - started, 3)}


def _represent_and_add(model: IreneModel, encoder: Any, index: LabelIndex, texts: list[str], first_id: int,
                       batch: int, steps: dict[str, float]) -> int:
    """Encode → shortlist → refine → combine → add, ``batch`` keywords at a time, timing each step into ``steps``;
    returns how many associations the keywords got in all."""
    from xc_core.methods.irene.associations import refine, seen_text_index, shortlist

    cfg, k, tau0 = model.cfg, model.cfg.associations, model.tau0
    # the rule of IreneModel.associate: no τ0 (validation chose no association) means no association
    seen = seen_text_index(model.seen_text) if model.associates and len(model.seen_text) else None
    associated = 0
    for lo in range(0, len(texts), batch):
        tick = time.perf_counter()
        vecs = encoder.encode(texts[lo:lo + batch])
        tick = _lap(steps, "encode", tick)
        if seen is not None and tau0 is not None:
            candidates = shortlist(vecs, seen, cfg.shortlist)
            tick = _lap(steps, "shortlist", tick)
            assoc = refine(candidates, vecs, model.weights, tau0, k)
            tick = _lap(steps, "refine", tick)
        else:
            assoc = np.full((len(vecs), k), -1, dtype=np.int64)
        reps = model.combine(vecs, assoc)
        tick = _lap(steps, "combine", tick)
        index.add(reps, np.arange(first_id + lo, first_id + lo + len(reps)))
        _lap(steps, "add", tick)
        associated += int((assoc >= 0).sum())
    return associated


def _lap(steps: dict[str, float], step: str, since: float) -> float:
    now = time.perf_counter()
    steps[step] += now - since
    return now


def _trained(home: Path, dataset: str, profile: str) -> TrainedModel:
    from xc_core.methods.irene import NAME
    from xc_core.methods.irene.fit import MODEL
    from xc_core.paths import model_dir
    from xc_core.training.record import SUMMARY, TrainedModel

    folder = model_dir(home, dataset, NAME, profile)
    if not (folder / SUMMARY).exists() or not (folder / MODEL / "irene.json").exists():
        raise FileNotFoundError(f"{folder}: no IRENE model trained — run `xc train --dataset {dataset} --method irene "
                                f"--profile {profile} --home {home}` first")
    return TrainedModel.load(folder)


def _index(folder: Path, trained: TrainedModel) -> LabelIndex:
    """The serving index, refused (as a LookupError, one clear line at the CLI) when it is corrupt or was built
    for another training of IRENE: keywords represented by this model would not match its labels."""
    from xc_core.index import IndexError_, LabelIndex

    try:
        return LabelIndex.load(folder, expect_model_uri=trained.model_uri)
    except IndexError_ as exc:
        raise LookupError(f"{exc} — for IRENE: `xc index --dataset {trained.dataset} --method irene --profile "
                          f"{trained.profile}`") from exc


def _new_rows(home: Path, dataset: str, streamed: pl.DataFrame, texts: Sequence[str],
              keyword_ids: Sequence[str] | None) -> list[int]:
    """Positions of the keywords not served yet (first occurrence of each), by id or, without ids, by text."""
    from xc_core.paths import dataset_dir

    labels_path = dataset_dir(home, dataset) / "labels.parquet"
    if not labels_path.exists():
        raise FileNotFoundError(f"{labels_path}: the data set's labels are missing — run `xc dataset --dataset "
                                f"{dataset} --home {home}`, then retrain and reindex IRENE")
    by_id = keyword_ids is not None
    column = ("label_id", "keyword_id") if by_id else ("text", "text")
    known = set(pl.read_parquet(labels_path, columns=[column[0]]).get_column(column[0]).to_list())
    known.update(streamed.get_column(column[1]).drop_nulls().to_list())
    keys = keyword_ids if keyword_ids is not None else [t.strip() for t in texts]
    keep = []
    for i, key in enumerate(keys):
        if key not in known:
            known.add(key)
            keep.append(i)
    return keep


@contextmanager
def _one_stream_at_a_time(folder: Path) -> Iterator[None]:
    """Two streams into one index would both append after the same largest id, and the last save would drop the
    other's keywords: an exclusive lock on the folder serialises them (e.g. two landed files' runs)."""
    with open(folder / ".stream.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
