"""Issues #39/#40: aol-1000 `pretrained-clf` (or another `-clf`, ``--method``) per seed home — test P@1, paired
against `pretrained` (the same home) and against PECOS (the first home's: PECOS has no seed), on all labels and on
seen labels, and the fusion decision.
The homes are those of `xc results --seeds` (seed 0 in HOME, seed s in HOME/seeds/s<s>), or of `xc train --seed s`
runs there.

    .venv/bin/python experiments/seeds/aol_seed_table.py --home /work/exp_home --seeds 0,1,2 [--method M] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from xc_core.evaluation.record import EvaluationRecord
from xc_core.provenance import write_result
from xc_core.stages.results import paired_rows, seed_home

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--method", default="pretrained-clf", help="the -clf method tabulated")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "aol_pretrained_clf_seeds.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    homes = {s: args.home if i == 0 else seed_home(args.home, s) for i, s in enumerate(seeds)}
    out: dict[str, object] = {str(k): v for k, v in table(homes, args.method).items()}
    if len(homes) > 1:
        out["seed_averaged"] = seed_averaged(list(homes.values()), args.method)
        print("seed-averaged", json.dumps(out["seed_averaged"]))
    write_result(args.out, json.dumps(out, indent=1, default=str) + "\n")


def seed_averaged(homes: list[Path], method: str) -> dict[str, object]:
    """``method``'s per-query metrics averaged over the seed homes, its 95% interval, and its paired differences
    with `pretrained` and PECOS (the first home's: neither has a seed) on the same test queries, in points."""
    from xc_core.evaluation.seed_homes import metric_ci, metric_value, paired_diff, seed_average

    rows, seeds = seed_average(homes, "aol-1000", method, "demo")
    references = {other: seed_average(homes[:1], "aol-1000", other, "demo")[0] for other in ("pretrained", "pecos")}
    out: dict[str, object] = {"method": method, "seeds": seeds}
    for metric in ("P@1", "P@5", "PSP@1", "PSP@5"):
        low, high = metric_ci(rows, metric)
        out[metric] = [round(100 * x, 2) for x in (metric_value(rows, metric), low, high)]
        for other, reference in references.items():
            diff, low, high, _ = paired_diff(rows, reference, metric)
            out[f"{metric} - {other}"] = [round(100 * x, 2) for x in (diff, low, high)]
    return out


def table(homes: dict[int, Path], method: str = "pretrained-clf") -> dict[int, dict[str, object]]:
    first = next(iter(homes.values()))
    pecos = EvaluationRecord.load(first / "eval/aol-1000/pecos-demo")
    # `pretrained` is the untrained encoder: no seed changes it (13.74 P@1 in the homes of seeds 0 and 1 alike), so a
    # seed home that did not score it again is paired with the first home's record, on the same test split
    first_encoder = EvaluationRecord.load(first / "eval/aol-1000/pretrained-demo")
    assert pecos is not None, f"{first}: PECOS not scored (xc peer)"
    out: dict[int, dict[str, object]] = {}
    for seed, home in homes.items():
        clf = EvaluationRecord.load(home / f"eval/aol-1000/{method}-demo")
        enc = EvaluationRecord.load(home / "eval/aol-1000/pretrained-demo")
        encoder_from = "this home" if enc is not None else "not scored"
        if enc is None and first_encoder is not None:
            enc, encoder_from = first_encoder, f"{first} (the untrained encoder has no seed)"
        if clf is None:
            print(seed, "not evaluated")
            continue
        summary = json.loads((home / f"models/aol-1000/{method}-demo/train_summary.json").read_text())
        fusion = (summary.get("fallback_tests") or {}).get("fusion", {})
        row = {"method": method, "commit": summary.get("git_commit", "")[:7], "P@1": clf.metrics.get("P@1"),
               "fusion": {k: fusion.get(k) for k in ("kept", "gain", "low", "high", "tested_on_rows", "candidate")},
               "detectable_P@1": (fusion.get("detectable") or {}).get("P@1"),
               "vs_pretrained": paired_rows(clf, enc).get("P@1") if enc else None, "pretrained_from": encoder_from,
               "vs_pecos": paired_rows(clf, pecos).get("P@1"),
               "vs_pecos_seen": paired_rows(clf, pecos, seen=True).get("P@1")}
        out[seed] = row
        print(seed, json.dumps(row, default=str))
    return out


if __name__ == "__main__":
    main()
