"""What ``xc run`` shows while it works: one line as each Dagster step starts and one as it ends, with its duration,
its position in the whole run and what is left; the Dagster log and the libraries' messages go to a file instead.

The lines come from the instance's own event stream (an event listener on each run, the events the UI shows), so
they name the steps as the UI does: ``[ 7/28] synthetic / dual_encoder / encoder``. What is left is the number of
planned steps not yet ended and, when the home holds the previous run's step times (``last-run-steps.json``), their
sum. Inside a step, the library's own bars (``xc_core.progress``) draw on the terminal and vanish when done.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from xc_assets.defs.constants import prefix

if TYPE_CHECKING:
    import dagster as dg

#: the step times of a home's last run, read as the estimate of the next one
STEP_TIMES = "last-run-steps.json"


def step_label(dataset: str, step_key: str, method: str | None = None) -> str:
    """A step as the run names it: the data set, the method partition where there is one, then the asset (or
    check) without the data set's prefix (``synthetic__encoder`` → ``synthetic / dual_encoder / encoder``)."""
    p = prefix(dataset)
    name = step_key.removeprefix(f"{p}__").removeprefix(f"{p}_")
    return " / ".join(part for part in (dataset, method, name) if part)


def clock(seconds: float) -> str:
    """``42s``, ``2m05s``, ``1h03m``: a duration a person reads at a glance."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class StepProgress:
    """Prints a line per step start and end for every run it watches, numbered over the whole plan.

    Args:
        planned: every step the command will run, as :func:`step_label` names them, in launch order; None when the
            command decides as it goes (``xc results`` runs only what is stale): then lines carry no total.
        out: where the lines go (the terminal's stdout).
        times: the home's step-times file: read for the estimate, rewritten with this run's times.
    """

    def __init__(self, planned: list[str] | None, out: TextIO, times: Path | None = None) -> None:
        self.planned, self.out, self.times_file = planned, out, times
        self._terminal = _own_descriptor(out)
        self.previous: dict[str, float] = _read_times(times)
        self.seconds: dict[str, float] = {}
        self.started: dict[str, tuple[int, float]] = {}  # label → (its number, when it started)
        self.count = 0

    def watch(self, instance: dg.DagsterInstance, run_id: str, dataset: str, method: str | None = None) -> None:
        """Follow run ``run_id`` (not launched yet) on ``instance``; its steps belong to ``method``'s partition."""
        instance.add_event_listener(run_id, lambda entry: self._on_event(entry, dataset, method))

    def _on_event(self, entry: dg.EventLogEntry, dataset: str, method: str | None) -> None:
        event = entry.dagster_event
        if event is None or event.step_key is None:
            return
        label = step_label(dataset, event.step_key, method)
        if event.is_step_start:
            self.count += 1
            self.started[label] = (self.count, entry.timestamp)
            self._print(f"{self._position(self.count)} {label} …")
        elif event.is_step_success or event.is_step_failure or event.is_step_skipped:
            number, began = self.started.pop(label, (self.count, entry.timestamp))
            took = entry.timestamp - began
            self.seconds[label] = took
            verdict = "done in" if event.is_step_success else "FAILED after" if event.is_step_failure else "skipped,"
            self._print(f"{self._position(number)} {label} {verdict} {clock(took)} · {self._left()}")

    def _position(self, number: int) -> str:
        if self.planned is None:
            return f"[{number}]"
        width = len(str(len(self.planned)))
        return f"[{number:>{width}}/{len(self.planned)}]"

    def _left(self) -> str:
        """Steps of the plan not yet ended, and their time in the previous run when it timed every one of them."""
        if self.planned is None:
            return f"{clock(sum(self.seconds.values()))} so far"
        remaining = [label for label in self.planned if label not in self.seconds]
        if not remaining:
            return "nothing left"
        text = f"{len(remaining)} step{'s' if len(remaining) > 1 else ''} left"
        if all(label in self.previous for label in remaining):
            text += f", ~{clock(sum(self.previous[label] for label in remaining))} by the last run's times"
        return text

    def _print(self, line: str) -> None:
        if self._terminal is None:
            print(line, file=self.out, flush=True)
            return
        # straight to the terminal: a step's end event fires while Dagster still captures the run's stdout (the
        # compute log), and its mirror back to the terminal could drop the run's last line (seen in CI: the line
        # landed only in the run's compute_logs/*.out)
        self.out.flush()
        os.write(self._terminal, f"{line}\n".encode())

    def save(self) -> None:
        """Keep this run's step times (over the previous run's, step by step) for the next estimate."""
        if self.times_file is not None and self.seconds:
            merged = {**self.previous, **{k: round(v, 2) for k, v in self.seconds.items()}}
            self.times_file.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _own_descriptor(out: TextIO) -> int | None:
    """A duplicate of ``out``'s file descriptor, taken before any run redirects it (None for a stream without one,
    such as pytest's captured stdout: lines then go through ``out``)."""
    try:
        return os.dup(out.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def watcher(progress: StepProgress | None, instance: dg.DagsterInstance, dataset: str,
            method: str | None = None) -> Callable[[str], None] | None:
    """What ``xc_assets.launch.execute`` takes as ``watch``: ``progress`` following that run (None: no lines)."""
    if progress is None:
        return None
    return lambda run_id: progress.watch(instance, run_id, dataset, method)


def _read_times(path: Path | None) -> dict[str, float]:
    """The previous run's step times. They only feed the estimate, so an unreadable file is reported in the log and
    the run goes on without an estimate; the file is rewritten at the end of the run."""
    if path is None or not path.exists():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in found.items()}
    except (OSError, ValueError, AttributeError, TypeError) as err:
        print(f"{path}: unreadable step times ({err}); no estimate this run", file=sys.stderr)
        return {}


@contextmanager
def stderr_to(log: Path) -> Iterator[None]:
    """Everything written to the process's stderr inside the block goes to ``log`` instead: Dagster's event log,
    the libraries' warnings and notices (torch's ONNX exporter, MLflow, transformers), at the file-descriptor level
    so that messages from C code and from handlers created at import go there too. stdout stays the terminal's."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("w", encoding="utf-8") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def log_tail(log: Path, lines: int = 40) -> str:
    """The last ``lines`` of ``log``: what a failed run shows of it."""
    if not log.exists():
        return ""
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
