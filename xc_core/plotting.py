"""matplotlib for the charts xc writes (files and HTML pages, never a screen): pyplot on the Agg backend, imported
lazily so that a command drawing nothing never pays for matplotlib, and a figure as an embeddable base64 PNG.

Imports nothing of xc_core, so every layer can draw.
"""

from __future__ import annotations

import base64
import io
from types import ModuleType
from typing import Any


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend: a server or a CI machine has no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_base64(fig: Any, dpi: int = 90) -> str:
    """The figure as base64 PNG, closed (embedded in the page: a report is one self-contained file)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return base64.b64encode(buffer.getvalue()).decode()
