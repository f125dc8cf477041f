"""Paired P@1 of a graph-at-inference method (TextGNN, OAK) against others, split by whether a test query has a
test-time graph edge (an anchor of its own, as of the query's time) or falls back to ANN proxies.

    .venv/bin/python experiments/graph_at_inference/graph_edge_pairs.py --home /work/aolhome --dataset aol-1000 \\
        --method textgnn --against pretrained --against dual_encoder [--json FILE]

Every method named must be evaluated on the test split in the home (``per_row.npz``); the rows are the same test
queries, so each difference is paired (95% bootstrap).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np


def graph_edge_rows(home: Path, dataset: str) -> np.ndarray:
    """True for each test query linked to at least one anchor other than its own text, in any anchor set: the rows
    whose neighbours TextGNN and OAK take from the graph (the others get ANN proxies)."""
    from xc_core.datasets.container import XCDataset
    from xc_core.methods.textgnn.neighbours import anchor_test_edges
    from xc_core.paths import anchors_dir

    data = XCDataset.load(anchors_dir(home, dataset))
    linked = np.zeros(len(data.test_texts), bool)
    for anchor_set in data.anchor_sets.values():
        for row, anchor in anchor_test_edges(anchor_set):
            if anchor_set.texts[anchor] != data.test_texts[row]:
                linked[row] = True
    return linked


def trained_at(home: Path, dataset: str, method: str, profile: str) -> str:
    """The commit that trained ``method``'s model in ``home`` (a peer scored by `xc peer` has no training record)."""
    from xc_core.paths import model_dir

    record = model_dir(home, dataset, method, profile) / "train_summary.json"
    return str(json.loads(record.read_text()).get("git_commit", "unknown"))[:7] if record.is_file() else "no record"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--method", required=True)
    parser.add_argument("--against", action="append", required=True)
    parser.add_argument("--method-home", type=Path, help="the home --method was evaluated in, when not --home (a "
                        "variant home sharing its data: the same test split)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    method_home = args.method_home or args.home
    # the method's name in the tables: a variant home's model is named by its home (it may share the method's name
    # with a model of --home it is compared against)
    name = args.method if method_home == args.home else f"{args.method}@{method_home.name}"

    from xc_core.evaluation.analyses import paired_metric_diff
    from xc_core.paths import eval_dir, model_dir
    from xc_core.provenance import write_result

    def rows(method: str, home: Path = args.home) -> dict[str, np.ndarray]:
        with np.load(eval_dir(home, args.dataset, method, args.profile) / "per_row.npz") as data:
            return {k: data[k] for k in data.files}

    linked = graph_edge_rows(args.home, args.dataset)
    # the rule above restates the scorer's (heldout_doc_neighbours); its evaluation's recorded count must agree
    analysis = eval_dir(method_home, args.dataset, args.method, args.profile) / "textgnn_analysis.json"
    recorded = json.loads(analysis.read_text()).get("test_neighbours", {}) if analysis.is_file() else {}
    # the positive control (TextGNN's oracle_neighbours) hands every test query its answers: no graph rule to check
    settings = model_dir(method_home, args.dataset, args.method, args.profile) / "textgnn" / "settings.json"
    oracle = settings.is_file() and bool(json.loads(settings.read_text()).get("oracle_neighbours", False))
    if "graph" in recorded and recorded["graph"] != int(linked.sum()) and not oracle:
        raise SystemExit(f"{analysis}: the evaluation linked {recorded['graph']} test queries to the graph, this "
                         f"script finds {int(linked.sum())} — the scorer's rule changed; update graph_edge_rows")
    out: dict[str, Any] = {"home": str(args.home), "method_home": str(method_home), "dataset": args.dataset,
                           "method": args.method, "oracle_neighbours": oracle,
                           "test_queries": len(linked), "with_graph_edge": int(linked.sum()), "pairs": {}}
    print(f"{args.dataset}: {linked.sum()} of {len(linked)} test queries have a test-time graph edge")
    out["trained_at"] = {name: trained_at(method_home, args.dataset, args.method, args.profile),
                         **{m: trained_at(args.home, args.dataset, m, args.profile) for m in args.against}}
    ours = rows(args.method, method_home)
    for other in args.against:
        theirs = rows(other)
        if len(theirs["P@1"]) != len(ours["P@1"]):
            raise SystemExit(f"{other}: {len(theirs['P@1'])} test rows against {len(ours['P@1'])}: not the same test "
                             "split (a variant home must share its base home's data)")
        for subset, mask in (("all", np.ones_like(linked)), ("graph edge", linked), ("proxy only", ~linked)):
            if not mask.any():  # e.g. wikispeedia: every test article has a link, so no query falls back to proxies
                out["pairs"][f"{name} − {other} ({subset})"] = {"rows": 0}
                print(f"{name} − {other} on {subset}: no test query")
                continue
            a = {k: v[mask] for k, v in ours.items()}
            b = {k: v[mask] for k, v in theirs.items()}
            found = paired_metric_diff(a, b, "P@1")
            assert found is not None
            diff, low, high = (100 * x for x in found[:3])
            out["pairs"][f"{name} − {other} ({subset})"] = {
                "rows": int(mask.sum()), "P@1": [round(diff, 2), round(low, 2), round(high, 2)],
                "means": [round(100 * float(a["P@1"].mean()), 2), round(100 * float(b["P@1"].mean()), 2)]}
            print(f"{name} − {other} on {subset} ({mask.sum()}): P@1 {diff:+.2f} [{low:+.2f}, {high:+.2f}]")
    if args.json:
        write_result(args.json, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
