"""``xc``: one command per pipeline stage, each printing a one-line JSON summary on stdout.

Progress bars and logs go to stderr, so ``xc ... | jq`` always sees exactly one JSON line. Errors
print a one-line message naming the file and the fix, and exit non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from xc_core.methods import RUN_METHODS
from xc_core.paths import aol_archive, resolve_home
from xc_core.profiles import PROFILE_NAMES


def _emit(payload: dict[str, object]) -> None:
    print(json.dumps(payload, default=str), flush=True)


def cmd_ingest(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.logs.config import IngestConfig
    from xc_core.logs.ingest import Source, ingest

    paths = [Path(p) for p in args.paths] or ([aol_archive()] if args.source == "aol" else [])
    if not paths:
        raise SystemExit("xc ingest --source events needs at least one PATH (Parquet, CSV/TSV or JSON Lines)")
    cfg = IngestConfig(max_query_chars=args.max_query_chars, session_gap_minutes=args.session_gap_minutes)
    summary = ingest([Source(args.source, p) for p in paths], resolve_home(args.home), cfg,
                     progress=not args.quiet)
    return summary.to_dict()


def cmd_simulate(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.simulate.pipeline import simulate_into_store

    return simulate_into_store(args.scale, args.seed, resolve_home(args.home), progress=not args.quiet)


def cmd_graphs(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.registry import events_config, graphs_dir
    from xc_core.datasets.events import event_window
    from xc_core.graphs.tables import build_graph_tables
    from xc_core.logs.store import EventStore

    home = resolve_home(args.home)
    store = EventStore(home)
    cfg = events_config(args.name, home)
    first, split, _ = event_window(store, cfg)
    summary = build_graph_tables(store, graphs_dir(home, args.name), first, split,
                                 cfg.graph.model_copy(update={"markets": cfg.markets}))
    return {"dataset": args.name, **summary.to_dict()}


def cmd_dataset(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.stage import materialize_dataset

    return materialize_dataset(args.name, resolve_home(args.home), seed=args.seed)[1]


def cmd_anchors(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.stage import load_or_build
    from xc_core.graphs.stage import materialize_anchor_sets
    from xc_core.profiles import get_profile

    home = resolve_home(args.home)
    dataset = load_or_build(args.name, home)
    return materialize_anchor_sets(dataset, home, get_profile(args.profile), progress=not args.quiet).summary


def cmd_train(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.datasets.container import XCDataset
    from xc_core.graphs.stage import anchors_dir, load_with_anchors
    from xc_core.methods import get_method
    from xc_core.profiles import get_profile
    from xc_core.training.stage import train_method

    home = resolve_home(args.home)
    folder = anchors_dir(home, args.dataset)
    method = get_method(args.method)
    if method.needs_anchor_sets and not (folder / "meta.json").exists():
        raise SystemExit(f"xc train: {method.name} trains on anchor sets and there are none at {folder} — run "
                         f"`xc anchors --name {args.dataset} --profile {args.profile} --home {home}` first")
    # Methods that use no graph (pretrained, dual_encoder) train on the data set as built when no anchor
    # stage has run: the untrained floor never waits for RWR.
    dataset = XCDataset.load(folder) if method.needs_anchor_sets else load_with_anchors(home, args.dataset)
    profile = get_profile(args.profile).model_copy(update={"seed": args.seed})
    return train_method(dataset, args.method, profile, home, resume=args.resume, progress=not args.quiet)


def _anchored(home: Path, name: str) -> object:
    from xc_core.graphs.stage import load_with_anchors

    return load_with_anchors(home, name)


def cmd_index(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.evaluation.predict import predict_trained
    from xc_core.evaluation.stage import index_dir, trained_summary

    home = resolve_home(args.home)
    dataset = _anchored(home, args.dataset)
    trained = trained_summary(home, args.dataset, args.method, args.profile)
    preds = predict_trained(dataset, trained, index_dir(home, args.dataset, args.method, args.profile),  # type: ignore[arg-type]
                            progress=not args.quiet)
    return {"dataset": args.dataset, "method": args.method, "index_dir": str(preds.index_dir),
            "labels": preds.scores.shape[1], "hnsw_recall@10": preds.index_recall_at_10,
            "ms_per_query": preds.index_ms_per_query, "exact_ms_per_query": preds.exact_ms_per_query}


def cmd_eval(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.evaluation.stage import evaluate_method

    home = resolve_home(args.home)
    summary = evaluate_method(_anchored(home, args.dataset), args.method, args.profile, home,  # type: ignore[arg-type]
                              progress=not args.quiet)
    summary.pop("subsets", None)
    return summary


def cmd_report(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.evaluation.stage import build_report

    home = resolve_home(args.home)
    return build_report(_anchored(home, args.dataset), args.profile, home)  # type: ignore[arg-type]


def cmd_predict(args: argparse.Namespace) -> dict[str, object]:
    from xc_core.serving import predict_from_champion

    return predict_from_champion(args.dataset, args.query, resolve_home(args.home), k=args.k)


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


def _add_min_lead(command: argparse.ArgumentParser) -> None:
    command.add_argument("--min-lead", type=_min_lead, default=0.0, metavar="LEAD",
                         help="promote only if the primary metric's lead over the champion (point estimate, a "
                              "fraction: 0.005 = half a P@1 point) is at least LEAD, besides being significant "
                              "(default 0: any significant lead)")


def cmd_promote(args: argparse.Namespace) -> dict[str, object]:
    runner = importlib.import_module("xc_assets.run")  # through Dagster, like `xc run`
    result: dict[str, object] = runner.promote_methods(args.dataset, args.profile, resolve_home(args.home),
                                                       _methods(args), min_lead=args.min_lead)
    return result


def cmd_run(args: argparse.Namespace) -> dict[str, object]:
    # The commands that go through Dagster live in xc_assets so xc_core never imports Dagster.
    runner = importlib.import_module("xc_assets.run")
    methods = _methods(args)
    result: dict[str, object] = runner.run_pipeline(dataset=args.dataset, profile=args.profile,
                                                    home=resolve_home(args.home), methods=methods,
                                                    reuse_data=args.reuse_data, min_lead=args.min_lead)
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xc", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="data root for everything xc writes (default: $XC_HOME or ./.xc)")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    common.add_argument("-v", "--verbose", action="store_true", help="log at INFO to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", parents=[common], help="raw logs → event store + quarantine")
    ingest.add_argument("--source", choices=["aol", "events"], required=True)
    ingest.add_argument("paths", nargs="*", help="files to ingest (default for aol: the shared aol-1000 archive)")
    ingest.add_argument("--max-query-chars", type=int, default=512)
    ingest.add_argument("--session-gap-minutes", type=float, default=30.0)
    ingest.set_defaults(func=cmd_ingest)

    simulate = sub.add_parser("simulate", parents=[common], help="simulated world → day files → event store")
    simulate.add_argument("--scale", default="demo", choices=["tiny", "demo", "large"])
    simulate.add_argument("--seed", type=int, default=0)
    simulate.set_defaults(func=cmd_simulate)

    graphs = sub.add_parser("graphs", parents=[common], help="event store → click/co-session/co-click tables")
    graphs.add_argument("--name", default="synthetic", choices=["synthetic", "aol-1000"])
    graphs.set_defaults(func=cmd_graphs)

    dataset = sub.add_parser("dataset", parents=[common], help="build and save an XC data set with anchor sets")
    dataset.add_argument("--name", default="synthetic", help="synthetic | aol-1000 | wikispeedia | PATH (XC repo)")
    dataset.add_argument("--seed", type=int, default=0)
    dataset.set_defaults(func=cmd_dataset)

    anchors = sub.add_parser("anchors", parents=[common], help="ANN proxies → RWR expansion → pruning, coverage")
    anchors.add_argument("--name", default="synthetic")
    anchors.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    anchors.set_defaults(func=cmd_anchors)

    train = sub.add_parser("train", parents=[common], help="train an encoder (one MLflow run)")
    train.add_argument("--dataset", default="synthetic")
    train.add_argument("--method", default="ramen", help="ramen | dual_encoder | pretrained | auggt | ramen_no_*")
    train.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    train.add_argument("--seed", type=int, default=0, help="training seed (validation split, batches, bandit)")
    train.set_defaults(func=cmd_train)

    for name, func, text in (("index", cmd_index, "build and measure the method's HNSW label index"),
                             ("eval", cmd_eval, "offline evaluation of one trained method on the test split")):
        command = sub.add_parser(name, parents=[common], help=text)
        command.add_argument("--dataset", default="synthetic")
        command.add_argument("--method", default="ramen")
        command.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
        command.set_defaults(func=func)

    report = sub.add_parser("report", parents=[common], help="HTML report over every evaluated method")
    report.add_argument("--dataset", default="synthetic")
    report.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    report.set_defaults(func=cmd_report)

    serve = sub.add_parser("predict", parents=[common], help="top-k labels from the registry's champion")
    serve.add_argument("query")
    serve.add_argument("--dataset", default="synthetic")
    serve.add_argument("--k", type=int, default=10)
    serve.set_defaults(func=cmd_predict)

    run = sub.add_parser("run", parents=[common], help="materialize the asset graph in-process through Dagster")
    run.add_argument("--dataset", default="synthetic", choices=["synthetic", "aol-1000", "wikispeedia"])
    run.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    run.add_argument("--methods", default=",".join(RUN_METHODS),
                     help="comma-separated methods to train and evaluate, or 'all' (empty: data stages only)")
    run.add_argument("--reuse-data", action="store_true",
                     help="skip the data lineage run and train on the anchor sets already materialized in --home")
    _add_min_lead(run)
    run.set_defaults(func=cmd_run)

    promote = sub.add_parser("promote", parents=[common],
                             help="register evaluated methods in turn and run the promotion gate (Dagster)")
    promote.add_argument("--dataset", default="synthetic", choices=["synthetic", "aol-1000", "wikispeedia"])
    promote.add_argument("--profile", default="demo", choices=PROFILE_NAMES)
    promote.add_argument("--methods", default=",".join(RUN_METHODS), help="comma-separated, or 'all'")
    _add_min_lead(promote)
    promote.set_defaults(func=cmd_promote)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], dict[str, object]] = args.func
    try:
        payload = func(args)
        _emit(payload)
        if payload.get("success") is False:  # e.g. a failed Dagster run or a blocking check
            return 1
    except Exception as exc:  # noqa: BLE001 - the CLI boundary turns known errors into one clear line
        from xc_core.logs.errors import IngestError

        # bad input or missing prerequisites (no evaluation yet, no champion, a tracking server down): one line
        # that says what to do, not a traceback; anything else is a bug and keeps its traceback
        if isinstance(exc, (IngestError, FileNotFoundError, LookupError, ConnectionError)):
            print(f"xc {args.command}: error: {exc}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
