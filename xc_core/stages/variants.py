"""Methods trained with other training settings than their profile's, over seeds, paired with the seed homes' models.

The seed homes are ``<root>/<dataset>-s<seed>`` (``pretrained`` and the methods trained and evaluated there at the
profile's settings). A variant (a tag and TrainConfig overrides) gets a home per seed,
``<root>/<dataset>-s<seed>-<tag>``, that links the seed home's data lineage
(:func:`~xc_core.stages.results.share_data`): every variant trains on the same anchor sets and is scored on the same
test queries; its models, evaluations and MLflow store stay apart. A step whose output exists and was made by the
method's current code (:func:`~xc_core.methods.versions.record_outdated`) is skipped, so a killed grid restarts
where it stopped; a finished training's resume checkpoint and selection copy are removed (disk).

The table (:func:`build`): per method, at the profile's settings and at the variant's, the selected epoch's validation
recall@10, the steps trained and the test metrics seed-averaged per query with bootstrap 95% CIs; then paired
differences on the same queries (:mod:`xc_core.evaluation.seed_homes`).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.evaluation.seed_homes import METRICS, evaluated, metric_ci, metric_value, paired_diff, seed_average
from xc_core.measure import signed_interval
from xc_core.provenance import write_result

#: the floor every variant is paired against (trained once, in the seed home)
REFERENCE = "pretrained"


def variant_home(root: Path, dataset: str, seed: int, tag: str) -> Path:
    """The home of variant ``tag`` for training seed ``seed``: ``<root>/<dataset>-s<seed>-<tag>``."""
    return root / f"{dataset}-s{seed}-{tag}"


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``field=value`` pairs as TrainConfig overrides (values read as JSON where they parse: 20000, 1.0, true);
    SystemExit naming TrainConfig's fields for a pair that is not ``FIELD=VALUE`` with a TrainConfig field."""
    from xc_core.training.config import TrainConfig

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key not in TrainConfig.model_fields:
            raise SystemExit(f"--set {pair!r}: expected FIELD=VALUE with FIELD one of TrainConfig's fields "
                             f"({', '.join(sorted(TrainConfig.model_fields))})")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def run_one(root: Path, dataset: str, profile_name: str, seed: int, method: str, settings: dict[str, Any],
            tag: str) -> Path:
    """Train and evaluate ``method`` with TrainConfig overrides ``settings`` and training seed ``seed`` in the
    variant's home (each step skipped when current); returns that home. SystemExit when the seed home
    ``<root>/<dataset>-s<seed>`` has no anchor sets."""
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.methods.versions import record_outdated
    from xc_core.paths import eval_dir, model_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.stages.evaluate import evaluate_method
    from xc_core.stages.results import share_data
    from xc_core.stages.train import train_method
    from xc_core.training.record import SUMMARY

    base, home = root / f"{dataset}-s{seed}", variant_home(root, dataset, seed, tag)
    if not (base / "anchor_sets" / dataset / "meta.json").exists():
        raise SystemExit(f"{base} has no anchor sets for {dataset}: run experiments/seeds/seed_grid.py first")
    share_data(base, home)
    profile = get_profile(profile_name).model_copy(update={"seed": seed})
    data = load_with_anchors(home, dataset)
    folder = model_dir(home, dataset, method, profile.name)
    finished = (folder / SUMMARY).exists()
    stale = (record_outdated(json.loads((folder / SUMMARY).read_text()), method, "train") if finished
             else "nothing trained yet")
    if stale is not None:
        print(f"train {method} {tag} seed {seed} in {home} ({stale})", flush=True)
        # a checkpoint without a summary is a killed run of this grid: resume it; a finished stale one starts over
        train_method(data, method, profile, home, resume=not finished and (folder / "checkpoint").exists(),
                     overrides=settings)
    for spent in ("checkpoint", "best_encoder"):  # resume state and the selection copy: the encoder is saved
        shutil.rmtree(folder / spent, ignore_errors=True)
    record = EvaluationRecord.load(eval_dir(home, dataset, method, profile.name))
    if stale is not None or record is None or record_outdated(record.summary, method, "evaluate") is not None:
        print(f"evaluate {method} {tag} seed {seed}", flush=True)
        evaluate_method(data, method, profile.name, home)
    return home


def training_cost(homes: list[Path], dataset: str, method: str, profile: str) -> dict[str, Any]:
    """What model selection saw, one entry per home: the selected epoch's validation recall@10
    (``val_recall@10``), the ``selected_epoch`` and the ``steps`` trained."""
    from xc_core.paths import model_dir

    found = [json.loads((model_dir(h, dataset, method, profile) / "train_summary.json").read_text()) for h in homes]
    return {"val_recall@10": [s.get("val_recall@10") for s in found],
            "selected_epoch": [s.get("selected_epoch") for s in found],
            "steps": [s.get("steps") for s in found]}


def _row(label: str, homes: list[Path], dataset: str, method: str, profile: str,
         rows: dict[str, np.ndarray], n: int) -> dict[str, Any]:
    return {"method": label, "seeds": n, **training_cost(homes, dataset, method, profile),
            **{m: [metric_value(rows, m), *metric_ci(rows, m)] for m in METRICS}}


def _pair(label: str, a: list[Path], method_a: str, b: list[Path], method_b: str, dataset: str,
          profile: str) -> dict[str, Any] | None:
    """``method_a`` in homes ``a`` − ``method_b`` in homes ``b`` (one home per seed, in the same order), seed-averaged
    over the seeds whose two homes evaluated both, so a pair never mixes seed sets; None when no seed did."""
    both = [(x, y) for x, y in zip(a, b, strict=True)
            if evaluated(x, dataset, method_a, profile) and evaluated(y, dataset, method_b, profile)]
    if not both:
        return None
    ra = seed_average([x for x, _ in both], dataset, method_a, profile)[0]
    rb = seed_average([y for _, y in both], dataset, method_b, profile)[0]
    return {"pair": label, "seeds": len(both), **{m: list(paired_diff(ra, rb, m))[:3] for m in METRICS}}


def build(root: Path, dataset: str, profile: str, seeds: list[int], methods: list[str], tag: str,
          settings: dict[str, Any]) -> dict[str, Any]:
    """The variant ``tag``'s table over ``seeds``: ``rows`` (``pretrained`` of the first seed home that evaluated it,
    then each method at the profile's settings and at the variant's: ``[value, low, high]`` per metric, with
    :func:`training_cost`) and ``pairs`` (each variant − the same method at the profile's settings, − ``pretrained``,
    and ``ramen`` − ``dual_encoder`` within the variant: ``[difference, low, high]`` per metric). A seed with
    nothing evaluated is left out of every row and pair."""
    bases = [root / f"{dataset}-s{s}" for s in seeds]
    homes = [variant_home(root, dataset, s, tag) for s in seeds]
    # the untrained encoder is the same model in every seed home: one evaluation serves every seed
    floor = next((h for h in bases if evaluated(h, dataset, REFERENCE, profile)), None)
    rows, pairs = [], []
    if floor is not None:
        reference = seed_average([floor], dataset, REFERENCE, profile)[0]
        rows.append({"method": REFERENCE, "seeds": 1, **{m: [metric_value(reference, m), *metric_ci(reference, m)]
                                                          for m in METRICS}})
    for method in methods:
        for label, found in ((method, bases), (f"{method}({tag})", homes)):
            present = [h for h in found if evaluated(h, dataset, method, profile)]
            if present:
                averaged, n = seed_average(present, dataset, method, profile)
                rows.append(_row(label, present, dataset, method, profile, averaged, n))
        pairs.append(_pair(f"{method}({tag}) − {method}", homes, method, bases, method, dataset, profile))
        if floor is not None:
            pairs.append(_pair(f"{method}({tag}) − {REFERENCE}", homes, method, [floor] * len(seeds), REFERENCE,
                               dataset, profile))
    if {"ramen", "dual_encoder"} <= set(methods):
        pairs.append(_pair(f"ramen({tag}) − dual_encoder({tag})", homes, "ramen", homes, "dual_encoder", dataset,
                           profile))
    return {"dataset": dataset, "profile": profile, "seeds": seeds, "tag": tag, "settings": settings, "rows": rows,
            "pairs": [p for p in pairs if p is not None]}


def _pct(cell: list[float]) -> str:
    value, low, high = cell[:3]
    return signed_interval(value, low, high, scale=100)


def _mean(values: list[Any]) -> str:
    found = [float(v) for v in values if v is not None]
    return f"{100 * float(np.mean(found)):.2f}" if found else "–"


def ci_cells(row: dict[str, Any]) -> str:
    """A row's metrics (``[value, low, high]`` fractions) as markdown table cells: value [low, high] in %."""
    return " | ".join(f"{100 * row[m][0]:.2f} [{100 * row[m][1]:.2f}, {100 * row[m][2]:.2f}]" for m in METRICS)


def pairs_table(pairs: list[dict[str, Any]]) -> list[str]:
    """The paired differences as markdown lines (a blank line first; with the seeds each used, where recorded)."""
    lines = ["", "| paired difference | " + " | ".join(METRICS) + " |", "|---" * (1 + len(METRICS)) + "|"]
    for pair in pairs:
        seeds = f" ({pair['seeds']} seeds)" if "seeds" in pair else ""
        lines.append(f"| {pair['pair']}{seeds} | " + " | ".join(_pct(pair[m]) for m in METRICS) + " |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """:func:`build`'s table as markdown: a heading line, the rows, then the paired differences."""
    settings = ", ".join(f"{k}={v}" for k, v in result["settings"].items())
    lines = [f"**{result['dataset']}** (profile `{result['profile']}`; `{result['tag']}`: {settings}; seeds "
             f"{result['seeds']})", "",
             "| method | val R@10 (mean) | selected epochs | steps | " + " | ".join(METRICS) + " |",
             "|---" * (4 + len(METRICS)) + "|"]
    for row in result["rows"]:
        lines.append(f"| {row['method']} | {_mean(row.get('val_recall@10', []))} | {row.get('selected_epoch', '–')} | "
                     f"{row.get('steps', '–')} | {ci_cells(row)} |")
    return "\n".join(lines + pairs_table(result["pairs"]))


def publish(table: str, result: dict[str, Any], path: Path | None) -> None:
    """Print ``table``; with a ``path``, also save ``result`` there as JSON."""
    print(table)
    if path:
        write_result(path, json.dumps(result, indent=1) + "\n")


def grid_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments every variant grid shares to ``parser``: ``--dataset``, ``--profile``, ``--seeds``,
    ``--root`` and ``--json``."""
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--json", type=Path, help="also write the figures here")
