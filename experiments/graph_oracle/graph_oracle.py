"""Can RAMEN's regularizer carry information at all? An oracle anchor set, dosed (issue #43, "or a measured
explanation of why not").

    .venv/bin/python experiments/graph_oracle/graph_oracle.py --home /work/exp50/s20 --dataset synthetic \
        --profile demo --shares 1.0 0.25 [--novel-only] [--fixed-lambda 1.0] --out-root /work/exp50/oracle \
        --json experiments/graph_oracle/results/graph_oracle-synthetic.json [--baseline-home HOME] [--repair]

**A diagnostic, never a method**: the oracle set links each training query to the labels the same query text clicks
in the *test* period, so it reads the test split on purpose, and no number from it is a result of xc. It asks one
question: at the profile's training budget, if an anchor set carried the very positives a query will be judged on,
how much would ``ramen`` gain over ``dual_encoder``? If the answer is large, the real sets' small gains come from what
they carry (the check's "beyond text" novelty); if it is small, the regularizer cannot pass information on at this
budget, whatever the graph holds.

For each share ``s`` a seeded ``s`` of the oracle's edges is kept; ``--novel-only`` keeps only the labels the query
has no training pair with (most of a repeated query's test-period labels are its training labels, which the task
loss already teaches), and ``--fixed-lambda`` holds the oracle's λ there instead of letting the bandit move it (it
trains ``ramen_no_bandit``: before the session of 2026-12-06 it passed ``bandit=false`` to ``ramen``, whose own
switch turned the bandit back on, so those runs started at that λ and the bandit moved it a little). The
source home's data set is copied into a fresh home under ``--out-root`` with the oracle as its only anchor set; ``xc
train --method ramen`` runs there with every set at its starting λ (``graph_worth=false``: this is about the
regularizer, not the check) and held-out anchors kept (``exclude_heldout_anchors=false``: the filter that keeps
validation and test query texts from acting as anchors would drop every oracle label whose text is also a test
query's). That home has no ``dual_encoder`` run, so the text-only fallback is not applied and the trained encoder is
the one measured; its epoch is still chosen on validation. ``dual_encoder`` is the source home's (same data set,
seed and profile). Paired P@1 on the same test queries, all and the tail half (``evaluation/graph_gain.py``), beside
the check's novelty and beyond-text novelty of the oracle at that share (``xc anchors``' own function).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xc_core.datasets.container import XCDataset
from xc_core.graphs.oracle import ORACLE, covered_queries, novel_answer_queries, oracle_pairs, oracle_set
from xc_core.paths import anchors_dir, dataset_dir, vectors_dir
from xc_core.provenance import write_result
from xc_core.stages.anchor_sets import load_with_anchors

#: ``ramen``'s overrides here: the oracle's anchors are test-period labels, and synthetic's label texts are often a
#: test query's text too, so the held-out filter would drop most of them (the set has no ``anchor_spaces`` entry, so
#: it counts as a document-space set; declaring it a label space would also keep the filter off it); every set at its
#: starting λ
TRAIN_SETTINGS = {"graph_worth": False, "exclude_heldout_anchors": False}


class MissingEvaluation(LookupError):
    """A home of a pair has no per-query evaluation of its method yet."""


#: the subset of test queries whose text is a training query's (the positive control's criterion, issue #62)
COVERED = "oracle-covered"
#: covered queries whose every test label is novel to the query (the novel-only oracle holds the whole answer), and
#: the other covered queries (a training label is among the answers)
NOVEL_ANSWERS, TRAINED_ANSWER = "covered, every answer novel", "covered, a trained answer"


def oracle_home(source: Path, dataset: str, share: float, seed: int, root: Path, name: str,
                novel_only: bool, as_positives: bool = False) -> Path:
    """A fresh home holding the source's data set with the oracle (at ``share``) as its only anchor set, or with
    ``as_positives`` its edges added to the training pairs instead (no click day, so every validation split and
    cut-off keeps them) and the source's anchor sets untouched."""
    from dataclasses import replace

    from xc_core.training.validation import binary_pairs

    home = root / name
    if home.exists():
        shutil.rmtree(home)
    data = load_with_anchors(source, dataset)  # the source's data set as built where no anchor stage has run
    if as_positives:
        merged = sp.csr_matrix(data.y_train) + binary_pairs(oracle_pairs(data, share, seed, novel_only),
                                                               data.y_train.shape)
        merged.data[:] = 1.0
        oracle = replace(data, y_train=sp.csr_matrix(merged, dtype=np.float32))
    else:
        oracle = replace(data, anchor_sets={ORACLE: oracle_set(data, share, seed, novel_only)})
    oracle.save(anchors_dir(home, dataset))
    shutil.copytree(dataset_dir(source, dataset), dataset_dir(home, dataset))
    if vectors_dir(source).is_dir():  # the frozen encodings, keyed by content: linked, not computed again
        shutil.copytree(vectors_dir(source), vectors_dir(home), copy_function=os.link)
    return home


def xc(*args: str) -> None:
    subprocess.run([str(Path(sys.executable).with_name("xc")), *args], check=True)


def measure(baseline: Path, home: Path, dataset: str, profile: str, seed: int,
            settings: dict[str, Any], method: str = "ramen", edges: int = 0) -> dict[str, Any]:
    """``method`` (``ramen``; ``dual_encoder`` where the oracle's edges are training pairs) trained and evaluated in
    ``home`` (holding ``edges`` oracle edges), paired with ``baseline``'s ``dual_encoder`` on the test queries."""
    from xc_core.paths import model_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.anchor_sets import assess_graph

    common = ["--dataset", dataset, "--profile", profile, "--home", str(home)]
    xc("train", "--method", method, "--seed", str(seed), *common,
       *(f"--set={k}={json.dumps(v)}" for k, v in settings.items()))
    xc("eval", "--method", method, *common)
    data = XCDataset.load(anchors_dir(home, dataset))
    summary = json.loads((model_dir(home, dataset, method, profile) / "train_summary.json").read_text())
    as_set = method != "dual_encoder"
    try:
        rows: list[dict[str, Any]] | None = paired([(home, baseline)], dataset, profile, arm_method=method)
    except MissingEvaluation as exc:  # the baseline still training: the run is kept, paired later by --repair
        rows = None
        print(f"{exc}; recorded unpaired: pair it with --repair --only KEY once the baseline is evaluated")
    return {"home": str(home), "baseline_home": str(baseline), "method": method, "rows": rows,
            "check": assess_graph(data, home, get_profile(profile), overrides=settings) if as_set else None,
            "selected_epoch": summary.get("selected_epoch"),
            "edges": edges,
            "heldout_anchor_edges": summary.get("heldout_anchor_edges"), "settings": settings,
            "git_commit": summary.get("git_commit")}


def paired(entries: list[tuple[Path, Path]], dataset: str, profile: str,
           baseline_method: str = "dual_encoder", arm_method: str = "ramen") -> list[dict[str, Any]]:
    """``arm_method`` of each (oracle home, baseline home) pair − the baseline's ``dual_encoder`` (or its
    ``baseline_method``: ``ramen`` for one oracle variant against another): paired P@1 on all test queries and on
    the tail half. With several pairs (one per seed) the per-query metrics are averaged over them first
    (``xc_core.evaluation.seed_homes.seed_average``: the seed noise averaged out, the interval over test queries)."""
    from xc_core.evaluation.graph_gain import gain_rows
    from xc_core.evaluation.seed_homes import seed_average

    per_row = {}
    for role, method, homes in (("ramen", arm_method, [h for h, _ in entries]),
                                ("dual_encoder", baseline_method, [b for _, b in entries])):
        rows, found = seed_average(homes, dataset, method, profile)
        if found < len(homes):
            raise MissingEvaluation(f"{homes}: not every home has a per-query evaluation of {method} ({profile}): "
                                    "run `xc eval` there first")
        per_row[role] = rows  # gain_rows pairs its roles: the graph run against the text-only one
    # the subsets from the baseline's data set: an --as-positives home's training pairs hold the oracle's edges, so
    # there every oracle label would count as trained
    data = load_with_anchors(entries[0][1], dataset)
    reached, novel = covered_queries(data), novel_answer_queries(data)
    subsets = {COVERED: reached,  # the test queries the oracle can reach (issue #62)
               NOVEL_ANSWERS: novel, TRAINED_ANSWER: reached & ~novel}
    return [r for r in gain_rows(data, per_row, extra_subsets=subsets)
            if r["subset"] in ("all", "tail half (deciles 5–9)", *subsets)]



def _run(done: dict[str, Any], path: Path, key: str) -> dict[str, Any]:
    """The recorded run ``key`` of the results file, or a clear error naming the runs it holds."""
    if key not in done["shares"]:
        raise SystemExit(f"{path}: no recorded run '{key}'; it holds: {'; '.join(done['shares']) or 'none'}")
    return done["shares"][key]


def _method(done: dict[str, Any], path: Path, key: str) -> str:
    """The method the recorded run ``key`` trained (runs recorded before ``--as-positives`` trained ``ramen``)."""
    return str(_run(done, path, key).get("method", "ramen"))


def main(argv: list[str] | None = None) -> None:
    try:
        run(argv)
    except MissingEvaluation as exc:
        raise SystemExit(str(exc)) from None


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a home with the data set's anchor stage and an "
                        "evaluated dual_encoder of --seed")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shares", type=float, nargs="+", default=[1.0, 0.25])
    parser.add_argument("--novel-only", action="store_true", help="only test-period labels the query has no "
                        "training pair with")
    parser.add_argument("--as-positives", action="store_true", help="the ceiling: the oracle's edges become "
                        "training pairs of dual_encoder (the task loss itself carries them) instead of an anchor set "
                        "of ramen")
    parser.add_argument("--fixed-lambda", type=float, help="the oracle's λ held fixed at this value (trains "
                        "ramen_no_bandit)")
    parser.add_argument("--train-set", action="append", default=[], metavar="KEY=VALUE", help="more training "
                        "overrides for ramen (as xc train --set; VALUE read as JSON), e.g. a larger budget; train the "
                        "--baseline-home dual_encoder with the same")
    parser.add_argument("--baseline-home", type=Path, help="the home whose dual_encoder evaluation ramen is paired "
                        "with (default --home); train it with the same code as the oracle runs")
    parser.add_argument("--seed-average", metavar="KEY;KEY;…", help="train nothing: average the recorded runs of "
                        "these keys (one per seed) per query and pair them; written under 'seed_averaged'")
    parser.add_argument("--against", metavar="KEY;KEY;…", help="with --seed-average: pair against these recorded "
                        "runs' ramen (one per seed, in the same order) instead of the baselines' dual_encoder — one "
                        "oracle variant against another; written under 'seed_averaged' as 'A vs B'")
    parser.add_argument("--repair", action="store_true", help="train nothing: pair every recorded run again with "
                        "--baseline-home's dual_encoder")
    parser.add_argument("--only", action="append", default=[], metavar="KEY", help="with --repair: only these "
                        "recorded runs (each seed paired with its own seed's baseline home: a baseline home "
                        "retrained at another seed no longer pairs the runs recorded against it)")
    parser.add_argument("--out-root", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True, help="results, rewritten after every share (resumable)")
    args = parser.parse_args(argv)
    done = json.loads(args.json.read_text()) if args.json.exists() else {"shares": {}}
    done.update({"dataset": args.dataset, "profile": args.profile, "seed": args.seed, "source_home": str(args.home)})
    baseline = args.baseline_home or args.home
    if args.seed_average:
        keys = args.seed_average.split(";")
        name = " + ".join(keys)
        if args.against:
            versus = args.against.split(";")
            if len(versus) != len(keys):
                raise SystemExit(f"--against names {len(versus)} runs for {len(keys)} in --seed-average: one each")
            name = f"{name} vs {' + '.join(versus)}"
            entries = [(Path(_run(done, args.json, k)["home"]), Path(_run(done, args.json, v)["home"]))
                       for k, v in zip(keys, versus, strict=True)]
            rows = paired(entries, args.dataset, args.profile, baseline_method=_method(done, args.json, versus[0]),
                          arm_method=_method(done, args.json, keys[0]))
        else:
            rows = paired([(Path(_run(done, args.json, k)["home"]), Path(_run(done, args.json, k)["baseline_home"]))
                           for k in keys],
                          args.dataset, args.profile, arm_method=_method(done, args.json, keys[0]))
        done.setdefault("seed_averaged", {})[name] = rows
        write_result(args.json, json.dumps(done, indent=2, default=str) + "\n")
        for row in done["seed_averaged"][name]:
            d, lo, hi = (100 * v for v in row["P@1"])
            print(f"averaged over {len(keys)} seeds, {row['subset']}: {d:+.2f} [{lo:+.2f}, {hi:+.2f}] P@1")
        return
    if args.repair:
        unknown = [k for k in args.only if k not in done["shares"]]
        if unknown:
            raise SystemExit(f"--only {unknown}: no such recorded run in {args.json}; its runs: "
                             f"{sorted(done['shares'])}")
        for key, entry in done["shares"].items():
            if args.only and key not in args.only:
                continue
            entry["rows"] = paired([(Path(entry["home"]), baseline)], args.dataset, args.profile,
                                   arm_method=entry.get("method", "ramen"))
            entry["baseline_home"] = str(baseline)
        write_result(args.json, json.dumps(done, indent=2, default=str) + "\n")
        return
    method = ("dual_encoder" if args.as_positives else "ramen_no_bandit" if args.fixed_lambda is not None
              else "ramen")
    settings: dict[str, Any] = {} if args.as_positives else dict(TRAIN_SETTINGS)
    if args.fixed_lambda is not None:
        settings.update(lambda_reg=args.fixed_lambda)
    extra = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.train_set)}
    settings.update(extra)
    for share in args.shares:
        key = (f"{share:g}" + (" novel only" if args.novel_only else "")
               + (" as positives" if args.as_positives else "")
               + (f" λ {args.fixed_lambda:g} fixed" if args.fixed_lambda is not None else "")
               + "".join(f" {k} {v}" for k, v in extra.items()) + (f" seed {args.seed}" if args.seed else ""))
        if key in done["shares"]:
            continue
        home = oracle_home(args.home, args.dataset, share, args.seed, args.out_root, key.replace(" ", "-"),
                           args.novel_only, args.as_positives)
        edges = len(oracle_pairs(load_with_anchors(args.home, args.dataset), share, args.seed, args.novel_only))
        done["shares"][key] = measure(baseline, home, args.dataset, args.profile, args.seed, settings, method, edges)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_result(args.json, json.dumps(done, indent=2, default=str) + "\n")
        for row in done["shares"][key]["rows"] or []:
            d, lo, hi = (100 * v for v in row["P@1"])
            print(f"{key}: {method} − dual_encoder, {row['subset']}: {d:+.2f} [{lo:+.2f}, {hi:+.2f}] P@1")


if __name__ == "__main__":
    main()
