"""``python -m xc_assets.summary LAST_RUN_JSON``: the headline lines of an ``xc run`` summary for a terminal
(``make run`` prints them after the JSON): each method's P@1 and its A/B lifts against the control."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def lines(summary: dict[str, Any]) -> list[str]:
    out = []
    for method, row in summary.get("methods", {}).items():
        p1 = row.get("P@1")
        out.append(f"{method:<18} P@1 {100 * p1:6.2f}" if isinstance(p1, float) else f"{method:<18} (no evaluation)")
        ab = row.get("ab_vs_control") or {}
        if ab:
            out.append(f"  A/B vs {ab['control']} ({ab['mode']}): " +
                       "; ".join(f"{k} {v}" for k, v in ab.items() if k not in ("control", "mode")))
    champion = summary.get("champion")
    if champion:
        out.append(f"champion: {champion['method']} (v{champion['version']}): {champion['reason']}")
    return out


def main(argv: list[str]) -> int:
    summary = json.loads(Path(argv[0]).read_text())
    print("\n".join(lines(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
