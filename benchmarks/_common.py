"""Shared by the benchmark scripts: peak memory of this process and merging results into one JSON file."""

from __future__ import annotations

import resource
from pathlib import Path

RESULTS_DIR = Path(__file__).parent / "results"


def peak_rss_mb() -> float:
    """This process's own high-water RSS (VmHWM): unlike ru_maxrss it is not inherited across exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux ≥ 4.0: write 5 to clear_refs) so the next peak read is a step's own; False if it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
