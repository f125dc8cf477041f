"""``xc anchors`` and the ``anchor_sets`` asset: ANN proxies → RWR expansion → pruning, saved with coverage."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from xc_core.datasets.container import XCDataset
from xc_core.paths import anchors_dir, dataset_dir, resolve_home
from xc_core.profiles import Profile, encoder_config
from xc_core.quality.coverage import CoverageThreshold, check_coverage, default_thresholds
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset, add_profile


@dataclass
class AnchorStageResult:
    dataset: XCDataset  # the data set with its anchor sets replaced by the expanded ones
    coverage: pl.DataFrame
    thresholds: list[CoverageThreshold]
    summary: dict[str, Any]
    path: Path


def materialize_anchor_sets(dataset: XCDataset, home: Path, profile: Profile,
                            thresholds: list[CoverageThreshold] | None = None, progress: bool = False,
                            use_encoder: bool = True) -> AnchorStageResult:
    """Expand and prune ``dataset``'s anchor sets with the profile's encoder; save under
    ``<home>/anchor_sets/<name>`` (an XC data set folder plus ``coverage.parquet``, ``similar_text.parquet``
    and ``thresholds.json``).

    Args:
        dataset: the built data set (:func:`~xc_core.stages.dataset.materialize_dataset`).
        home: the data root.
        profile: the profile whose encoder prunes and whose RWR settings expand.
        thresholds: the coverage gate's thresholds (None: the defaults).
        progress: show progress bars.
        use_encoder: prune by encoder cosine (False: keep every expanded anchor; tests without a model).

    Returns:
        The stage's result: the data set with its expanded anchor sets, the coverage table, the thresholds it was
        checked against, the summary and the folder written.
    """
    started = time.perf_counter()
    embed, known = None, None
    if use_encoder:
        from xc_core.encoders import TextEncoder

        encoder = TextEncoder(encoder_config(profile, home))
        known = KnownVectors(encoder)

        def embed(texts: list[str]) -> Any:
            return known.remember(texts, encoder.encode(texts, progress=progress))

    from xc_core.graphs.anchors import AnchorConfig, build_anchor_stage

    cfg = AnchorConfig(rwr=profile.rwr.model_copy(update={"seed": profile.seed}))
    stage = build_anchor_stage(dataset, cfg, embed=embed, progress=progress)
    expanded = dataclasses.replace(dataset, anchor_sets=stage.anchor_sets,
                                   meta={**dataset.meta, "anchor_profile": profile.name, "rwr": cfg.rwr.model_dump()})
    worth = assess_graph(expanded, home, profile, use_encoder=use_encoder, known=known)
    expanded.meta["graph_worth"] = worth  # what ramen reads to choose its anchor sets (TrainConfig.graph_worth)
    path = expanded.save(anchors_dir(home, dataset.name))
    (path / "graph_worth.json").write_text(json.dumps(worth, indent=2) + "\n")
    thresholds = thresholds if thresholds is not None else default_thresholds(dataset)
    stage.coverage.write_parquet(path / "coverage.parquet")
    if stage.similar_text.height:
        stage.similar_text.write_parquet(path / "similar_text.parquet")
    (path / "thresholds.json").write_text(json.dumps([t.model_dump() for t in thresholds], indent=2) + "\n")
    outcomes = check_coverage(stage.coverage, thresholds)
    summary = {
        "dataset": dataset.name, "profile": profile.name, "path": str(path),
        "coverage": _coverage_summary(stage.coverage),
        "prune_counts": {k: v.as_dict() for k, v in stage.prune_counts.items()},
        "proxy_edges": stage.similar_text.height,
        "reachable_train_labels": stage.reachable_train_labels,
        "coverage_checks_passed": all(o.passed for o in outcomes),
        "graph_worth": {name: row["verdict"] for name, row in worth["sets"].items()},
        "seconds": round(time.perf_counter() - started, 2),
    }
    return AnchorStageResult(expanded, stage.coverage, thresholds, summary, path)


class KnownVectors:
    """The starting encoder's vectors of the texts the anchor stage embedded (its documents, labels and anchors),
    standing in for the encoder where the graph-worth check ranks its validation rows with the same encoder: the
    texts are not encoded twice. A text it has not seen is encoded."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.rows: dict[str, int] = {}  # text → its row in the stacked parts
        self.parts: list[np.ndarray] = []

    def remember(self, texts: list[str], vectors: np.ndarray) -> np.ndarray:
        start = sum(len(part) for part in self.parts)
        self.parts.append(vectors)
        for offset, text in enumerate(texts):
            self.rows.setdefault(text, start + offset)
        return vectors

    def encode(self, texts: list[str], progress: bool = False, desc: str = "encode") -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.rows))
        if missing:
            self.remember(missing, self.encoder.encode(missing, progress=progress, desc=desc))
        table = np.concatenate(self.parts) if len(self.parts) > 1 else self.parts[0]
        self.parts = [table]
        return table[[self.rows[t] for t in texts]]


def assess_graph(dataset: XCDataset, home: Path, profile: Profile, use_encoder: bool = True,
                 overrides: dict[str, Any] | None = None, known: KnownVectors | None = None) -> dict[str, Any]:
    """The graph-worth check (graphs/worth.py) of every anchor set of ``dataset``, on the validation split a graph
    method trains with under ``profile`` (and training ``overrides``, as ``xc train --set``) and the sets as it reads
    them (held-out anchors dropped unless ``exclude_heldout_anchors`` is off); the gradient agreement at the profile's
    starting encoder when ``use_encoder`` (``known``: its vectors of texts already embedded). Training and validation
    rows only."""
    import tempfile

    from xc_core.graphs.heldout import without_heldout
    from xc_core.graphs.worth import WorthConfig, graph_statistics, judge
    from xc_core.profiles import train_settings
    from xc_core.training.validation import validation_split

    started = time.perf_counter()
    # the profile's training settings with every regularizer on (the split, the subsample and the anchor filters are
    # the profile's, whichever graph method trains); no method module is imported, so an edit of one leaves every
    # other method's recorded code version alone
    cfg = train_settings(profile).model_copy(update={**(overrides or {}), "regularize": True, "prune": False,
                                                    "bandit": False, "graph_worth": False})
    worth_cfg = WorthConfig(seed=profile.seed)
    split = validation_split(dataset, cfg)
    heldout = {dataset.train_texts[i] for i in split.val_rows} | set(dataset.test_texts)
    sets = (without_heldout(dataset.anchor_sets, dataset, heldout)[0] if cfg.exclude_heldout_anchors
            else dataset.anchor_sets)
    note = "" if use_encoder else "no encoder: gradient agreement and what the text knows not measured"
    with tempfile.TemporaryDirectory() as scratch:
        trainer = None
        if use_encoder and sets:
            from xc_core.training.trainer import Trainer

            try:
                trainer = Trainer(dataset, encoder_config(profile, home), cfg, Path(scratch))
            except ValueError as err:  # no usable set once held-out anchors are dropped
                note = f"gradient agreement not measured: {err}"
        text_top = trainer.validation_ranking(cfg.val_k, known) if trainer is not None else None
        found = graph_statistics(split.fit_view(dataset), sets, split.y_fit, split.y_val, split.train_rows,
                                 split.val_rows, worth_cfg, text_top=text_top)
        if trainer is not None:
            from xc_core.training.agreement import gradient_agreement, per_set

            for name, row in per_set(gradient_agreement(trainer, worth_cfg.agreement_batches,
                                                        worth_cfg.seed)).items():
                found[name].agreement = row
    judge(found, worth_cfg)
    return {"sets": {name: worth.as_dict() for name, worth in found.items()}, "config": worth_cfg.model_dump(),
            "validation": {"kind": split.kind, "rows": len(split.val_rows)}, "note": note,
            "seconds": round(time.perf_counter() - started, 2)}


def _coverage_summary(table: pl.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """{anchor set: {node type: {stage: share with ≥ 1 anchor}}}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in table.iter_rows(named=True):
        out.setdefault(row["anchor_set"], {}).setdefault(row["node_type"], {})[row["stage"]] = row["share_ge1"]
    return out


def anchors_built(home: Path, name: str) -> bool:
    """Whether the anchor stage has saved ``name``'s anchor sets in ``home``."""
    return (anchors_dir(home, name) / "meta.json").is_file()


def load_with_anchors(home: Path, name: str) -> XCDataset:
    """The data set with its expanded anchor sets when the anchor stage has run, else as built."""
    return XCDataset.load(anchors_dir(home, name) if anchors_built(home, name) else dataset_dir(home, name))


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    add_profile(command)


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.profiles import get_profile
    from xc_core.stages.dataset import built_or_build

    home = resolve_home(args.home)
    dataset = built_or_build(args.dataset, home)
    result = materialize_anchor_sets(dataset, home, get_profile(args.profile), progress=not args.quiet)
    if not args.quiet:
        import sys

        from xc_core.graphs.worth import SetWorth

        # stdout holds the one JSON line; the check's table goes to stderr
        print("will this graph help? (docs/graphs.md, \"Will this graph help?\")", file=sys.stderr)
        for row in result.dataset.meta["graph_worth"]["sets"].values():
            print("  " + SetWorth(**row).line(), file=sys.stderr)
    return result.summary


COMMAND = register(Command("anchors", "ANN proxies → RWR expansion → pruning, coverage", _arguments, _run,
                           docs="docs/graphs.md", assets=("anchor_sets", "similar_text")))
