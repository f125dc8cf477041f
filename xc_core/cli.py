"""``xc``: one command per pipeline stage, each printing a one-line JSON summary on stdout.

This module holds the library's commands; the ``xc`` script (``xc_assets.cli``) adds ``run`` and ``promote``,
which go through Dagster. ``python -m xc_core.cli`` runs the library's commands without Dagster.

Progress bars and logs go to stderr, so ``xc ... | jq`` always sees exactly one JSON line (``run`` and
``promote`` print a table for people instead, their JSON with ``--json``; ``--quiet`` silences every progress bar,
the libraries' included). A data set is named by its name, never the folder path it was given. Bad input and
missing prerequisites (a rejected file, an unknown data set, nothing trained yet, no champion) print one line
naming the file or name and the fix, and exit 2; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xc_core.paths import aol_archive, dataset_slug, resolve_home
from xc_core.profiles import PROFILE_NAMES
from xc_core.serving import DEFAULT_PORT  # not .server: FastAPI loads only for `xc serve`
from xc_core.simulate.config import SCALES

if TYPE_CHECKING:
    from xc_core.datasets.container import XCDataset


def _emit(payload: dict[str, object], args: argparse.Namespace) -> None:
    """One JSON line, or the command's text for people (its ``render`` default) unless ``--json`` asks for JSON."""
    if isinstance(payload.get("dataset"), str):  # a folder given as PATH is named as XCDataset names it
        payload["dataset"] = dataset_slug(str(payload["dataset"]))
    render: Callable[[dict[str, object]], str] | None = getattr(args, "render", None)
    if render is not None and not getattr(args, "json", False):
        print(render(payload), flush=True)
    else:
        print(json.dumps(payload, default=str), flush=True)


# What the libraries read to hide their progress bars: tqdm (at import), Hugging Face downloads and transformers'
# weight loading (at import), MLflow's artifact transfers (at each transfer); processes a command starts inherit it.
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


@contextmanager
def _progress_bars_off(quiet: bool) -> Iterator[None]:
    """``--quiet``: xc's own bars go through each command's ``progress=``; the libraries' through QUIET_ENV and,
    for those already imported (their flag was read then), their own switch. The variables are put back after
    the command (tests call :func:`main` in-process)."""
    if not quiet:
        yield
        return
    saved = {key: os.environ.get(key) for key in QUIET_ENV}
    os.environ.update(QUIET_ENV)
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def cmd_ingest(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.logs.config import load_ingest_config
    from xc_core.logs.errors import NothingAcceptedError
    from xc_core.logs.ingest import Source, ingest, rejected_file_message

    paths = [Path(p) for p in args.paths] or ([aol_archive()] if args.source == "aol" else [])
    if not paths:
        raise SystemExit("xc ingest --source events needs at least one PATH (Parquet, CSV/TSV or JSON Lines)")
    home = resolve_home(args.home)
    cfg = load_ingest_config(home, markets=args.markets, max_query_chars=args.max_query_chars,
                             session_gap_minutes=args.session_gap_minutes)
    summary = ingest([Source(args.source, p) for p in paths], home, cfg, progress=not args.quiet)
    for entry in summary.rejected_files:  # a file that gave nothing must not pass unnoticed
        print(f"xc ingest: {rejected_file_message(entry, home)}", file=sys.stderr)
    if summary.accepted == 0:
        raise NothingAcceptedError(summary.read, summary.rejected, len(paths))
    return summary.to_dict()


def cmd_simulate(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.simulate.pipeline import simulate_into_store

    return simulate_into_store(args.scale, args.seed, resolve_home(args.home), progress=not args.quiet)


def cmd_graphs(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.registry import events_config
    from xc_core.stages.datasets import materialize_graph_tables

    events_config(args.dataset, resolve_home(args.home))  # an unknown or non-event data set: one clear line

    summary = materialize_graph_tables(args.dataset, resolve_home(args.home))
    return {"dataset": args.dataset, **summary.to_dict()}


def cmd_dataset(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.stages.datasets import materialize_dataset

    return materialize_dataset(args.dataset, resolve_home(args.home), seed=args.seed, definition=_definition(args))[1]


def _definition(args: argparse.Namespace) -> Any:
    """The definition ``xc dataset --from-events`` / ``--from-xc-folder`` describes (None: build as defined)."""
    from xc_core.datasets.definitions import DatasetDefinition, DefinitionError, RawEventsSource
    from xc_core.datasets.registry import DATASETS

    if not (args.from_events or args.from_xc_folder):
        return None
    if args.dataset in DATASETS:
        raise DefinitionError(f"'{args.dataset}' is a built-in data set: give yours another --name")
    fields: dict[str, Any] = {"name": args.dataset, "description": args.description or ""}
    if args.from_xc_folder:
        folder = Path(args.from_xc_folder).expanduser().resolve()
        if not folder.is_dir():
            raise FileNotFoundError(f"--from-xc-folder {folder}: no such folder")
        return DatasetDefinition(**fields, kind="xc-folder", path=str(folder))
    optional = {"split": args.split, "test_days": args.test_days, "label": args.label, "min_clicks": args.min_clicks,
                "min_impressions": args.min_impressions, "psp_A": args.psp_a, "psp_B": args.psp_b}
    fields.update({k: v for k, v in optional.items() if v is not None})
    if args.markets:
        fields["markets"] = [m.strip() for m in args.markets.split(",") if m.strip()]
    if args.raw_files or args.raw_source:
        fields["raw"] = RawEventsSource(source=args.raw_source or "events", paths=args.raw_files)
    try:
        return DatasetDefinition(**fields)
    except ValueError as err:  # pydantic's ValidationError: name the option
        raise DefinitionError(f"xc dataset --name {args.dataset}: {err}") from err


def cmd_anchors(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.profiles import get_profile
    from xc_core.stages.datasets import load_or_build
    from xc_core.stages.graphs import materialize_anchor_sets

    home = resolve_home(args.home)
    dataset = load_or_build(args.dataset, home)
    return materialize_anchor_sets(dataset, home, get_profile(args.profile), progress=not args.quiet).summary


def cmd_train(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.container import XCDataset
    from xc_core.methods import get_method
    from xc_core.paths import anchors_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.graphs import load_with_anchors
    from xc_core.stages.training import train_method

    home = resolve_home(args.home)
    folder = anchors_dir(home, args.dataset)
    method = get_method(args.method)
    if method.needs_anchor_sets and not (folder / "meta.json").exists():
        raise SystemExit(f"xc train: {method.name} trains on anchor sets and there are none at {folder} — run "
                         f"`xc anchors --dataset {args.dataset} --profile {args.profile} --home {home}` first")
    # Methods that use no graph (pretrained, dual_encoder) train on the data set as built when no anchor
    # stage has run: the untrained floor never waits for RWR.
    dataset = XCDataset.load(folder) if method.needs_anchor_sets else load_with_anchors(home, args.dataset)
    profile = get_profile(args.profile).model_copy(update={"seed": args.seed})
    return train_method(dataset, args.method, profile, home, resume=args.resume, progress=not args.quiet)


def _anchored(home: Path, name: str) -> XCDataset:
    from xc_core.stages.graphs import load_with_anchors

    return load_with_anchors(home, name)


def cmd_index(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.stages.evaluation import index_method

    home = resolve_home(args.home)
    dataset = _anchored(home, args.dataset)
    preds = index_method(dataset, args.method, args.profile, home, progress=not args.quiet)
    return {"dataset": dataset.name, "method": args.method, "index_dir": str(preds.index_dir),
            "labels": preds.scores.shape[1], **preds.index_metrics()}


def cmd_eval(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.stages.evaluation import evaluate_method

    home = resolve_home(args.home)
    summary = evaluate_method(_anchored(home, args.dataset), args.method, args.profile, home,
                              progress=not args.quiet, split=args.split)
    summary.pop("subsets", None)
    return summary


def cmd_report(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.stages.evaluation import build_report

    home = resolve_home(args.home)
    return build_report(_anchored(home, args.dataset), args.profile, home)


def cmd_predict(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.registry import resolve_dataset
    from xc_core.serving import predict_from_champion

    home = resolve_home(args.home)
    return predict_from_champion(resolve_dataset(args.dataset, home, define=False), args.query, home, k=args.k)


def cmd_serve(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.registry import resolve_dataset
    from xc_core.serving.app import Limits
    from xc_core.serving.server import serve

    home = resolve_home(args.home)
    limits = Limits(max_queries=args.max_queries, max_chars=args.max_chars)
    return serve(resolve_dataset(args.dataset, home, define=False), home, args.host, args.port, args.poll_seconds,
                 limits, args.max_batch, args.version)


def cmd_add_keywords(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.methods.irene.stream import add_keywords, read_keywords

    home = resolve_home(args.home)
    texts, ids = read_keywords(Path(args.file))
    return {"file": args.file, **add_keywords(home, args.dataset, args.profile, texts, ids, batch=args.batch)}


def cmd_abtest(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.abtest import ABConfig, SelectionConfig
    from xc_core.stages.abtest import ABStage

    selection = SelectionConfig(slots=args.slots, candidates=args.candidates, reserve=args.reserve)
    cfg = ABConfig(queries=args.queries, seed=args.seed, paired=args.paired, selection=selection)
    stage = ABStage(args.dataset, resolve_home(args.home), args.profile)
    if args.aa_runs:
        return stage.calibrate(args.control, cfg, args.aa_runs)
    if args.treatment is None:
        raise LookupError("xc abtest needs --treatment (or --aa-runs N for an A/A calibration of --control)")
    return stage.run(args.control, args.treatment, cfg, log=not args.no_mlflow)


def cmd_results(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.stages.results import run_results, validate_methods

    methods = validate_methods([m for m in args.methods.split(",") if m])  # before the home is made
    home = resolve_home(args.home)
    summary = run_results(home, args.profile, [d for d in args.datasets.split(",") if d], methods,
                          seeds=_seeds(args.seeds), out=Path(args.out) if args.out else None, retrain=args.retrain,
                          progress=not args.quiet)
    return {"results": summary["results"], "json": summary["json"], "header": summary["header"],
            "datasets": summary["datasets"]}


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise SystemExit(f"xc results --seeds {text}: comma-separated integers, e.g. 0,1,2") from err


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


def _add_dataset(command: argparse.ArgumentParser, events_only: bool = False) -> None:
    """``--dataset`` on every command (``--name``, the old spelling of graphs/dataset/anchors, still works): a
    built-in name, one defined in the home (checked when the command runs: the home is an option too), or a
    folder."""
    kinds = "an event-log data set (built in or defined in the home)" if events_only else (
        "a data set: built in (synthetic, aol-1000, wikispeedia), defined in the home (`xc dataset --name NAME "
        "--from-events`), or PATH (an XC-repository folder)")
    command.add_argument("--dataset", "--name", dest="dataset", default="synthetic", help=f"{kinds} (default: "
                                                                                            "synthetic)")


def _add_definition(command: argparse.ArgumentParser) -> None:
    """``xc dataset``'s options that define a data set in the home (``<home>/datasets/NAME.yaml``)."""
    group = command.add_argument_group("define a data set (saved as <home>/datasets/NAME.yaml once it builds)")
    source = group.add_mutually_exclusive_group()
    source.add_argument("--from-events", action="store_true", help="an event log in the home's store (xc ingest)")
    source.add_argument("--from-xc-folder", metavar="PATH", help="an XC-repository folder (trn_X.txt, tst_X.txt, …)")
    group.add_argument("--description", help="one line saying what the data set is")
    group.add_argument("--markets", help="comma-separated markets to use (default: every market)")
    split = group.add_mutually_exclusive_group()
    split.add_argument("--split", help="first test instant, ISO date/time (default: the last --test-days days)")
    split.add_argument("--test-days", type=int, help="test period: the last N days of the events (default 7)")
    group.add_argument("--label", choices=["item_id", "host"], help="what a label is: the item id (default) or the "
                                                                   "host of a URL-like item id")
    group.add_argument("--min-clicks", type=int, help="clicks a label needs in the window (default 1)")
    group.add_argument("--min-impressions", type=int, help="impressions a label needs in the window (default 0)")
    group.add_argument("--psp-a", type=float, help="inverse-propensity A (default 0.55)")
    group.add_argument("--psp-b", type=float, help="inverse-propensity B (default 1.5)")
    group.add_argument("--raw-source", choices=["events", "aol"], help="what `xc run` ingests first: canonical "
                                                                      "event files (default with --raw-files) or AOL")
    group.add_argument("--raw-files", nargs="+", default=[], metavar="FILE",
                       help="files or globs `xc run` ingests before building (default: none, the events are "
                            "already in the store)")


def _add_method(command: argparse.ArgumentParser) -> None:
    """``--method``: any registered method (``xc_core.methods``), or a graph method on some anchor sets."""
    from xc_core.methods import DEFAULT_METHOD, method_names

    names = " | ".join(method_names())
    command.add_argument("--method", default=DEFAULT_METHOD,
                         help=f"{names} | <graph method>@<set>[+<set>] (default: {DEFAULT_METHOD})")


def build_parser(extend: Callable[[Any, argparse.ArgumentParser], None] | None = None) -> argparse.ArgumentParser:
    """The library's commands; ``extend(subparsers, common)`` adds more (xc_assets adds ``run``/``promote``,
    which go through Dagster, so that xc_core never imports it)."""
    parser = argparse.ArgumentParser(prog="xc", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="data root for everything xc writes (default: $XC_HOME or ./.xc)")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    common.add_argument("-v", "--verbose", action="store_true", help="log at INFO to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", parents=[common], help="raw logs → event store + quarantine")
    ingest.add_argument("--source", choices=["aol", "events"], required=True)
    ingest.add_argument("paths", nargs="*", help="files to ingest (default for aol: the shared aol-1000 archive)")
    ingest.add_argument("--markets", help="accepted markets, comma separated, e.g. zh-CN,en-US; '*': any "
                                          "(default: ingest.markets in <home>/xc.yaml, else any)")
    ingest.add_argument("--max-query-chars", type=int, help="longer queries are quarantined (default 512)")
    ingest.add_argument("--session-gap-minutes", type=float, help="inactivity that starts a new session (default 30)")
    ingest.set_defaults(func=cmd_ingest)

    simulate = sub.add_parser("simulate", parents=[common], help="simulated world → day files → event store")
    simulate.add_argument("--scale", default="demo", choices=SCALES)
    simulate.add_argument("--seed", type=int, default=0)
    simulate.set_defaults(func=cmd_simulate)

    graphs = sub.add_parser("graphs", parents=[common], help="event store → click/co-session/co-click tables")
    _add_dataset(graphs, events_only=True)
    graphs.set_defaults(func=cmd_graphs)

    dataset = sub.add_parser("dataset", parents=[common], help="define, build and save an XC data set")
    _add_dataset(dataset)
    dataset.add_argument("--seed", type=int, default=0)
    _add_definition(dataset)
    dataset.set_defaults(func=cmd_dataset)

    anchors = sub.add_parser("anchors", parents=[common], help="ANN proxies → RWR expansion → pruning, coverage")
    _add_dataset(anchors)
    anchors.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    anchors.set_defaults(func=cmd_anchors)

    train = sub.add_parser("train", parents=[common], help="train a method (one MLflow run)")
    _add_dataset(train)
    _add_method(train)
    train.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    train.add_argument("--seed", type=int, default=0, help="training seed (validation split, batches, bandit)")
    train.set_defaults(func=cmd_train)

    for name, func, text in (("index", cmd_index, "build and measure the method's HNSW label index"),
                             ("eval", cmd_eval, "offline evaluation of one trained method on the test split")):
        command = sub.add_parser(name, parents=[common], help=text)
        _add_dataset(command)
        _add_method(command)
        command.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
        command.set_defaults(func=func)
        if name == "eval":
            command.add_argument("--split", default="test", choices=("test", "validation"),
                                 help="test (read once, for results) or validation: the rows the stages select on, "
                                      "scored with the test protocol — for deciding what to build")

    report = sub.add_parser("report", parents=[common], help="HTML report over every evaluated method")
    _add_dataset(report)
    report.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    report.set_defaults(func=cmd_report)

    abtest = sub.add_parser("abtest", parents=[common], help="simulated A/B test of two arms (replay without a world)")
    _add_dataset(abtest)
    arms = "a model URI (models:/xc-encoder-synthetic@champion), a trained method's name, bm25, oracle or random"
    abtest.add_argument("--control", default="pretrained", help=f"control arm: {arms} (default: pretrained)")
    abtest.add_argument("--treatment", help=f"treatment arm: {arms}")
    abtest.add_argument("--profile", default="demo", choices=PROFILE_NAMES, help="profile of arms named by method")
    abtest.add_argument("--queries", type=int, default=20_000, help="query events served (default 20000)")
    abtest.add_argument("--seed", type=int, default=0)
    abtest.add_argument("--paired", action="store_true", help="both arms serve the same events (common random "
                        "numbers); default: users split by a salted hash")
    abtest.add_argument("--slots", type=int, default=5, help="ads shown per query at most")
    abtest.add_argument("--candidates", type=int, default=100, help="top-K ads each arm retrieves")
    abtest.add_argument("--reserve", type=float, default=0.05, help="reserve price per click")
    abtest.add_argument("--aa-runs", type=int, default=0, help="instead: A/A calibration of --control over N seeds")
    abtest.add_argument("--no-mlflow", action="store_true", help="do not log the test to MLflow")
    abtest.set_defaults(func=cmd_abtest)

    keywords = sub.add_parser("add-keywords", parents=[common],
                              help="stream novel keywords into IRENE's serving index (no retraining)")
    keywords.add_argument("file", help="CSV or Parquet with a keyword_text column and optionally keyword_id")
    _add_dataset(keywords)
    keywords.add_argument("--profile", default="demo", choices=PROFILE_NAMES, help="profile IRENE was trained at")
    keywords.add_argument("--batch", type=int, default=4096, help="keywords represented at once")
    keywords.set_defaults(func=cmd_add_keywords)

    predict = sub.add_parser("predict", parents=[common], help="top-k labels from the registry's champion")
    predict.add_argument("query")
    _add_dataset(predict)
    predict.add_argument("--k", type=int, default=10)
    predict.set_defaults(func=cmd_predict)

    serve = sub.add_parser("serve", parents=[common], help="serve the champion over HTTP on 127.0.0.1 (/predict, "
                           "/health, /ready, /metrics), following @champion without a restart")
    _add_dataset(serve)
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    serve.add_argument("--poll-seconds", type=float, default=5.0,
                       help="how often to look for a new champion or newly streamed keywords (default 5)")
    serve.add_argument("--max-batch", type=int, default=64,
                       help="queries one model call answers at most when requests queue up (default 64)")
    serve.add_argument("--max-queries", type=int, default=256, help="queries one request may send (default 256)")
    serve.add_argument("--max-chars", type=int, default=512, help="characters one query may have (default 512)")
    serve.add_argument("--version", default=None, help="serve this registry version and follow no alias (a canary, "
                                                       "a benchmark of one version)")
    serve.set_defaults(func=cmd_serve)

    from xc_core.stages.results import DEFAULT_DATASETS, RESULT_METHODS

    results = sub.add_parser("results", parents=[common], help="every method on every data set at one profile → "
                             "RESULTS.md + results.json, logged to MLflow (xc-results)")
    results.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    results.add_argument("--datasets", default=",".join(DEFAULT_DATASETS),
                         help=f"comma-separated data sets (default: {','.join(DEFAULT_DATASETS)})")
    results.add_argument("--methods", default=",".join(RESULT_METHODS),
                         help=f"comma-separated registered methods, in training order (default: "
                              f"{','.join(RESULT_METHODS)})")
    results.add_argument("--out", default="", help="folder for RESULTS.md and results.json (default: ./docs)")
    results.add_argument("--seeds", default="0", help="comma-separated training seeds: the tables are the first's, "
                                                     "more add a mean ± sd table (default 0)")
    results.add_argument("--retrain", action="store_true", help="train even where the home holds a model of the "
                                                                "profile and seed")
    results.add_argument("--json", action="store_true", help="print the whole results JSON as one line")
    results.set_defaults(func=cmd_results, render=_results_table)

    if extend is not None:
        extend(sub, common)
    return parser


def main(argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one command (``parser``: :func:`build_parser`'s by default; the ``xc`` script passes the full one)."""
    args = (parser or build_parser()).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], dict[str, object]] = args.func
    try:
        with _progress_bars_off(args.quiet):
            payload = func(args)
        _emit(payload, args)
        if payload.get("success") is False:  # e.g. a failed Dagster run or a blocking check
            return 1
    except Exception as exc:  # the CLI boundary turns known errors into one clear line
        from xc_core.index import IndexError_
        from xc_core.logs.errors import IngestError
        from xc_core.tracking.served import ServedModelError

        # bad input or missing prerequisites (no evaluation yet, no champion, a tracking server down), a corrupt or
        # stale index or served model: one line that says what to do, not a traceback; anything else is a bug and
        # keeps its traceback
        if isinstance(exc, (IngestError, FileNotFoundError, LookupError, ConnectionError, IndexError_,
                            ServedModelError)):
            print(f"xc {args.command}: error: {exc}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
