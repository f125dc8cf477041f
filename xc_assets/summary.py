"""The end of ``xc run`` and ``xc promote`` for people (``--json`` prints the summary itself), and
``python -m xc_assets.summary LAST_RUN_JSON`` to print it again from ``<home>/last-run.json``.

One row per method: P@1 and PSP@1 in points with the 95% bootstrap intervals its evaluation saved (the summary
holds point estimates only), and the promotion decision, then one per linear peer the run scored; then each
method's A/B lifts against the control, the label-decile table, the champion and the HTML report."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

METRICS = ("P@1", "PSP@1")


def table(summary: dict[str, Any]) -> str:
    return "\n".join(lines(summary))


def lines(summary: dict[str, Any]) -> list[str]:
    decisions = {d["method"]: d for d in summary.get("promotion", [])}
    methods = list(summary.get("methods", {})) or list(decisions)
    split = next((d["decided_on"] for d in decisions.values() if d.get("decided_on")), None)
    decided = [f"{split} P@1"] if split else []
    rows = [["method", *(f"test {m} [95% CI]" for m in METRICS), *decided, "promotion"]]
    rows += [[m, *_metrics(summary, m), *_decided_cell(decisions.get(m), split), _decision(decisions.get(m))]
             for m in methods]
    # the linear peers on the same test split (``xc run --peers``): beside the methods, never a candidate
    rows += [[peer, *_metrics(summary, peer), *(["—"] if split else []), "linear peer: scored, never registered"]
             for peer in summary.get("peers", {}) if methods]
    out = _aligned(rows) if methods else ["no method trained or promoted (data stages only)"]
    out += _split_lines(decisions, split)
    out += _ab_lines(summary)
    out += _decile_lines(summary)
    out.append(_champion(summary))
    out += _best_not_served(summary)
    if summary.get("report"):
        out.append(f"report: {summary['report']}")
    if summary.get("success") is False:
        out.append("FAILED: a run, a check or a registration failed (the Dagster log on stderr says which)")
    return out


def _metrics(summary: dict[str, Any], method: str) -> list[str]:
    """Each metric with its interval from the saved evaluation, else the summary's point estimate, else —."""
    ci = _intervals(summary, method)
    row = summary.get("methods", {}).get(method, {})
    cells = []
    for metric in METRICS:
        if metric in ci:
            value, low, high = ci[metric]
            cells.append(f"{100 * value:.2f} [{100 * low:.2f}, {100 * high:.2f}]")
        else:
            cells.append(f"{100 * row[metric]:.2f}" if isinstance(row.get(metric), float) else "—")
    return cells


def _intervals(summary: dict[str, Any], method: str) -> dict[str, tuple[float, float, float]]:
    from xc_core.evaluation.record import CI, EvaluationRecord
    from xc_core.paths import eval_dir

    if not {"home", "dataset", "profile"} <= summary.keys():
        return {}
    folder = eval_dir(Path(summary["home"]), summary["dataset"], method, summary["profile"])
    record = EvaluationRecord.load(folder)
    return record.ci() if record is not None and (folder / CI).exists() else {}


def _decided_cell(decision: dict[str, Any] | None, split: str | None) -> list[str]:
    """The P@1 (points) the gate read for this method on the promotion split; no cell without a split."""
    if split is None:
        return []
    value = (decision or {}).get("decided_P@1")
    return [f"{100 * value:.2f}" if isinstance(value, float) else "—"]


def _split_lines(decisions: dict[str, dict[str, Any]], split: str | None) -> list[str]:
    """Which split decided, and every decision the test split disagrees with (shown, not hidden)."""
    if split is None:
        return []
    out = [f"the gate decided on the {split} split (each model's validation rows, scored as the test is); the test "
           "figures are beside it and read by no rule"]
    out += [f"  {m}: {d['test_view']}" for m, d in decisions.items() if "disagrees" in d.get("test_view", "")]
    return out


def _decision(decision: dict[str, Any] | None) -> str:
    """promoted/rejected, the version and the reason in short (the full reason is in the JSON)."""
    if decision is None:
        return "—"
    if decision["version"] is None:
        return "error: " + decision["reason"].removeprefix("error before the gate: ")[:80]
    verdict = "promoted" if decision["promoted"] else "rejected"
    return f"{verdict} v{decision['version']}: {_short(decision['reason'])}"


def _short(reason: str) -> str:
    """'no champion yet', 'P@1 0.3819 > 0.3622', 'P@1 0.3823 > 0.3819 is within noise', 'A/B guard: brand_bmr
    +2.98% is significantly worse': the gate's reason without its evidence."""
    if reason.startswith("A/B guard: "):  # the metric that is worse is the point
        return re.sub(r" \[[^\]]*\] \([^)]*\)| in the simulated A/B test.*", "", reason)
    return re.split(r": |; | and no guard", reason, maxsplit=1)[0]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]


def _ab_lines(summary: dict[str, Any]) -> list[str]:
    """The methods' A/B lifts against the control as a table of %Δ (intervals: the JSON and the report)."""
    tests = {m: row["ab_vs_control"] for m, row in summary.get("methods", {}).items() if row.get("ab_vs_control")}
    if not tests:
        return []
    metrics = list(dict.fromkeys(k for ab in tests.values() for k in ab if k not in ("control", "mode")))
    first = next(iter(tests.values()))
    rows = [["method", *metrics], *([m, *(_lift(ab.get(k, "—")) for k in metrics)] for m, ab in tests.items())]
    return [f"A/B vs {first['control']} ({first['mode']}), %Δ; * where the 95% CI excludes 0:", *_aligned(rows)]


def _decile_lines(summary: dict[str, Any]) -> list[str]:
    """P@5 (points) by label-frequency decile, 0 = tail (``xc_core.stages.label_deciles``); [] without it."""
    rows = summary.get("label_deciles") or []
    if not rows:
        return []
    keys = [k for k in rows[0] if k not in ("labels", "test positives")]
    table = [keys, *([str(row.get(k, "")) for k in keys] for row in rows)]
    return ["P@5 by label-frequency decile (0 = tail, 9 = head; the difference is paired, 95% CI):", *_aligned(table)]


def _best_not_served(summary: dict[str, Any]) -> list[str]:
    """When the method with the best test P@1 was not promoted in this run, why (the gate's whole reason)."""
    decisions = {d["method"]: d for d in summary.get("promotion", [])}
    scored = {m: row["P@1"] for m, row in summary.get("methods", {}).items() if isinstance(row.get("P@1"), float)}
    if not scored:
        return []
    best = max(scored, key=lambda m: scored[m])
    decision = decisions.get(best)
    if decision is None or decision["promoted"]:
        return []
    champion = summary.get("champion") or _current_champion(summary) or {}
    if champion.get("method") and scored.get(champion["method"]) == scored[best]:
        return []  # an equal model (ramen-clf on dual_encoder-clf's files) already serves
    return [f"best test P@1: {best} ({100 * scored[best]:.2f}) is not served — {decision['reason']}"]


def _lift(headline: str) -> str:
    """'+2.98% [+1.23, +4.74] (p=0.000838)' (xc_core.abtest.report.headline) → '+2.98*'."""
    found = re.match(r"([+-]?\d+\.\d+)% \[([+-]?\d+\.\d+), ([+-]?\d+\.\d+)\]", headline)
    if found is None:
        return headline
    low, high = float(found.group(2)), float(found.group(3))
    return found.group(1) + ("*" if low > 0 or high < 0 else "")


def _champion(summary: dict[str, Any]) -> str:
    from xc_core.tracking.registry import CHAMPION, model_name

    champion = summary.get("champion") or _current_champion(summary)
    if not champion:
        return "champion: none (no method was promoted)"
    kept = "" if summary.get("champion") else "unchanged, "
    return (f"champion: {champion['method']} v{champion['version']} "
            f"({kept}models:/{model_name(summary['dataset'])}@{CHAMPION}; serve it with make serve or xc predict)")


def _current_champion(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The registry's champion, when this run promoted none (the summary holds this run's decisions only)."""
    from xc_core.tracking.registry import champion_version
    from xc_core.tracking.store import tracking_uri

    if not {"home", "dataset"} <= summary.keys():
        return None
    try:
        version = champion_version(summary["dataset"], tracking_uri(Path(summary["home"])))
    except ConnectionError:  # a tracking server that is down: the table still prints
        return None
    return None if version is None else {"method": version.tags.get("method", "?"), "version": version.version}


def main(argv: list[str]) -> int:
    print(table(json.loads(Path(argv[0]).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
