"""What the benchmarks, the experiments and the tests measure with: the machine, memory, a free loopback port, a
quiet machine, CPU time split by process, and the ``+1.23 [+0.45, +2.01]`` interval cell of every table.

Linux only where it reads ``/proc`` (the machines xc is measured on); imports nothing of xc_core, so any layer and
any script can use it.
"""

from __future__ import annotations

import os
import platform
import resource
import socket
import sys
import time
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """The CPU model, its widest vector instructions, core count, RAM (GiB) and Python version a result was measured
    on."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
               platform.processor())
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    ram_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    return {"cpu": cpu, "simd": simd(cpuinfo), "cores": os.cpu_count(), "ram_gb": round(ram_kb / 2**20, 1),
            "python": platform.python_version()}


def simd(cpuinfo: list[str]) -> str:
    """The widest vector instruction set ``/proc/cpuinfo``'s flags list (``avx512``, ``avx2``, ``sse``, else
    ``unknown``). Two machines with one model name ("AMD EPYC") can differ here, and the float kernels torch and
    numpy pick with it round differently: near-tied rankings, and the trainings that start from them, move."""
    flags = set(next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), []))
    for name, flag in (("avx512", "avx512f"), ("avx2", "avx2"), ("sse", "sse4_2")):
        if flag in flags:
            return name
    return "unknown"


# -- memory ------------------------------------------------------------------------------------------------------


def rss_mb(pid: int | str = "self", field: str = "VmRSS") -> float | None:
    """A ``/proc/<pid>/status`` memory field in MiB (``VmRSS`` now, ``VmHWM`` the peak), rounded to 0.1; None
    when the process is gone or has no such field."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """This process's own high-water RSS in MiB (VmHWM): unlike ``ru_maxrss`` it is not inherited across exec."""
    peak = rss_mb("self", "VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux ≥ 4.0: write 5 to clear_refs) so the next peak read is a step's own; False if it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def tree_rss_mb(pid: int) -> float:
    """Resident memory (MiB) of ``pid`` and all its descendants (Spark's JVM is a child of the Python driver)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        resident = rss_mb(current)
        if resident is None:
            continue
        total += resident
        try:
            todo += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except OSError:
            continue
    return total


# -- the network and the machine's load --------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS's choice; free until someone binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_quiet(max_load: float, wait_s: float, poll_s: float = 30.0) -> tuple[float, bool]:
    """(1-minute load average, quiet?) once it is at most ``max_load``, or after ``wait_s`` seconds of waiting;
    each wait is said on stderr, so a bench that stalls says why."""
    deadline = time.monotonic() + wait_s
    while (load := os.getloadavg()[0]) > max_load and time.monotonic() < deadline:
        print(f"load average {load:.2f} > {max_load}: waiting", file=sys.stderr, flush=True)
        time.sleep(poll_s)
    return round(load, 2), load <= max_load


class CpuMeter:
    """Core-seconds the whole machine was busy, split into this process, one other process and everything else.

    The 1-minute load average includes our own previous phase, so it cannot tell whether a phase shared the
    cores with someone else; ``/proc/stat`` minus our two processes can."""

    def __init__(self, other_pid: int) -> None:
        self.other_pid, self.tick = other_pid, os.sysconf("SC_CLK_TCK")

    def _busy(self) -> float:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / self.tick

    def _proc(self, pid: int | str) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / self.tick  # utime + stime

    def sample(self) -> tuple[float, float, float, float]:
        """(wall clock, machine busy, this process, the other process), in seconds."""
        return time.perf_counter(), self._busy(), self._proc("self"), self._proc(self.other_pid)

    @staticmethod
    def cores(before: tuple[float, ...], after: tuple[float, ...]) -> dict[str, float]:
        """Cores used between two samples by the other process (``server``), this one (``clients``) and the
        rest of the machine (``other``)."""
        wall = after[0] - before[0]
        busy, mine, theirs = (after[i] - before[i] for i in (1, 2, 3))
        return {"server": round(theirs / wall, 2), "clients": round(mine / wall, 2),
                "other": round(max(busy - mine - theirs, 0.0) / wall, 2)}


# -- tables --------------------------------------------------------------------------------------------------------


def signed_interval(value: float, low: float, high: float, scale: float = 1.0, digits: int = 2) -> str:
    """A difference and its interval as a table cell: ``+1.23 [+0.45, +2.01]`` (each multiplied by ``scale``,
    e.g. 100 for a share shown in points)."""
    return (f"{scale * value:+.{digits}f} [{scale * low:+.{digits}f}, {scale * high:+.{digits}f}]")
