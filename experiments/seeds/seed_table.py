"""Results over several training seeds: one home per seed, the same data set and test split in each.

    .venv/bin/python experiments/seeds/seed_table.py --dataset wikispeedia --profile cpu \
        --homes /tmp/xc-s0 /tmp/xc-s1 /tmp/xc-s2 [--methods pecos,pretrained,dual_encoder,...] \
        [--pairs ramen:dual_encoder,dual_encoder-clf:pecos,...] [--json out.json] [--html out.html]

For each method: the per-query metric averaged over the seeds it was trained with, then the mean and a
bootstrap 95% CI over test queries. Paired differences a − b use the same per-query seed averages (paired
bootstrap over queries, so the interval reflects the test sample with the seed noise averaged out), plus
the per-seed differences so the seed spread stays visible. Every home must hold the same test split
(checked by its fingerprint). Prints markdown; ``--json`` also writes the figures, ``--html`` a report.
A method ``M@SUB`` is ``M`` evaluated in the variant home ``<each home>/SUB`` (``xc_core.evaluation.seed_homes``),
e.g. ``--pairs textgnn@variants/tg:dual_encoder``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from xc_core.evaluation.seed_homes import (
    METRICS,
    evaluated,
    metric_ci,
    metric_value,
    paired_diff,
    per_seed_diffs,
    seed_average,
)
from xc_core.provenance import write_result


def build(homes: list[Path], dataset: str, profile: str, methods: list[str],
          pairs: list[tuple[str, str]]) -> dict[str, Any]:
    averaged = {m: seed_average(homes, dataset, m, profile) for m in methods}
    table = {m: {"seeds": n, **{k: {"value": metric_value(r, k), "ci": metric_ci(r, k)} for k in METRICS}}
             for m, (r, n) in averaged.items() if n}
    diffs = {}
    for a, b in pairs:
        # only the seeds that evaluated both methods, so a pair never mixes seed sets
        both = [h for h in homes if evaluated(h, dataset, a, profile) and evaluated(h, dataset, b, profile)]
        if not both:
            continue
        ra, rb = seed_average(both, dataset, a, profile)[0], seed_average(both, dataset, b, profile)[0]
        diffs[f"{a} − {b}"] = {k: {"diff": (d := paired_diff(ra, rb, k))[0], "ci": d[1:3], "p": d[3],
                                   "seeds": len(both), "per_seed": per_seed_diffs(both, dataset, profile, a, b, k)}
                               for k in METRICS}
    return {"dataset": dataset, "profile": profile, "homes": [str(h) for h in homes], "methods": table,
            "paired": diffs}


def markdown(result: dict[str, Any]) -> str:
    methods: dict = result["methods"]
    lines = ["| method | seeds | " + " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for m, row in methods.items():
        cells = [f"{100 * row[k]['value']:.2f} [{100 * row[k]['ci'][0]:.2f}, {100 * row[k]['ci'][1]:.2f}]"
                 for k in METRICS]
        lines.append(f"| {m} | {row['seeds']} | " + " | ".join(cells) + " |")
    paired: dict = result["paired"]
    if paired:
        lines += ["", "| paired difference | " + " | ".join(METRICS) + " |", "|---|" + "---|" * len(METRICS)]
        for name, row in paired.items():
            cells = [f"{100 * row[k]['diff']:+.2f} [{100 * row[k]['ci'][0]:+.2f}, {100 * row[k]['ci'][1]:+.2f}]"
                     for k in METRICS]
            lines.append(f"| {name} ({row[METRICS[0]]['seeds']} seeds) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


HTML = """<!doctype html><html><head><meta charset="utf-8"><title>{{ r.dataset }} ({{ r.profile }}): seeds</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th:first-child,td:first-child{text-align:left}
.pos{color:#080}.neg{color:#a00}</style></head><body>
<h1>{{ r.dataset }} — profile {{ r.profile }}, {{ r.homes|length }} seed homes</h1>
<p>Per-query metrics averaged over seeds; 95% bootstrap intervals over test queries.</p>
<table><tr><th>method</th><th>seeds</th>{% for k in metrics %}<th>{{ k }}</th>{% endfor %}</tr>
{% for m, row in r.methods.items() %}<tr><td>{{ m }}</td><td>{{ row.seeds }}</td>{% for k in metrics %}
<td>{{ "%.2f"|format(100 * row[k].value) }} [{{ "%.2f"|format(100 * row[k].ci[0]) }}, \
{{ "%.2f"|format(100 * row[k].ci[1]) }}]</td>
{% endfor %}</tr>{% endfor %}</table>
<h2>Paired differences (same test queries)</h2>
<table><tr><th>a − b</th>{% for k in metrics %}<th>{{ k }}</th>{% endfor %}</tr>
{% for name, row in r.paired.items() %}<tr><td>{{ name }}</td>{% for k in metrics %}
<td class="{{ 'pos' if row[k].ci[0] > 0 else ('neg' if row[k].ci[1] < 0 else '') }}">\
{{ "%+.2f"|format(100 * row[k].diff) }}
[{{ "%+.2f"|format(100 * row[k].ci[0]) }}, {{ "%+.2f"|format(100 * row[k].ci[1]) }}]<br><small>per seed:
{% for v in row[k].per_seed %}{{ "%+.2f"|format(100 * v) }} {% endfor %}</small></td>{% endfor %}</tr>{% endfor %}
</table></body></html>"""


def html(result: dict[str, Any]) -> str:
    import jinja2

    return jinja2.Template(HTML, autoescape=True).render(r=result, metrics=METRICS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--homes", nargs="+", required=True, type=Path)
    parser.add_argument("--methods", default="pecos,pretrained,dual_encoder,ramen,pretrained-clf,dual_encoder-clf,"
                        "ramen-clf", help="methods not evaluated in any home are left out; 'pecos' is the linear "
                        "peer (xc peer)")
    parser.add_argument("--pairs", default="ramen:dual_encoder,ramen:pretrained,dual_encoder:pretrained,"
                        "pretrained-clf:pretrained,dual_encoder-clf:dual_encoder,ramen-clf:ramen,"
                        "ramen-clf:dual_encoder-clf,pretrained-clf:pecos,dual_encoder-clf:pecos,ramen-clf:pecos")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--html", type=Path, default=None, help="also write the tables as an HTML report")
    args = parser.parse_args()
    pairs = [tuple(p.split(":")) for p in args.pairs.split(",") if p]
    result = build(args.homes, args.dataset, args.profile, args.methods.split(","), pairs)
    print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_result(args.json, json.dumps(result, indent=2) + "\n")
    if args.html:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        write_result(args.html, html(result))


if __name__ == "__main__":
    main()
