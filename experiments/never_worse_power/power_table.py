"""Issue #39: every never-worse test a trained model recorded, with its rows and the smallest P@1 gain it could
detect, per home and method; and, between two homes trained with different validation settings, the paired test
difference of each method (the test split read once, after the choices, as evidence of harm, not to choose).

    .venv/bin/python experiments/never_worse_power/power_table.py --dataset synthetic \\
        --methods dual_encoder,dual_encoder-clf --home share-0.20=/work/exp49p/s20 \\
        --home share-0.35=/work/exp49p/s35 [--baselines HOME] [--out FILE]

The first home is the reference of the paired differences. ``--baselines HOME``: every method of every home also
paired against that home's ``pretrained`` (the untrained encoder) and ``pecos`` evaluations, on the same test split
(refused pairs — another split — are left out).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from xc_core.evaluation.record import EvaluationRecord
from xc_core.provenance import write_result
from xc_core.stages.results import paired_rows

POINTS = 100  # the JSON's fractions as points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--methods", required=True, help="comma-separated")
    parser.add_argument("--home", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--baselines", type=Path, help="a home with pretrained and pecos evaluations to pair with")
    args = parser.parse_args()
    homes = dict(entry.split("=", 1) for entry in args.home)
    methods = [m for m in args.methods.split(",") if m]
    out = table({name: Path(path) for name, path in homes.items()}, args.dataset, methods, args.profile)
    if args.baselines:
        out["against_baselines"] = against(args.baselines, {n: Path(p) for n, p in homes.items()}, args.dataset,
                                           methods, args.profile)
    text = json.dumps(out, indent=1, ensure_ascii=False)
    print(text)
    if args.out:
        write_result(args.out, text + "\n")


def table(homes: dict[str, Path], dataset: str, methods: list[str], profile: str) -> dict[str, Any]:
    out: dict[str, Any] = {"dataset": dataset, "profile": profile, "homes": {k: str(v) for k, v in homes.items()},
                           "tests": {}, "paired_test_difference": {}}
    for name, home in homes.items():
        out["tests"][name] = {m: method_tests(home, dataset, m, profile) for m in methods}
    reference, *others = homes
    for other in others:
        for method in methods:
            a = EvaluationRecord.load(homes[other] / f"eval/{dataset}/{method}-{profile}")
            b = EvaluationRecord.load(homes[reference] / f"eval/{dataset}/{method}-{profile}")
            if a is None or b is None:
                continue
            out["paired_test_difference"][f"{method}: {other} − {reference}"] = in_points(paired_rows(a, b))
    return out


def in_points(paired: dict[str, list[float]]) -> dict[str, list[float]]:
    """``paired_rows``' [difference, low, high] of P@1, R@10 and PSP@1, in points."""
    return {metric: [round(v * POINTS, 2) for v in paired[metric][:3]] for metric in ("P@1", "R@10", "PSP@1")
            if metric in paired}


def against(baselines: Path, homes: dict[str, Path], dataset: str, methods: list[str],
            profile: str) -> dict[str, Any]:
    """Every method of every home − ``baselines``' pretrained and pecos: paired P@1, R@10, PSP@1 in points."""
    out: dict[str, Any] = {}
    for base in ("pretrained", "pecos"):
        b = EvaluationRecord.load(baselines / f"eval/{dataset}/{base}-{profile}")
        for name, home in homes.items():
            for method in methods:
                a = EvaluationRecord.load(home / f"eval/{dataset}/{method}-{profile}")
                paired = paired_rows(a, b) if a is not None and b is not None else {}
                if paired:
                    out[f"{name} {method} − {base}"] = in_points(paired)
    return out


def method_tests(home: Path, dataset: str, method: str, profile: str) -> dict[str, Any] | None:
    """The model's recorded tests (its epoch's, ramen's against the text-only encoder, its classifier stage's),
    rounded to points, and its test P@1; None when the home has not trained it."""
    path = home / f"models/{dataset}/{method}-{profile}/train_summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    tests = {"epoch": summary.get("epoch_fallback_test") or {},
             "text_only": summary.get("text_only_fallback_test") or {}, **(summary.get("fallback_tests") or {})}
    record = EvaluationRecord.load(home / f"eval/{dataset}/{method}-{profile}")
    return {"commit": summary.get("git_commit", "")[:7],
            "validation_split": summary.get("validation_split"),
            "test_P@1": round(record.metrics["P@1"] * POINTS, 2) if record is not None else None,
            "tests": {name: {"kept": test.get("kept"), "tested_on_rows": test.get("tested_on_rows"),
                             "metric": test.get("metric"),
                             "gain": [round(test[k] * POINTS, 2) for k in ("gain", "low", "high")],
                             "detectable": {k: round(v * POINTS, 2) for k, v in (test.get("detectable") or {}).items()}}
                      for name, test in tests.items() if test}}


if __name__ == "__main__":
    main()
