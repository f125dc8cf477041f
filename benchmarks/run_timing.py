"""`make run`'s wall time and its Dagster steps' seconds, in fresh clones of two commits (issue #42: "the default stays
as fast as today within 10%"), run one after the other on otherwise idle cores.

    git clone -q . /work/mr_old && git -C /work/mr_old checkout -q 284e22c
    git clone -q . /work/mr_new
    .venv/bin/python benchmarks/run_timing.py --clone before=/work/mr_old --clone now=/work/mr_new \\
        --out benchmarks/results/run_timing.json

``--no-run --wall before=430.2 --wall now=611.6`` reads the clones' last Dagster logs (``.xc/last-run.log``) and
takes the wall seconds given (measured around ``make run`` by the caller) instead of running again. A step's seconds
are Dagster's "Finished execution of step … in …" (summed over the run's jobs); the per-step difference says which
stage a slowdown comes from.

Each clone's one-time setup runs before its clock starts: ``make install``, and ``make peers`` where the clone's
``run`` target installs the linear peer's environment on first use (since 280d104). Without this, a fresh clone's
first ``make run`` also times a pip install (54 s here), which a second ``make run`` never pays.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from xc_core.provenance import write_result

STEP = re.compile(r'Finished execution of step "([^"]+)" in ([0-9hms.]+?)\.?(?:\s|$)')
PART = re.compile(r"([0-9.]+)(ms|h|m|s)")
UNIT = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Dagster's step duration ("825ms", "9.08s", "1m8s", "1h2m3s") in seconds."""
    return sum(float(value) * UNIT[unit] for value, unit in PART.findall(text))


def step_seconds(log: Path) -> dict[str, float]:
    """Dagster step → seconds, summed when a step name recurs (several jobs in one run)."""
    out: dict[str, float] = {}
    for name, text in STEP.findall(log.read_text(errors="replace")):
        out[name] = round(out.get(name, 0.0) + duration(text), 2)
    return out


def setup(clone: Path) -> None:
    """The clone's one-time installs, outside the timed run: its virtualenv, and the peers' environment when its
    ``run`` target depends on it."""
    subprocess.run(["make", "install"], cwd=clone, check=True, stdout=subprocess.DEVNULL)
    run_rule = next((line for line in (clone / "Makefile").read_text().splitlines() if line.startswith("run:")), "")
    if "peers" in run_rule:
        subprocess.run(["make", "peers"], cwd=clone, check=True, stdout=subprocess.DEVNULL)


def run_once(clone: Path) -> float:
    """`make run` in ``clone`` (its virtualenv already installed); wall seconds."""
    started = time.perf_counter()
    subprocess.run(["make", "run"], cwd=clone, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "XC_HOME": str(clone / ".xc")})
    return round(time.perf_counter() - started, 2)


def commit(clone: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", action="append", required=True, metavar="NAME=DIR", help="first = the reference")
    parser.add_argument("--no-run", action="store_true", help="read the clones' last run instead of running")
    parser.add_argument("--wall", action="append", default=[], metavar="NAME=SECONDS", help="with --no-run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    clones = {name: Path(path) for name, path in (c.split("=", 1) for c in args.clone)}
    walls = {name: float(v) for name, v in (w.split("=", 1) for w in args.wall)}
    runs: dict[str, Any] = {}
    for name, clone in clones.items():
        if not args.no_run:
            setup(clone)
        wall = walls.get(name) if args.no_run else run_once(clone)
        runs[name] = {"clone": str(clone), "commit": commit(clone), "wall_seconds": wall,
                      "steps": step_seconds(clone / ".xc" / "last-run.log"), "load_after": os.getloadavg()[0]}
    reference, *others = clones
    out: dict[str, Any] = {"runs": runs, "ratios": {}, "step_differences": {}}
    for other in others:
        a, b = runs[other], runs[reference]
        if a["wall_seconds"] and b["wall_seconds"]:
            out["ratios"][f"{other} / {reference}"] = round(a["wall_seconds"] / b["wall_seconds"], 3)
        steps = set(a["steps"]) | set(b["steps"])
        diff = {s: round(a["steps"].get(s, 0.0) - b["steps"].get(s, 0.0), 2) for s in steps}
        out["step_differences"][f"{other} − {reference}"] = dict(sorted(diff.items(), key=lambda kv: -abs(kv[1])))
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        write_result(args.out, text + "\n")


if __name__ == "__main__":
    main()
