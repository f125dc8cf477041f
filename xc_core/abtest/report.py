"""HTML for A/B results: the three paper-style tables (RAMEN Tables 1–3), the arms' figures and a lift-with-CI plot
per test — as a page of its own, or as a section of the data set's evaluation report."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from xc_core.abtest.stats import LOWER_IS_BETTER
from xc_core.evaluation.report import drawn_once
from xc_core.plotting import png_base64, pyplot

#: (key, label) of the columns of Tables 1 and 3, and of Table 2
TABLE_METRICS = (("revenue", "Revenue"), ("ctr", "CTR"), ("iy", "IY"))
BMR_METRICS = (("brand_bmr", "Brand BMR"), ("location_bmr", "Location BMR"), ("quickback_rate", "Quick-back rate"))
REPLAY_METRICS = (("click_hit_rate", "click-hit rate"), ("hits_per_query", "click hits per query"))
PLOT_METRICS = ("revenue", "ctr", "iy", "brand_bmr", "location_bmr", "quickback_rate")


def _cell(result: dict[str, Any], key: str, alpha: float) -> dict[str, Any] | None:
    pct = result["delta_pct"].get(key)
    if pct is None:
        return None
    low, high = result["ci95"][key]
    p = result["p_value"][key]
    significant = p is not None and p < alpha
    better = (pct < 0) if key in LOWER_IS_BETTER else (pct > 0)
    tone = ("good" if better else "bad") if significant and pct != 0 else ""
    return {"pct": pct, "low": low, "high": high, "significant": significant, "tone": tone}


def _row(name: str, result: dict[str, Any], keys: tuple[tuple[str, str], ...], alpha: float) -> dict[str, Any]:
    return {"name": name, "cells": {k: _cell(result, k, alpha) for k, _ in keys}}


def _plot(result: dict[str, Any]) -> str:
    """Forest plot: each metric's %Δ with its interval, overall and per segment (base64 PNG)."""
    groups = [("total", result), *result.get("segments", {}).items()]
    keys = [k for k in PLOT_METRICS if k in result["delta_pct"]]
    return _forest_png({"metrics": keys, "groups": [[name, [[res["delta_pct"].get(key), res["ci95"].get(key)]
                                                             for key in keys]] for name, res in groups]})


@drawn_once
def _forest_png(figures: dict[str, Any]) -> str:
    """The plotted metrics, and per group its name and, per metric, [%Δ, [low, high]] (None: not measured)."""
    plt = pyplot()

    keys, groups = figures["metrics"], figures["groups"]
    fig, axes = plt.subplots(1, len(keys), figsize=(2.6 * len(keys), 2.8), sharey=True)
    for i, (ax, key) in enumerate(zip(axes, keys, strict=True)):
        for y, (_, measured) in enumerate(groups):
            pct, interval = measured[i]
            if pct is None:
                continue
            low, high = interval
            ax.errorbar([pct], [y], xerr=[[pct - low], [high - pct]], fmt="o", color="C0" if y == 0 else "C1")
        ax.axvline(0, color="#888", lw=0.8)
        ax.set_title(f"%Δ {key}", fontsize=9)
    axes[0].set_yticks(range(len(groups)), [g[0] for g in groups])
    fig.tight_layout()
    return png_base64(fig, dpi=80)


def _figure(value: float | None) -> str:
    """Counts as integers with thousands separators, rates and money with two decimals."""
    if value is None:
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _view(result: dict[str, Any]) -> dict[str, Any]:
    alpha = result.get("config", {}).get("alpha", 0.05)
    simulated = "segments" in result
    arms = result["arms"]
    arm_keys = [k for k in arms["control"] if k not in ("rpm",)]
    view: dict[str, Any] = {
        "control": result["control_arm"]["arm"], "treatment": result["treatment_arm"]["arm"],
        "design": result["design"], "note": result.get("note", ""), "simulated": simulated,
        "queries": int(arms["control"]["queries"] + (0 if "paired" in result["design"] else
                                                     arms["treatment"]["queries"])),
        "arm_keys": arm_keys,
        "arms": [{"name": name, "figures": {k: _figure(v) for k, v in arms[name].items()}}
                 for name in ("control", "treatment")],
    }
    if simulated:
        view["table_metrics"] = [{"key": k, "label": label} for k, label in TABLE_METRICS]
        view["bmr_metrics"] = [{"key": k, "label": label} for k, label in BMR_METRICS]
        view["deciles"] = [_row(s.upper(), r, TABLE_METRICS, alpha) for s, r in result["segments"].items()] + \
            [_row("TOTAL", result, TABLE_METRICS, alpha)]
        view["bmr"] = [_row("total", result, BMR_METRICS, alpha)]
        view["markets"] = [_row(m, r, TABLE_METRICS, alpha) for m, r in result["markets"].items()]
        view["plot"] = _plot(result)
    else:
        view["table_metrics"] = [{"key": k, "label": label} for k, label in REPLAY_METRICS]
        view["bmr"] = [_row("total", result, REPLAY_METRICS, alpha)]
        view["plot"] = None
    return view


@functools.cache
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("xc_core.abtest", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("abtest.html.j2")


def render_section(results: list[dict[str, Any]], dataset: str) -> str:
    """The A/B section of a data set's evaluation report (an HTML fragment)."""
    return str(_template().render(tests=[_view(r) for r in results], dataset=dataset, standalone=False))


def render_page(results: list[dict[str, Any]], dataset: str, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_template().render(tests=[_view(r) for r in results], dataset=dataset, standalone=True),
                   encoding="utf-8")
    return out


HEADLINE = ("revenue", "ctr", "iy", "brand_bmr", "location_bmr", "quickback_rate", "click_hit_rate")


def _p(p: float) -> str:
    """A p-value as printed: rounded to 6 decimals in the JSON, so 0 means below 1e-6."""
    return f"p={p:.3g}" if p > 0 else "p<1e-6"


def headline(result: dict[str, Any]) -> dict[str, str]:
    """metric → '%Δ [low, high] (p)' for the headline metrics a result has (make run prints these)."""
    out = {}
    for key in HEADLINE:
        pct = result["delta_pct"].get(key)
        if pct is not None:
            low, high = result["ci95"][key]
            out[key] = f"{pct:+.2f}% [{low:+.2f}, {high:+.2f}] ({_p(result['p_value'][key])})"
    return out


def headline_markdown(result: dict[str, Any]) -> str:
    """The headline lifts as a markdown table (Dagster metadata)."""
    rows = [f"**{result['treatment']}** vs **{result['control']}** — {result['design']}", "",
            "| metric | %Δ | 95% CI | p |", "|---|---|---|---|"]
    for key in HEADLINE:
        pct = result["delta_pct"].get(key)
        if pct is not None:
            low, high = result["ci95"][key]
            rows.append(f"| {key} | {pct:+.2f} | [{low:+.2f}, {high:+.2f}] | {_p(result['p_value'][key])} |")
    if result.get("note"):
        rows += ["", f"_{result['note']}_"]
    return "\n".join(rows)
