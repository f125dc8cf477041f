"""The ``xc`` script: xc_core's commands plus ``run``, ``promote`` and ``results``, which go through Dagster.

They live here, in the Dagster layer, so that ``xc_core`` never imports Dagster (``python -m xc_core.cli``
runs the library's commands alone), and are registered with the stages' commands (``xc_core.stages.register``),
so the parser is built from one list. ``run`` and ``promote`` print a table for people (``xc_assets.summary``),
``results`` its headline; each its JSON with ``--json``; ``run`` also saves that JSON as ``<home>/last-run.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from xc_core import cli as core
from xc_core.datasets.registry import resolve_dataset
from xc_core.paths import resolve_home
from xc_core.profiles import PROFILE_NAMES
from xc_core.stages import Command, register


def _methods(args: argparse.Namespace) -> tuple[str, ...]:
    from xc_core.methods import method_names

    known = method_names()
    methods = tuple(known) if args.methods == "all" else tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise SystemExit(f"xc {args.command}: unknown method(s) {', '.join(unknown)}: choose from "
                         f"{', '.join(known)} or 'all'")
    return methods


def _min_lead(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text}: a lead in the metric's own units, a fraction in [0, 1) "
                                         "(0.005 = half a P@1 point)")
    return value


#: where ``xc run``, ``xc promote`` and ``xc results`` put the Dagster log and the libraries' messages, in the home
RUN_LOG = "last-run.log"


@contextmanager
def _watched(args: argparse.Namespace, home: Path) -> Iterator[TextIO | None]:
    """What a command that runs Dagster shows while it works. By default: a line per step on stdout (the stream
    given to the block; none with ``--json``, whose stdout is one JSON line), the libraries' bars on a terminal, and
    everything written to stderr (Dagster's event log, torch's and MLflow's notices) in ``<home>/last-run.log``;
    a run that stops names that log (and ``xc run`` prints its last lines when a step failed). ``--quiet``: the
    Dagster log on stderr and nothing else until the table."""
    from xc_assets.progress import stderr_to
    from xc_core.progress import bars_to

    if args.quiet:
        yield None
        return
    log = home / RUN_LOG
    home.mkdir(parents=True, exist_ok=True)
    if not args.json:
        print(f"xc {args.command} --dataset {getattr(args, 'dataset', None) or getattr(args, 'datasets', '')} "
              f"--profile {args.profile}{_seed_flag(args)}: the Dagster log and the libraries' messages go to {log}",
              flush=True)
    try:
        with stderr_to(log), bars_to(sys.stdout if sys.stdout.isatty() and not args.json else None):
            yield None if args.json else sys.stdout
    except BaseException:
        print(f"xc {args.command}: stopped (what it logged until then: {log})", file=sys.stderr)
        raise


def cmd_promote(args: argparse.Namespace) -> dict[str, object]:
    from xc_assets.run import promote_methods

    home = resolve_home(args.home)
    dataset, methods = resolve_dataset(args.dataset, home), _methods(args)
    with _watched(args, home) as progress:
        return promote_methods(dataset, args.profile, home, methods, min_lead=args.min_lead, progress=progress)


def _seed_flag(args: argparse.Namespace) -> str:
    seed = getattr(args, "seed", None)
    return "" if seed is None else f" --seed {seed}"


def cmd_run(args: argparse.Namespace) -> dict[str, object]:
    from xc_assets.progress import log_tail
    from xc_assets.run import run_pipeline

    methods, address, peers = _methods(args), _dask_address(args), _peers(args)  # refused before the home is touched
    home = resolve_home(args.home)
    dataset = resolve_dataset(args.dataset, home)
    with _watched(args, home) as progress:
        summary = run_pipeline(dataset=dataset, profile=args.profile, home=home, methods=methods,
                               reuse_data=args.reuse_data, min_lead=args.min_lead, dask_address=address,
                               progress=progress, peers=peers, seed=args.seed)
    if not summary["success"] and not args.quiet:  # the table says which step; the log says why
        print(f"xc run: a step failed; the last lines of {home / RUN_LOG}:\n{log_tail(home / RUN_LOG)}",
              file=sys.stderr)
    # for machines and for `python -m xc_assets.summary`, whichever output was asked for
    (home / "last-run.json").write_text(json.dumps(summary, default=str) + "\n")
    return summary


def _peers(args: argparse.Namespace) -> tuple[str, ...]:
    """The linear peers ``--peers`` names, each known and its environment built: checked before any stage runs."""
    from xc_core.stages.peer import check_peers

    peers = tuple(p for p in args.peers.split(",") if p)
    try:
        check_peers(peers)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"xc {args.command}: --peers {args.peers}: {err}") from err
    return peers


def _dask_address(args: argparse.Namespace) -> str | None:
    """The scheduler the method partitions' steps go to (``--executor dask``), checked to have workers, or None: in
    this process. Before any stage runs, so that a wrong executor or cluster is one line, not a lineage run lost."""
    from xc_assets.distributed import check_cluster, dask_address

    try:
        address = dask_address(args.executor, args.dask_address)
        if address is not None:
            check_cluster(address)
        return address
    except (ValueError, RuntimeError) as err:
        raise SystemExit(f"xc {args.command}: {err}") from err


def cmd_results(args: argparse.Namespace) -> dict[str, object]:
    from xc_assets.results import run_results
    from xc_core.stages.results import validate_methods

    methods = validate_methods([m for m in args.methods.split(",") if m])  # before the home is made
    home = resolve_home(args.home)
    with _watched(args, home) as progress:
        summary = run_results(home, args.profile, [d for d in args.datasets.split(",") if d], methods,
                              seeds=args.seeds, out=Path(args.out) if args.out else None,
                              retrain=args.retrain, progress=progress)
    return {"results": summary["results"], "json": summary["json"], "header": summary["header"],
            "datasets": summary["datasets"], "ran": summary["ran"]}


def _seed(text: str) -> int:
    """A training seed: a non-negative integer (numpy's seed sequences take no negative entropy)."""
    value = int(text) if text.strip().isdigit() else -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed: give a non-negative integer, e.g. 0, 1 or 2")
    return value


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(_seed(part) for part in text.split(",") if part.strip())
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated non-negative integers, e.g. 0,1,2") from err


def _results_table(payload: dict[str, object]) -> str:
    """``xc results`` for people: per data set and method P@1 / PSP@1 with their 95% CIs and the costs, then where
    the page is."""
    from typing import cast

    def cell(value: list[float | None] | None) -> str:
        """[value, low, high] (fractions; no interval: low and high None) in points."""
        value_, low, high = value or (None, None, None)
        if value_ is None:
            return "–"
        interval = f" [{100 * low:.2f}, {100 * high:.2f}]" if low is not None and high is not None else ""
        return f"{100 * value_:.2f}{interval}"

    lines = []
    for data in cast(list[dict[str, Any]], payload["datasets"]):
        costs = {c["method"]: c for c in data["costs"]}
        lines.append(f"{data['dataset']}:")
        lines.append(f"  {'method':<22} {'P@1 [95% CI]':<24} {'PSP@1 [95% CI]':<24} {'ms/query':>9} {'parameters':>12}")
        for row in data["methods"]:
            cost = costs.get(row["method"], {})
            ms, params = cost.get("ms_per_query"), cost.get("parameters")
            lines.append(f"  {row['method']:<22} {cell(row.get('P@1')):<24} {cell(row.get('PSP@1')):<24} "
                         f"{'–' if ms is None else f'{ms:.3f}':>9} {'–' if params is None else f'{params:,}':>12}")
    header = cast(dict[str, Any], payload["header"])
    lines += [f"results: {payload['results']} (and {payload['json']}; MLflow run {header['mlflow_run_id']} of "
              "experiment xc-results)"]
    return "\n".join(lines)


def _results_arguments(command: argparse.ArgumentParser) -> None:
    from xc_core.methods import result_methods
    from xc_core.stages.results import DEFAULT_DATASETS

    command.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    command.add_argument("--datasets", default=",".join(DEFAULT_DATASETS),
                         help=f"comma-separated data sets (default: {','.join(DEFAULT_DATASETS)})")
    command.add_argument("--methods", default=",".join(result_methods()),
                         help=f"comma-separated registered methods, run in the order their requirements give "
                              f"(default: {','.join(result_methods())})")
    command.add_argument("--out", default="", help="folder for RESULTS.md and results.json (default: ./docs)")
    command.add_argument("--seeds", type=_seeds, default="0",
                         help="comma-separated training seeds: the tables are the first's, more add a mean ± sd "
                              "table (default 0)")
    command.add_argument("--retrain", action="store_true", help="train every method anew (default: only what is "
                                                                "missing, or stale: its code or data changed)")
    command.add_argument("--json", action="store_true", help="print the whole results JSON as one line")


def _pipeline_arguments(command: argparse.ArgumentParser, run: bool) -> None:
    from xc_core.methods import run_methods

    command.add_argument("--dataset", default="synthetic",
                         help="a built-in data set, one defined in the home (`xc dataset --name NAME "
                              "--from-events`), or PATH (an XC-repository folder, defined in the home by its "
                              "folder name on first use) (default: synthetic)")
    command.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    command.add_argument("--methods", default=",".join(run_methods()),
                         help="comma-separated methods to train and evaluate, or 'all'"
                              + (" (empty: data stages only)" if run else ""))
    command.add_argument("--min-lead", type=_min_lead, default=0.0, metavar="LEAD",
                         help="promote only if the primary metric's lead over the champion (point estimate, "
                              "a fraction: 0.005 = half a P@1 point) is at least LEAD, besides being "
                              "significant (default 0: any significant lead)")
    command.add_argument("--json", action="store_true", help="print the summary as one JSON line, not a table")
    if run:
        command.add_argument("--reuse-data", action="store_true", help="skip the data lineage run and train on the "
                                                                       "anchor sets already materialized in --home")
        command.add_argument("--seed", type=_seed, default=None, metavar="N",
                             help="every method's training seed (default: the profile's, 0): it draws the training "
                                  "subsample, validation rows, batches and the classifier's folds; the data and the "
                                  "test split stay the same. Give each seed its own --home: the gate compares "
                                  "with the home's champion")
        command.add_argument("--peers", default="", metavar="PEERS",
                             help="comma-separated linear peers to score on the same test split before the report "
                                  "(pecos, pecos-xc; their environment: make peers), shown beside the methods in "
                                  "the report, its label-decile table and the summary (default: none; make run "
                                  "asks for pecos)")
        _executor_arguments(command)


def _executor_arguments(command: argparse.ArgumentParser) -> None:
    from xc_assets.distributed import DEFAULT_DASK_ADDRESS, EXECUTORS  # names only: dagster-dask is not imported

    command.add_argument("--executor", choices=EXECUTORS, default=None,
                         help="where the method partitions' steps run: in this process, or as tasks of a dask "
                              "cluster through dagster-dask (pip install 'xc[scale]') (default: $XC_EXECUTOR, else "
                              "in_process)")
    command.add_argument("--dask-address", default="", metavar="ADDRESS",
                         help=f"the dask scheduler for --executor dask (default: $XC_DASK_ADDRESS, else "
                              f"{DEFAULT_DASK_ADDRESS})")


def _table(payload: dict[str, object]) -> str:
    from xc_assets.summary import table

    return table(payload)


# the commands that go through Dagster, registered beside the stages' own (xc_core.stages)
register(Command("run", "materialize the asset graph in-process through Dagster",
                 lambda command: _pipeline_arguments(command, run=True), cmd_run, _table, docs="docs/operating.md",
                 stage="xc_assets.run"))
register(Command("promote", "register evaluated methods in turn and run the promotion gate (Dagster)",
                 lambda command: _pipeline_arguments(command, run=False), cmd_promote, _table,
                 docs="docs/operating.md", assets=("challenger", "champion"), stage="xc_assets.run"))
register(Command("results", "every method on every data set at one profile → RESULTS.md + results.json, logged "
                            "to MLflow (xc-results); trains and evaluates what is missing or stale first",
                 _results_arguments, cmd_results, _results_table, docs="docs/results/index.md",
                 assets=("results", "results_page"), stage="xc_core.stages.results"))


def build_parser() -> argparse.ArgumentParser:
    return core.build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    return core.main(argv, parser=build_parser())


if __name__ == "__main__":
    sys.exit(main())
