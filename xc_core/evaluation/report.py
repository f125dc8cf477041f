"""One self-contained HTML report per data set comparing every evaluated method (plots embedded)."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}"/>'


def _metrics_table(results: list[MethodResult]) -> str:
    keys = [k for k in TABLE_KEYS if any(k in r.metrics for r in results)]
    best = {k: max(r.metrics.get(k, float("-inf")) for r in results) for k in keys}
    rows = []
    for r in results:
        cells = []
        for k in keys:
            value = r.metrics.get(k)
            text = "–" if value is None else f"{100 * value:.2f}"
            if k in r.ci:
                text += f'<br><small>[{100 * r.ci[k][1]:.2f}, {100 * r.ci[k][2]:.2f}]</small>'
            cells.append(f'<td class="{"best" if value is not None and value == best[k] else ""}">{text}</td>')
        rows.append(f"<tr><th>{html.escape(r.method)}</th>{''.join(cells)}</tr>")
    head = "".join(f"<th>{k}</th>" for k in keys)
    return f"<table><tr><th>method</th>{head}</tr>{''.join(rows)}</table>"


def _curves(results: list[MethodResult]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for r in results:
        ks = sorted(int(k.split("@")[1]) for k in r.metrics if k.startswith("P@"))
        axes[0].plot(ks, [100 * r.metrics[f"P@{k}"] for k in ks], marker="o", label=r.method)
        ps = [k for k in ks if f"PSP@{k}" in r.metrics]
        axes[1].plot(ps, [100 * r.metrics[f"PSP@{k}"] for k in ps], marker="o", label=r.method)
    axes[0].set(title="P@k", xlabel="k")
    axes[1].set(title="PSP@k", xlabel="k")
    axes[0].legend(fontsize=8)
    return _png(fig)


def _quantile_chart(results: list[MethodResult]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    with_bins = [r for r in results if r.quantiles]
    if not with_bins:
        return "<p>no quantile analysis</p>"
    fig, ax = plt.subplots(figsize=(9, 3.8))
    bins = [q["bin"] for q in with_bins[0].quantiles]
    width = 0.8 / len(with_bins)
    for i, r in enumerate(with_bins):
        ax.bar(np.arange(len(bins)) + i * width, [100 * q["P@5"] for q in r.quantiles], width, label=r.method)
    ax.set_xticks(np.arange(len(bins)) + 0.4 - width / 2, [f"Q{b + 1}" for b in bins])
    ax.set(title="P@5 contribution per label quantile (Q1 = tail … Q5 = head; RAMEN Fig. 4)", ylabel="P@5 (%)")
    ax.legend(fontsize=8)
    return _png(fig)


def _dict_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>–</p>"
    keys = list(rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_fmt(r.get(k))}</td>" for k in keys) + "</tr>" for r in rows)
    return "<table><tr>" + "".join(f"<th>{html.escape(str(k))}</th>" for k in keys) + f"</tr>{body}</table>"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def _tradeoff_section(tradeoffs: dict[str, Path]) -> str:
    """Embedded trade-off plots: per label-frequency decile, encoder alone vs classifier alone vs fused, and
    the validation curve that chose alpha."""
    if not tradeoffs:
        return ""
    images = "".join(f"<h3>{html.escape(method)}</h3><img src=\"data:image/png;base64,"
                     f"{base64.b64encode(path.read_bytes()).decode()}\"/>" for method, path in tradeoffs.items())
    return ("<h2>Classifier stage: head/tail trade-off (test shares of P@5 and PSP@5 per label-frequency decile, "
            "0 = tail; right: validation metrics by α, 1 = encoder only)</h2>" + images)


def render_report(dataset: str, results: list[MethodResult], out: Path, diff_table: list[dict[str, Any]],
                  examples: list[dict[str, Any]], notes: dict[str, Any],
                  paired: list[dict[str, Any]] | None = None, tradeoffs: dict[str, Path] | None = None) -> Path:
    """Write ``out`` (HTML): metrics with CIs, curves, quantile bars, DIFF@k, subsets, examples, index stats,
    and for each method with a classifier stage its head/tail trade-off plot (``tradeoffs``: method → PNG)."""
    subsets = [{"method": r.method, "subset": s, **{k: v for k, v in m.items() if k in ("P@1", "P@5", "PSP@5", "R@10",
                                                                                       "rows")}}
               for r in results for s, m in r.subsets.items()]
    index_rows = [{"method": r.method, **r.index} for r in results if r.index]
    example_html = "".join(
        f"<h4>{html.escape(e['query'])} <small>{html.escape(e.get('note', ''))}</small></h4><ol>"
        + "".join(f'<li class="{"hit" if p["hit"] else "miss"}">{html.escape(p["label"])} '
                  f'<small>{p["score"]:.3f}</small></li>' for p in e["predictions"]) + "</ol>"
        for e in examples)
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>xc report: {html.escape(dataset)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}} td.best{{font-weight:bold;background:#e6ffe6}}
li.hit{{color:#060}} li.miss{{color:#999}} small{{color:#666}}</style></head><body>
<h1>Offline evaluation: {html.escape(dataset)}</h1>
<p>{html.escape(", ".join(f"{k}: {v}" for k, v in notes.items()))}</p>
<h2>Metrics (%, 95% bootstrap CI in brackets; best in bold)</h2>{_metrics_table(results)}
<h2>Paired differences (bootstrap over the same test queries: is the gap more than noise?)</h2>\
{_dict_table(paired or [])}
<h2>P@k and PSP@k</h2>{_curves(results)}
<h2>Label quantiles</h2>{_quantile_chart(results)}
<h2>DIFF@k per label quantile: FN@k(dual_encoder) − FN@k(ramen); positive = RAMEN retrieves positives the
text-only baseline misses (RAMEN Table 8; bin 0 = tail)</h2>{_dict_table(diff_table)}
{_tradeoff_section(tradeoffs or {})}
<h2>Seen vs novel queries, novel labels, query deciles</h2>{_dict_table(subsets)}
<h2>Index recall and latency</h2>{_dict_table(index_rows)}
<h2>Example predictions (green: in the ground truth; RAMEN Table 7)</h2>{example_html}
</body></html>"""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body, encoding="utf-8")
    return out
