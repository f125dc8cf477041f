"""One self-contained HTML report per data set comparing every evaluated method (plots embedded)."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from xc_core.plotting import png_base64, pyplot

TABLE_KEYS = ("P@1", "P@3", "P@5", "nDCG@3", "nDCG@5", "PSP@1", "PSP@3", "PSP@5", "PSnDCG@3", "PSnDCG@5",
              "R@10", "R@100")


@dataclass
class MethodResult:
    method: str
    metrics: dict[str, float]  # evaluate() keys, fractions
    ci: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # metric → (mean, low, high)
    index: dict[str, float] = field(default_factory=dict)  # hnsw_recall@10, ms_per_query …
    subsets: dict[str, dict[str, float]] = field(default_factory=dict)  # seen/novel/novel labels/deciles
    quantiles: list[dict[str, Any]] = field(default_factory=list)  # per label quantile: bin, P@5 share, R share
    mlflow_run_id: str = ""
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # a method's own analyses (title → rows)
    # the seen-label view (predictions restricted to labels with a training positive): metrics and CIs as above;
    # empty for an evaluation saved before the view
    seen: dict[str, float] = field(default_factory=dict)
    seen_ci: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    # brand / location mismatch in the top-k of queries naming one (evaluation.mismatch): attribute → its summary;
    # empty on a data set without item metadata
    mismatch: dict[str, dict[str, Any]] = field(default_factory=dict)


def drawn_once(draw: Callable[[Any], str]) -> Callable[[Any], str]:
    """``draw(figures) -> base64 PNG`` made once per process for equal figures (JSON-able: compared, and handed to
    ``draw``, as their JSON). A run shows the same chart on several pages, and the results job rebuilds every report:
    a drawing cost as much as the rest of the page."""
    cached = functools.lru_cache(maxsize=32)(lambda text: draw(json.loads(text)))

    @functools.wraps(draw)
    def drawing(figures: Any) -> str:
        return cached(json.dumps(figures, default=float))

    return drawing


def _metric_rows(results: list[MethodResult]) -> tuple[list[str], list[dict[str, Any]]]:
    """(column keys, one row per method: cells with the value in %, its CI and whether it is the column's best)."""
    keys = [k for k in TABLE_KEYS if any(k in r.metrics for r in results)]
    best = {k: max(r.metrics.get(k, float("-inf")) for r in results) for k in keys}
    rows = []
    for r in results:
        cells = []
        for k in keys:
            value = r.metrics.get(k)
            ci = (f"{100 * r.ci[k][1]:.2f}", f"{100 * r.ci[k][2]:.2f}") if k in r.ci else None
            cells.append({"text": "–" if value is None else f"{100 * value:.2f}", "ci": ci,
                          "best": value is not None and value == best[k]})
        rows.append({"method": r.method, "cells": cells})
    return keys, rows


def _curves(results: list[MethodResult]) -> str:
    """P@k and PSP@k per method (base64 PNG)."""
    return _curves_png([[r.method, {k: v for k, v in r.metrics.items() if k.startswith(("P@", "PSP@"))}]
                        for r in results])


@drawn_once
def _curves_png(methods: list[list[Any]]) -> str:
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for method, metrics in methods:
        ks = sorted(int(k.split("@")[1]) for k in metrics if k.startswith("P@"))
        axes[0].plot(ks, [100 * metrics[f"P@{k}"] for k in ks], marker="o", label=method)
        ps = [k for k in ks if f"PSP@{k}" in metrics]
        axes[1].plot(ps, [100 * metrics[f"PSP@{k}"] for k in ps], marker="o", label=method)
    axes[0].set(title="P@k", xlabel="k")
    axes[1].set(title="PSP@k", xlabel="k")
    axes[0].legend(fontsize=8)
    return png_base64(fig)


def _quantile_chart(results: list[MethodResult]) -> str | None:
    """P@5 per label quantile per method (base64 PNG), or None when no method has the bins."""
    with_bins = [r for r in results if r.quantiles]
    if not with_bins:
        return None
    return _quantile_png({"bins": [q["bin"] for q in with_bins[0].quantiles],
                          "methods": [[r.method, [q["P@5"] for q in r.quantiles]] for r in with_bins]})


@drawn_once
def _quantile_png(figures: dict[str, Any]) -> str:
    plt = pyplot()
    import numpy as np

    bins, methods = figures["bins"], figures["methods"]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(methods)
    for i, (method, shares) in enumerate(methods):
        ax.bar(np.arange(len(bins)) + i * width, [100 * share for share in shares], width, label=method)
    ax.set_xticks(np.arange(len(bins)) + 0.4 - width / 2, [f"Q{b + 1}" for b in bins])
    ax.set(title="P@5 contribution per label quantile (Q1 = tail … Q5 = head; RAMEN Fig. 4)", ylabel="P@5 (%)")
    ax.legend(fontsize=8)
    return png_base64(fig)


def _cell(value: Any) -> str:
    """A table cell: floats to 4 significant digits, everything else as text (escaped by the template)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@functools.cache
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("xc_core.evaluation", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["cell"] = _cell
    return env.get_template("report.html.j2")


def render_report(dataset: str, results: list[MethodResult], out: Path, diff_table: list[dict[str, Any]],
                  examples: list[dict[str, Any]], notes: dict[str, Any],
                  paired: list[dict[str, Any]] | None = None, tradeoffs: dict[str, Path] | None = None,
                  diff_methods: tuple[str, str] | None = None, abtests: str | None = None,
                  label_deciles: list[dict[str, Any]] | None = None) -> Path:
    """Write ``out`` (HTML, from ``templates/report.html.j2``): metrics with CIs (and in the seen-label view, for
    methods evaluated with it), brand / location mismatch (data sets with item metadata), curves, quantile bars, DIFF@k,
    subsets, examples, index stats, and for each method with a classifier stage its head/tail trade-off plot
    (``tradeoffs``: method → PNG). ``diff_methods``: (method, baseline) of the DIFF@k table. ``abtests``: the A/B
    section's HTML (``xc_core.abtest.report.render_section``), rendered as is. ``label_deciles``: P@5 by
    label-frequency decile (``label_deciles.label_decile_rows``)."""
    subsets = [{"method": r.method, "subset": s, **{k: v for k, v in m.items() if k in ("P@1", "P@5", "PSP@5", "R@10",
                                                                                       "rows")}}
               for r in results for s, m in r.subsets.items()]
    metric_keys, metric_rows = _metric_rows(results)
    seen_keys, seen_rows = _metric_rows([replace(r, metrics=r.seen, ci=r.seen_ci) for r in results if r.seen])
    from xc_core.evaluation.mismatch import mismatch_rows

    mismatch = mismatch_rows({r.method: r.mismatch for r in results if r.mismatch})
    page = _template().render(
        dataset=dataset, notes=notes, metric_keys=metric_keys, metric_rows=metric_rows, paired=paired or [],
        seen_keys=seen_keys, seen_rows=seen_rows, mismatch=mismatch,
        curves=_curves(results), quantile_chart=_quantile_chart(results), diff_table=diff_table,
        diff_methods=diff_methods or ("method", "baseline"),
        tradeoffs={m: base64.b64encode(p.read_bytes()).decode() for m, p in (tradeoffs or {}).items()},
        subsets=subsets, index_rows=[{"method": r.method, **r.index} for r in results if r.index], examples=examples,
        abtests=abtests, label_deciles=label_deciles or [],
        method_tables=[(r.method, title, rows) for r in results for title, rows in r.tables.items()])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
