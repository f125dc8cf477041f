"""The results page as Markdown (``RESULTS.md``), and :class:`DatasetResults`, what it shows for one data set: the
headline table, each data set's metrics, paired differences, learned choices, graph check, peers and costs.
Gathering the records is ``stages/results.py``'s work; this module only lays them out."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xc_core.methods.roles import cost_reference

METRICS = ("P@1", "P@5", "R@10", "PSP@1", "PSP@5")
HEADLINE = ("P@1", "PSP@1")  # the headline table's columns per data set (the first with its interval)
EXPERIMENT = "xc-results"


@dataclass
class DatasetResults:
    """Everything the page shows for one data set (``results.json`` holds it as is)."""

    dataset: str
    summary: dict[str, Any]
    methods: list[dict[str, Any]] = field(default_factory=list)  # metrics with CIs, reused or not, runs
    paired: list[dict[str, Any]] = field(default_factory=list)
    ablations: list[dict[str, Any]] = field(default_factory=list)
    subsets: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)  # a method's own analyses (IRENE's settings)
    abtests: list[dict[str, Any]] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    seeds: list[dict[str, Any]] = field(default_factory=list)  # metrics over seeds (more than one seed asked)
    report: str = ""
    # analyses.untrained_positive_share of the test split: positive pairs ("pairs") and queries whose positives all
    # are ("rows") on labels without a training positive, which the linear peer cannot score
    untrained: dict[str, float] = field(default_factory=dict)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)  # each learned choice against its fallback
    graph_worth: dict[str, Any] = field(default_factory=dict)  # the graph-worth check as `xc anchors` recorded it
    graph_gain: list[dict[str, Any]] = field(default_factory=list)  # ramen − dual_encoder per query-frequency decile
    label_deciles: list[dict[str, Any]] = field(default_factory=list)  # P@5 by label-frequency decile (the tail)


    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2, default=str) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> DatasetResults:
        return cls(**json.loads(path.read_text()))


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def _with_ci(cell: list[float | None] | None, signed: bool = False) -> str:
    if not cell or cell[0] is None:
        return "–"
    if cell[1] is None:
        return _pct(cell[0], signed)
    return f"{_pct(cell[0], signed)} [{_pct(cell[1], signed)}, {_pct(cell[2], signed)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows), ""]


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _costs_table(costs: list[dict[str, Any]]) -> list[str]:
    rows = []
    for c in costs:
        split, ratios = c["split_ms"], c["ratios"]
        total = _num(c["train_seconds"], 1) + (f" (with {c['base']})" if c["base"] else "")
        rows.append([c["method"], total, _num(c["epochs"]), _num(c["seconds_per_epoch"], 1), _num(ratios["train"]),
                     _num(c["ms_per_query"], 3), *(_num(split.get(p), 3) if p in split else "–"
                                                   for p in ("encoder", "graph", "search")),
                     _num(ratios["predict"]), _num(c["parameters"]), c["parameters_from"] or "–",
                     _num(ratios["size"])])
    n = costs[0]["timed_queries"] if costs else 0
    unit = cost_reference()
    return _table(["method", "train s", "epochs", "train s/epoch", f"train × {unit}",
                   f"ms/query (total, {n} queries)", "encoder ms", "graph ms", "search ms", f"predict × {unit}",
                   "parameters", "counted", f"size × {unit}"], rows)


def _short_commit(commit: str | None) -> str:
    """A recorded ``git_commit`` in a table cell: its first 7 hex digits, ``+`` when it had uncommitted changes."""
    if not commit or commit == "unknown":
        return "–"
    return commit[:7] + ("+" if commit.endswith("(with uncommitted changes)") else "")


def _commits_cell(commits: dict[str, str | None] | None) -> str:
    commits = commits or {}
    return f"{_short_commit(commits.get('training'))} / {_short_commit(commits.get('evaluation'))}"


def _row_label(method: dict[str, Any]) -> str:
    """A method's name in the tables, the linear peer marked as such."""
    return method["method"] + (" (peer)" if method["peer"] else "")


def _generic_table(rows: list[dict[str, Any]]) -> list[str]:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return _table(keys, [[_num(r.get(k)) for k in keys] for r in rows])


def _candidate(candidate: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (candidate or {}).items()) or "–"


def _dataset_section(r: DatasetResults) -> list[str]:
    s = r.summary
    lines = [f"## {r.dataset}", "",
             f"{_num(s.get('train_documents'))} training and {_num(s.get('test_documents'))} test documents "
             f"({_num(s.get('novel_test_documents'))} novel), {_num(s.get('labels'))} labels "
             f"({_num(s.get('novel_labels'))} novel). HTML report: `{r.report}`.", "",
             "### Test-split metrics (RAMEN Table 4, TextGNN Table 4)", "",
             "%, with the 95% bootstrap interval over test queries. Trained / evaluated at: the commit the model "
             "was trained at and the one it was evaluated at (7 digits; +: with uncommitted changes); a model "
             "whose code has not changed since is kept, so its commit can be older than the page's.", ""]
    lines += _table(["method", *METRICS, "trained / evaluated at"],
                    [[_row_label(m), *(_with_ci(m.get(k)) for k in METRICS), _commits_cell(m.get("commits"))]
                     for m in r.methods])
    lines += ["### Paired differences", "",
              "method − reference in points, 95% paired bootstrap interval on the same test queries.", ""]
    lines += _table(["method", "vs", *(f"Δ{k}" for k in METRICS)],
                    [[p["method"], p["vs"], *(_with_ci(p.get(k), True) for k in METRICS)]
                     for p in r.paired if not p.get("peer")])
    lines += _peer_section(r)
    if r.fallbacks:
        lines += ["### Learned choices against their do-nothing fallback", "",
                  "The selection procedure is cross-fitted: each fold's rows are ranked by the candidate picked on "
                  "the other folds, and the candidate is served only when that paired 95% interval lies above 0 and "
                  "P@1 / PSP@1 are not lost (xc_core/evaluation/fallback.py). Gain in points over the tested rows "
                  "(the classifier stage's are out-of-fold training documents); *detectable P@1*: the half-width of "
                  "the test's P@1 interval, the smallest P@1 gain it could have told from 0.", ""]
        lines += _table(["method", "choice", "candidate", "served", "metric", "gain", "tested rows",
                         "detectable P@1"],
                        [[f["method"], str(f["choice"]), _candidate(f.get("candidate")),
                          "candidate" if f["kept"] else "fallback", str(f["metric"]),
                          _with_ci([f.get("gain"), f.get("low"), f.get("high")], True), _num(f.get("tested_on_rows")),
                          "–" if f.get("detectable_P@1") is None else f"±{_pct(f['detectable_P@1'])}"]
                         for f in r.fallbacks])
    lines += _graph_section(r)
    if r.ablations:
        lines += ["### Ablations and anchor-set restrictions (RAMEN Table 6)", "",
                  "full − ablation in points, paired 95% interval; evaluated at: the ablation's commit.", ""]
        lines += _table(["ablation", "of", *(f"{k}" for k in METRICS), *(f"Δ{k}" for k in METRICS), "evaluated at"],
                        [[a["method"], a["of"], *(_pct(a["metrics"].get(k)) for k in METRICS),
                          *(_with_ci(a.get(k), True) for k in METRICS), _short_commit(a.get("evaluated_at"))]
                         for a in r.ablations])
    if r.label_deciles:
        lines += ["### The tail in view: P@5 by label-frequency decile", "",
                  "Points of P@5 earned on each decile's labels (0 = tail, with the labels without a training "
                  "positive; 9 = head; `label_deciles.py`); the last column is the best classifier stage minus its "
                  "encoder on the same test queries, 95% paired interval.", ""]
        lines += _generic_table(r.label_deciles)
    if r.subsets:
        keys = [k for k in ("P@1", "P@5", "PSP@1", "PSP@5", "R@10") if any(k in x for x in r.subsets)]
        lines += ["### Subsets: seen / novel queries, novel labels, deciles (RAMEN Table 8)", "",
                  "%; rows: test queries in the subset.", ""]
        lines += _table(["method", "subset", "rows", *keys],
                        [[x["method"], x["subset"], _num(int(x["rows"]) if "rows" in x else None),
                          *(_pct(x.get(k)) for k in keys)] for x in r.subsets])
    if r.tables:
        lines += ["### Method analyses (IRENE Table 7)", ""]
    for t in r.tables:
        lines += [f"#### {t['method']}: {t['title']}", ""] + _generic_table(t["rows"])
    if r.abtests:
        metrics = list(dict.fromkeys(k for a in r.abtests for k in a["headline"]))
        designs = "; ".join(dict.fromkeys(f"{a['mode']}, {a['design']}" for a in r.abtests))
        lines += ["### Simulated A/B tests", "", f"{designs}: %Δ treatment vs control [95% CI] (p).", ""]
        lines += _table(["treatment", "control", *metrics],
                        [[a["treatment"], a["control"], *(a["headline"].get(k, "–") for k in metrics)]
                         for a in r.abtests])
    if r.seeds:
        lines += [f"### Over seeds {', '.join(map(str, r.seeds[0]['seeds']))}", "",
                  "%, mean ± standard deviation over the training seeds (the tables above: the first seed).", ""]
        lines += _table(["method", *METRICS], [[x["method"], *(f"{_pct(x[k]['mean'])} ± {_pct(x[k]['sd'])}"
                                                               for k in METRICS)] for x in r.seeds])
    lines += ["### Costs (RAMEN Table 5)", "",
              "Training seconds from the training records (with the run whose encoder a method reuses or builds "
              "on), per epoch (n/a: no epoch trained); ms/query timed with each method's serving scorer over the "
              "same test queries, model loaded and warmed up (encoder / graph / search: what the method's "
              "predictions recorded); parameters recorded by the method or counted from the weights it serves; "
              f"× {cost_reference()}: the ratio to {cost_reference()}'s.", ""]
    return lines + _costs_table(r.costs)


def _graph_section(r: DatasetResults) -> list[str]:
    """Will this graph help? The check's table, its prediction and the measured ramen − dual_encoder."""
    if not r.graph_worth and not r.graph_gain:
        return []
    lines = ["### Will this graph help? (the graph-worth check against the measured gain)", ""]
    worth = r.graph_worth
    if worth:
        rows = worth["table"]
        lines += [f"From training and validation rows only ({_num(worth['validation'].get('rows'))} "
                  f"{worth['validation'].get('kind', '')} validation rows; xc_core/graphs/worth.py). Novelty: held-out "
                  "positives reached through the set beyond the documents' own training labels; chance: the same "
                  "with another document's positives; redundancy: edges restating a training pair; agreement: cosine "
                  "of the set's regularizer gradient (training batches) with the task gradient on validation batches "
                  f"at the starting encoder. Prediction: **{worth['prediction']}**"
                  f"{' (' + ', '.join(worth['kept']) + ')' if worth['kept'] else ''}; ramen starts every other set "
                  "at λ = 0. Served encoders: "
                  f"{'; '.join(f'{m} → {e}' for m, e in worth.get('served', {}).items()) or 'n/a'}.", ""]
        lines += _table(list(rows[0]), [["–" if v is None else str(v) for v in row.values()]  # rounded by the table
                                        for row in rows]) if rows else []
    if r.graph_gain:
        lines += [f"Measured on the test split, {r.graph_gain[0]['basis']} deciles (0 = head); P@1 difference in "
                  "points, 95% paired bootstrap interval.", ""]
        lines += _table(["method", "vs", "subset", "rows", "ΔP@1"],
                        [[g["method"], g["vs"], g["subset"], _num(g["rows"]), _with_ci(g["P@1"], True)]
                         for g in r.graph_gain])
    return lines


def _peer_section(r: DatasetResults) -> list[str]:
    """The methods against the linear peer in both views: all labels, and seen labels only (predictions restricted
    to labels with a training positive, ``analyses.seen_label_view``), with the test split's share on the others."""
    against = [p for p in r.paired if p.get("peer")]
    if not against:
        return []
    share = r.untrained
    lines = ["### Against the linear peer: all labels and seen labels", "",
             f"{_pct(share.get('pairs'))}% of the test positives (query, label pairs) are on labels without a training "
             f"positive, and {_pct(share.get('rows'))}% of the test queries have only such positives. A linear "
             "one-vs-all peer cannot score those labels. The seen-label view restricts every method's predictions to "
             "labels with a training positive (each query re-ranked over them) and keeps the same queries and "
             "positives: a query with only untrained positives counts 0, R@k still divides by all of a query's "
             "positives, PSP@k keeps their weights in its denominator. A lead that holds in it does not come from "
             "labels the peer cannot score. %, 95% bootstrap interval over test queries.", ""]
    lines += _table(["method", *(f"{k} seen labels" for k in METRICS)],
                    [[_row_label(m), *(_with_ci((m.get("seen_labels") or {}).get(k)) for k in METRICS)]
                     for m in r.methods])
    lines += ["method − peer in points, 95% paired bootstrap interval on the same test queries, in each view.", ""]
    return lines + _table(["method", "vs", "view", *(f"Δ{k}" for k in METRICS)],
                          [[p["method"], p["vs"], view, *(_with_ci(cells.get(k), True) for k in METRICS)]
                           for p in against for view, cells in (("all labels", p), ("seen labels", p["seen_labels"]))])


def _headline_cell(method: dict[str, Any] | None, metric: str, with_ci: bool) -> str:
    if method is None or not method.get(metric):
        return "–"
    return _with_ci(method[metric]) if with_ci else _pct(method[metric][0])


def headline(results: list[DatasetResults]) -> list[str]:
    """Method × data set: P@1 with its 95% interval and PSP@1 — the headline table of docs/results/index.md — and,
    for a data set whose evaluations hold the seen-label view, P@1 in it (predictions restricted to labels with a
    training positive: what sets a method against the linear peer without the labels the peer cannot score)."""
    cells = {(r.dataset, _row_label(m)): m for r in results for m in r.methods}
    order = list(dict.fromkeys(_row_label(m) for r in results for m in r.methods))
    seen = {r.dataset for r in results if any(m.get("seen_labels") for m in r.methods)}
    header, rows = ["method"], [[method] for method in order]
    for r in results:
        header += [f"{r.dataset} {k}" for k in HEADLINE] + ([f"{r.dataset} {HEADLINE[0]} seen labels"]
                                                          if r.dataset in seen else [])
        for method, row in zip(order, rows, strict=True):
            found = cells.get((r.dataset, method))
            row += [_headline_cell(found, k, k == HEADLINE[0]) for k in HEADLINE]
            if r.dataset in seen:
                row.append(_headline_cell((found or {}).get("seen_labels"), HEADLINE[0], False))
    return _table(header, rows)


def render_markdown(header: dict[str, Any], results: list[DatasetResults]) -> str:
    lines = ["# Results", "",
             "Written by the `results` job (`xc results` / Dagster job `results`: the assets `<data set>/results` and "
             "`results_page`); every number below comes from the records this header's run read. Its git commit is "
             "the page's; each method's model and evaluation carry their own, in the metrics tables (the job "
             "retrains and re-evaluates a method whose code or data changed, and keeps the others). Every metric "
             "ranks the test queries exactly over the whole label space (flat inner products; the fused search over "
             "flat indexes); the served HNSW index's recall@10 against that ranking is in each evaluation's "
             "`metrics.json` (`hnsw_recall@10`) and the HTML report's index table.", ""]
    lines += _table(["", ""], [["command", f"`{header['command']}`"], ["git commit", header["git_commit"]],
                               ["profile", header["profile"]], ["seeds", ", ".join(map(str, header["seeds"]))],
                               ["machine", header["machine"]["text"]],
                               ["date", header["date"]], ["data sets", ", ".join(header["datasets"])],
                               ["methods", ", ".join(header["methods"])], ["seconds", _num(header["seconds"], 0)],
                               ["MLflow", f"run {header.get('mlflow_run_id', '')} of experiment {EXPERIMENT}"]])
    lines += ["## Headline", "", f"Test {HEADLINE[0]} (%, 95% bootstrap interval) and {HEADLINE[1]} (%) of every "
              "method on every data set; the sections below hold the other metrics, the paired differences and the "
              "costs.", ""] + headline(results)
    for r in results:
        lines += _dataset_section(r)
    return "\n".join(lines).rstrip() + "\n"
