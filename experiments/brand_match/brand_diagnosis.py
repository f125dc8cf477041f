"""Issue #32: why fine-tuning raises Brand BMR, and whether an offline measure ranks models as the A/B test does.

    .venv/bin/python experiments/brand_match/brand_diagnosis.py --home /work/bench_home/synthetic \
        [--dataset synthetic] [--profile demo] [--checkpoints [--seed-homes HOME ...]] \
        [--json experiments/brand_match/results/issue32_brand_diagnosis.json]

Reads the home (never writes into it): the data set with its anchor sets, every evaluated method's test top-100 and
its A/B test against ``pretrained`` (``abtest/<data set>/<profile>/<method>-vs-pretrained.json``), and the simulated
world. Prints markdown tables and writes the JSON.

1. **Training signals** (the world's hidden brand / place of queries and keywords, used to *measure* only): per
   anchor set (native and RWR-expanded edges apart) and for the click pairs, of the pairs whose node names a brand
   (place), the share whose other end names another one — what a model trained to pull them together learns.
2. **Offline vs A/B**: per model, offline metrics (P@1, P@5, R@10, PSP@5 on clicked keywords; the brand / location
   mismatch of ``xc_core.evaluation.mismatch`` computed from item metadata and query text) beside its A/B arm
   (Brand / Location BMR, IY, CTR, revenue), and Spearman's ρ of every offline metric with every A/B metric across
   models. ``--checkpoints`` adds each encoder method's saved epochs (``start_encoder``, ``best_encoder``, the last
   checkpoint): scored here with exact search, offline on the test split and in a paired A/B test with the same
   traffic as the home's tests; identical weights count once. ``--seed-homes``: copies of the home's data set
   (``datasets/``, ``anchor_sets/``, ``simulate/``) where ``xc train --seed N`` trained the encoder methods again;
   their epochs join the points. A ``-clf`` method whose fusion fell back to its encoder is not a point of its own.
3. **Why clicks do not see it**: of the test split's positives (clicked keywords) on branded queries, the share that
   name another brand (a hit for P@k, a bad match for the A/B), and the branded share of test queries vs of A/B
   traffic.

The item metadata come from the data set (``XCDataset.label_attributes``) or, for a data set built before it kept
them, from the home's event store (the events' ``brand`` / ``location`` per item): never from the world.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.abtest.arms import EncoderArm
from xc_core.abtest.stats import AB_METRICS
from xc_core.provenance import write_result

RESULTS_DIR = Path(__file__).resolve().parent / "results"

ATTRIBUTES = ("brand", "location")
#: cut-offs of the mismatch here: the library's (1, 5, 10) and deeper lists, as the A/B picks 5 of 100 candidates
KS = (1, 5, 10, 20, 50, 100)
OFFLINE_METRICS = (*(f"brand_mismatch@{k}" for k in KS), *(f"location_mismatch@{k}" for k in KS), "P@1", "P@5",
                   "R@10", "PSP@5")
#: share of the top-k with true grade ≥ 2 (the A/B's "relevant impression"): the world's grades, a measurement of
#: what IY sees and clicked-keyword labels do not — never a proposed offline metric
TRUTH_METRICS = ("true_relevant@5", "true_relevant@100")
OFFLINE_METRICS = (*OFFLINE_METRICS, *TRUTH_METRICS)
TABLE_METRICS = ("brand_mismatch@1", "brand_mismatch@5", "brand_mismatch@10", "brand_mismatch@100",
                 "location_mismatch@5", "location_mismatch@100", "P@1", "P@5", "R@10", "PSP@5", *TRUTH_METRICS)


# -- 1. training signals ----------------------------------------------------------------------------------------------
def _codes(values: list[Any]) -> dict[Any, int]:
    return {v: i for i, v in enumerate(sorted({v for v in values if v is not None}))}


def _attribute_lookups(world: Any) -> dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]]:
    """Per attribute: (query text → code, keyword id → code, keyword text → code), -1 for none."""
    out = {}
    for attribute in ATTRIBUTES:
        codes = _codes(world.queries[attribute].to_list() + world.keywords[attribute].to_list())
        query = {t: codes.get(v, -1)
                 for t, v in zip(world.queries["text"].to_list(), world.queries[attribute].to_list(), strict=True)}
        keyword = {k: codes.get(v, -1) for k, v in zip(world.keywords["keyword_id"].to_list(),
                                                       world.keywords[attribute].to_list(), strict=True)}
        text: dict[str, int] = {}
        for t, v in zip(world.keywords["text"].to_list(), world.keywords[attribute].to_list(), strict=True):
            text.setdefault(t, codes.get(v, -1))
        out[attribute] = (query, keyword, text)
    return out


def _cross(node: np.ndarray, other: np.ndarray) -> dict[str, float | int]:
    """Pairs (node value, other value), -1 = none: of the pairs whose node names one, the share whose other end names
    another (``cross_share``), and among pairs naming one on both ends, the share that differ."""
    named, both = node >= 0, (node >= 0) & (other >= 0)
    cross = both & (node != other)
    return {"pairs": int(len(node)), "node_named": int(named.sum()),
            "cross_share": float(cross.sum() / max(named.sum(), 1)),
            "cross_share_both_named": float(cross.sum() / max(both.sum(), 1))}


def training_signals(data: Any, native: Any, world: Any) -> list[dict[str, Any]]:
    """One row per (pair source, attribute): click pairs, and every anchor set's edges (native / expanded apart)."""
    lookups = _attribute_lookups(world)
    rows = []
    for attribute, (query, keyword, text) in lookups.items():
        train_q = np.array([query.get(t, -1) for t in data.train_texts])
        test_q = np.array([query.get(t, -1) for t in data.test_texts])
        label = np.array([keyword.get(i, -1) for i in data.label_ids])
        sources: list[tuple[str, np.ndarray, np.ndarray]] = []
        for name, y, docs in (("click pairs (train)", data.y_train, train_q),
                              ("click pairs (test)", data.y_test, test_q)):
            r, c = y.nonzero()
            sources.append((name, docs[r], label[c]))
        for tag, found in (("native", native), ("expanded", data)):
            for name, a in found.anchor_sets.items():
                anchor_text = text if found.meta.get("anchor_spaces", {}).get(name) == "labels" else query
                anchor = np.array([anchor_text.get(t, query.get(t, -1)) for t in a.texts])
                for side, edges, proxy, nodes in (("doc", a.doc_edges, a.doc_proxy, train_q),
                                                  ("label", a.label_edges, a.label_proxy, label)):
                    if not len(edges):
                        continue
                    kinds = [("", np.ones(len(edges), bool))] if tag == "native" else \
                        [(", native", ~np.asarray(proxy, bool)), (", proxy", np.asarray(proxy, bool))]
                    for kind, keep in kinds:
                        if keep.any():
                            sources.append((f"{name} {side}→anchor ({tag}{kind})", nodes[edges[keep, 0]],
                                            anchor[edges[keep, 1]]))
        for name, node, other in sources:
            rows.append({"source": name, "attribute": attribute, **_cross(node, other)})
    return rows


# -- 2. offline vs A/B ------------------------------------------------------------------------------------------------
def label_attributes(home: Path, data: Any) -> dict[str, list[str | None]]:
    """The data set's item metadata, or the events' brand / location per label from the home's store."""
    if data.label_attributes:
        return dict(data.label_attributes)
    import duckdb

    glob = (home / "events" / "day=*" / "events.parquet").as_posix()
    with duckdb.connect() as con:
        rows = con.sql(f"SELECT item_id, any_value(brand), any_value(location) FROM read_parquet('{glob}') "
                       "WHERE item_id IS NOT NULL GROUP BY 1").fetchall()
    found = {r[0]: r[1:] for r in rows}
    return {a: [found.get(i, (None, None))[k] for i in data.label_ids] for k, a in enumerate(ATTRIBUTES)}


def offline_row(data: Any, top: np.ndarray, attributes: dict[str, list[str | None]],
                world: Any = None) -> dict[str, float | None]:
    from xc_core.evaluation.metrics import evaluate, propensity, to_csr
    from xc_core.evaluation.mismatch import mismatch_summary

    scores = to_csr(-np.arange(top.shape[1], dtype=np.float32)[None, :].repeat(len(top), 0) + top.shape[1], top,
                    data.n_labels)
    metrics = evaluate(data.y_test, scores, k=5, inv_propensity=propensity(data))
    wide = evaluate(data.y_test, scores, k=10)
    row: dict[str, float | None] = {"P@1": metrics["P@1"], "P@5": metrics["P@5"], "PSP@5": metrics["PSP@5"],
                                    "R@10": wide["R@10"]}
    for attribute, entry in mismatch_summary(data.test_texts, top, attributes, ks=KS, n_boot=200).items():
        row.update({f"{attribute}_{k.replace('rate', 'mismatch')}": v for k, v in entry.items()
                    if k.startswith("rate@")})
        row[f"{attribute}_queries"] = entry["queries"]
    if world is not None:
        queries = np.repeat(world.query_indices(data.test_texts), top.shape[1])
        keywords = world.keyword_indices(data.label_ids)[np.maximum(top, 0)].ravel()
        relevant = (world.grades(queries, keywords) >= 2).reshape(top.shape) & (top >= 0)
        for key in TRUTH_METRICS:
            k = int(key.split("@")[1])
            row[key] = float(relevant[:, :k].sum() / max((top[:, :k] >= 0).sum(), 1))
    return row


def _sha(folder: Path) -> str:
    digest = hashlib.sha256()
    with (folder / "model.safetensors").open("rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def checkpoints(homes: list[Path], dataset: str, profile: str, methods: list[str]) -> list[tuple[str, Path, int]]:
    """(name, encoder folder, max_length) of each distinct saved encoder of the encoder-only methods in ``homes``
    (the first: the home, the others: the same data set trained with other seeds, named ``s<seed>``); an encoder
    equal to the first method's (the control) is named after it."""
    from xc_core.paths import model_dir

    found: dict[str, tuple[str, Path, int]] = {}
    for home, method in ((h, m) for h in homes for m in methods):
        folder = model_dir(home, dataset, method, profile)
        summary_path = folder / "train_summary.json"
        if method.endswith("-clf") or not summary_path.exists():
            continue
        summary = json.loads(summary_path.read_text())
        length = int(summary.get("max_length", 32))
        seed = int(summary.get("seed", 0))
        label = method if home == homes[0] else f"{method} s{seed}"
        candidate = (summary.get("epoch_fallback_test") or {}).get("candidate", {}).get("epoch")
        last = sorted((folder / "checkpoint").glob("step-*-e*/encoder"))
        options = [("e0", folder / "start_encoder"), (f"e{candidate}" if candidate is not None else "best",
                                                      folder / "best_encoder")]
        options += [(p.parent.name.rsplit("-", 1)[1], p) for p in last[-1:]]
        options.append((f"served (e{summary.get('selected_epoch', '?')})", Path(summary["encoder_dir"])))
        for tag, path in options:
            if (path / "model.safetensors").exists():
                found.setdefault(_sha(path), (f"{label} {tag}" if method != methods[0] else method, path, length))
    return list(found.values())


def shown_ranks(simulation: Any, arm: Any, traffic: Any, cfg: Any) -> dict[str, float]:
    """Where the A/B's shown ads sit in the arm's own in-market ranking by score: the share of impressions from its
    top 5 and the median rank (1-based) — the selection ranks the top-100 by score × bid."""
    from xc_core.abtest.auction import select

    cache = simulation.cache(arm, cfg.selection.candidates)
    shown = select(simulation.world, traffic, traffic.query, cache.scores, cache.keywords, cfg.selection).keyword
    candidates = cache.keywords[traffic.query]
    on = shown >= 0
    rank = np.argmax(candidates[:, None, :] == shown[:, :, None], axis=2)[on] + 1
    return {"impressions": int(on.sum()), "share_from_top5": float((rank <= 5).mean()),
            "median_rank": float(np.median(rank))}


def _spearman(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """(ρ, two-sided p) over the pairs where both are known; None under 3 pairs or without variation."""
    from scipy.stats import spearmanr

    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    found = spearmanr([p[0] for p in pairs], [p[1] for p in pairs])
    return None if np.isnan(found.statistic) else (float(found.statistic), float(found.pvalue))


def why_clicks(data: Any, world: Any, traffic: Any) -> dict[str, float]:
    """The offline ground truth's own brand crossing, and how branded the test split and the A/B traffic are."""
    query, keyword, _ = _attribute_lookups(world)["brand"]
    test_q = np.array([query.get(t, -1) for t in data.test_texts])
    label = np.array([keyword.get(i, -1) for i in data.label_ids])
    r, c = data.y_test.nonzero()
    on_branded = test_q[r] >= 0
    cross = on_branded & (label[c] >= 0) & (label[c] != test_q[r])
    rows = world.query_indices(data.test_texts)
    grade = world.grades(rows[r], world.keyword_indices([data.label_ids[j] for j in c]))
    return {"test_positives_on_branded_queries": int(on_branded.sum()),
            "share_naming_another_brand": float(cross.sum() / max(on_branded.sum(), 1)),
            "share_of_test_positives_with_grade_below_3": float((grade < 3).mean()),
            "branded_share_of_test_queries": float((test_q >= 0).mean()),
            "branded_share_of_ab_events": float((world.q_brand[traffic.query] >= 0).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--control", default="pretrained")
    parser.add_argument("--checkpoints", action="store_true", help="also score every saved epoch (minutes)")
    parser.add_argument("--seed-homes", type=Path, nargs="*", default=[],
                        help="with --checkpoints: homes holding the same data set trained with other seeds "
                             "(`xc train --seed N`); their saved epochs join the points")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "issue32_brand_diagnosis.json")
    args = parser.parse_args()
    result = run(args.home, args.dataset, args.profile, args.control, args.checkpoints, args.seed_homes)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_result(args.json, json.dumps(result, indent=2, default=float) + "\n")
    print(markdown(result))
    print(f"\nwritten {args.json}")


def _fell_back(home: Path, dataset: str, method: str, profile: str) -> bool:
    """A classifier-stage method whose served fusion is its encoder alone (α = 1, no lexical channel)."""
    from xc_core.paths import model_dir

    summary = model_dir(home, dataset, method, profile) / "train_summary.json"
    folder = json.loads(summary.read_text()).get("classifier_dir") if summary.exists() else None
    if not folder or not (Path(folder) / "fusion.json").exists():
        return False
    fusion = json.loads((Path(folder) / "fusion.json").read_text())
    return float(fusion.get("alpha", 0)) >= 1 and float(fusion.get("lexical_weight", 0)) == 0


def run(home: Path, dataset: str, profile: str, control: str, with_checkpoints: bool,
        seed_homes: list[Path] | None = None) -> dict[str, Any]:
    from xc_core.abtest import ABConfig, Simulation, run_abtest
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.paths import abtest_dir, dataset_dir, eval_root
    from xc_core.stages.abtest import ground_truth
    from xc_core.stages.anchor_sets import load_with_anchors

    started = time.perf_counter()
    data = load_with_anchors(home, dataset)
    native = XCDataset.load(dataset_dir(home, dataset))
    world = ground_truth(dataset, home)
    if world is None:
        raise SystemExit(f"{dataset}: no simulated world, nothing to measure against")
    attributes = label_attributes(home, data)
    signals = training_signals(data, native, world)

    models: dict[str, dict[str, Any]] = {}
    ab_config: dict[str, Any] | None = None
    for folder in sorted(eval_root(home, dataset).glob(f"*-{profile}")):
        record = EvaluationRecord.load(folder)
        if record is None:
            continue
        method = record.method
        entry: dict[str, Any] = {"kind": "method (its evaluation, its A/B test)",
                                 "offline": offline_row(data, record.top(), attributes, world)}
        test = abtest_dir(home, dataset, profile) / f"{method}-vs-{control}.json"
        if test.exists():
            body = json.loads(test.read_text())
            ab_config = ab_config or body["config"]
            entry["ab"] = {m: body["arms"]["treatment"][m] for m in AB_METRICS}
            entry["ab_delta_pct"] = {m: body["delta_pct"][m] for m in AB_METRICS}
            models.setdefault(control, {"kind": "method (its evaluation, its A/B test)",
                                        "ab": {m: body["arms"]["control"][m] for m in AB_METRICS}})
        models.setdefault(method, {}).update(entry)
    if ab_config is None:
        raise SystemExit(f"no A/B test against {control} under {abtest_dir(home, dataset, profile)}")
    cfg = ABConfig(**ab_config)
    simulation = Simulation(world)
    traffic = simulation.traffic(cfg)

    if with_checkpoints:
        found = checkpoints([home, *(seed_homes or [])], dataset, profile,
                            [control, *sorted(set(models) - {control})])
        arms = {name: EncoderArm(name, path, data.label_ids, data.label_texts, length) for name, path, length in found}
        base = arms.get(control)
        if base is None:
            raise SystemExit("no pretrained encoder among the checkpoints")
        for name, arm in arms.items():
            tick = time.perf_counter()
            _, top = arm.search(list(data.test_texts), 100)
            body = run_abtest(simulation, base, arm, cfg)
            models[f"{name} [exact]"] = {
                "kind": "saved encoder, exact search (scored here)", "folder": str(arm.folder),
                "offline": offline_row(data, top, attributes, world),
                "ab": {m: body["arms"]["treatment"][m] for m in AB_METRICS},
                "ab_delta_pct": {m: body["delta_pct"][m] for m in AB_METRICS},
                "ab_shown_ranks": shown_ranks(simulation, arm, traffic, cfg), "seconds": time.perf_counter() - tick}
            print(f"{name}: {time.perf_counter() - tick:.0f} s", flush=True)

    # one point per distinct model: with the checkpoints scored here, an encoder-only method's own row is its served
    # epoch again (HNSW instead of exact search), so only the -clf methods keep their evaluation's row; a served model
    # equal to another (a fallback to epoch 0) gives equal rows, counted once
    for method in models:
        if method.endswith("-clf") and _fell_back(home, dataset, method, profile):
            models[method]["classifier"] = "fell back: α = 1, no lexical channel (served = its encoder)"
    points = {m: e for m, e in models.items() if "offline" in e and "ab" in e
              and (not with_checkpoints or m.endswith("[exact]") or (m.endswith("-clf") and "classifier" not in e))}
    distinct: dict[str, str] = {}
    for name, e in sorted(points.items(), key=lambda item: item[0].endswith("-clf")):  # the encoder's name first
        distinct.setdefault(json.dumps([e["offline"], e["ab"]], sort_keys=True, default=float), name)
    used = [n for n in points if n in distinct.values()]
    for name, e in points.items():
        twin = distinct[json.dumps([e["offline"], e["ab"]], sort_keys=True, default=float)]
        if twin != name:
            e["same_as"] = twin
    rho_p = {(o, a): _spearman([points[n]["offline"].get(o) for n in used], [points[n]["ab"][a] for n in used])
             or (None, None) for o in OFFLINE_METRICS for a in AB_METRICS}
    correlations = {o: {a: rho_p[o, a][0] for a in AB_METRICS} for o in OFFLINE_METRICS}
    p_values = {o: {a: rho_p[o, a][1] for a in AB_METRICS} for o in OFFLINE_METRICS}
    return {"home": str(home), "dataset": dataset, "profile": profile, "control": control, "ab_config": ab_config,
            "training_signals": signals, "why_clicks_do_not_see_it": why_clicks(data, world, traffic),
            "models": models, "points": used, "spearman": correlations, "spearman_p": p_values,
            "seconds": round(time.perf_counter() - started, 1)}


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def markdown(result: dict[str, Any]) -> str:
    out = ["**Training signals: of the pairs whose node names a brand / place, the share whose other end names "
           "another (world attributes, measurement only)**", "",
           "| source | attribute | pairs | node names one | cross share % | cross among both named % |",
           "|---|---|---|---|---|---|"]
    for r in result["training_signals"]:
        out.append(f"| {r['source']} | {r['attribute']} | {r['pairs']:,} | {r['node_named']:,} | "
                   f"{_pct(r['cross_share'])} | {_pct(r['cross_share_both_named'])} |")
    out += ["", "**Why clicked keywords do not see it**", ""]
    out += [f"- {k.replace('_', ' ')}: {v:.4f}" if isinstance(v, float) else f"- {k.replace('_', ' ')}: {v}"
            for k, v in result["why_clicks_do_not_see_it"].items()]
    out += ["", "**Offline (test split, %) vs A/B arm (paired, same traffic)**", "",
            "| model | " + " | ".join(k.replace("_mismatch", " mm") for k in TABLE_METRICS) + " | Brand BMR | "
            "Location BMR | IY | CTR | revenue |", "|---" * (len(TABLE_METRICS) + 6) + "|"]
    for name in result["points"]:
        e = result["models"][name]
        o, a = e["offline"], e["ab"]
        out.append(f"| {name} | " + " | ".join(_pct(o.get(k)) for k in TABLE_METRICS) + " | "
                   + " | ".join(f"{a[k]:.2f}" for k in AB_METRICS) + " |")
    ranks = [(n, e["ab_shown_ranks"]) for n, e in result["models"].items() if "ab_shown_ranks" in e]
    if ranks:
        out += ["", "**Where the A/B's shown ads sit in the arm's own in-market ranking (score × bid picks 5 of "
                "100)**", "", "| model | impressions | share from its top 5 % | median rank |", "|---|---|---|---|"]
        out += [f"| {n} | {r['impressions']:,} | {_pct(r['share_from_top5'])} | {r['median_rank']:.0f} |"
                for n, r in ranks]
    out += ["", f"**Spearman ρ across {len(result['points'])} models: offline (rows) vs A/B (columns)**", "",
            "| offline \\ A/B | " + " | ".join(AB_METRICS) + " |", "|---" * (len(AB_METRICS) + 1) + "|"]
    twins = [f"{n} = {e['same_as']}" for n, e in result["models"].items() if "same_as" in e]
    twins += [f"{n}: classifier {e['classifier']}" for n, e in result["models"].items() if "classifier" in e]
    if twins:
        out.insert(out.index("**Offline (test split, %) vs A/B arm (paired, same traffic)**") + 1,
                   f"(equal rows counted once: {', '.join(twins)})")
    for o, row in result["spearman"].items():
        p = result["spearman_p"][o]
        out.append(f"| {o} | " + " | ".join("–" if row[a] is None else f"{row[a]:+.2f} (p {p[a]:.2g})"
                                             for a in AB_METRICS) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
