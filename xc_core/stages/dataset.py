"""``xc dataset`` and the ``xc_dataset`` asset: define, build and save an XC data set (summarised)."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from xc_core.datasets.container import XCDataset
from xc_core.datasets.definitions import DatasetDefinition, write_definition
from xc_core.datasets.registry import build_dataset, leaked_test_nodes, spec_from_definition
from xc_core.paths import dataset_dir, resolve_home
from xc_core.stages import Command, Payload, register
from xc_core.stages.options import add_dataset

log = logging.getLogger(__name__)


def materialize_dataset(name: str, home: Path, seed: int = 0,
                        definition: DatasetDefinition | None = None) -> tuple[XCDataset, dict[str, Any]]:
    """Build data set ``name`` and save it under ``<home>/datasets/<name>``.

    Args:
        name: a built-in data set, one defined in the home, or an XC-repository folder's path.
        home: the data root (its event store for an event-log data set).
        seed: the seed of the build's draws.
        definition: a new or changed definition, saved to ``<home>/datasets/<name>.yaml`` only once the data set
            it defines was built (a definition that selects nothing leaves the home as it was).

    Returns:
        (the data set, its summary: documents, labels, splits and what the checks counted).

    Raises:
        RuntimeError: an event-log data set whose anchors include test-only documents (a leak; nothing saved).
    """
    started = time.perf_counter()
    spec = spec_from_definition(definition) if definition is not None else None
    dataset = build_dataset(name, home, seed=seed, spec=spec)
    leaks = leaked_test_nodes(dataset)
    if leaks and dataset.meta.get("graphs_dir"):
        # xc built these anchors from the event store, where a query's text is the query: a real leak
        raise RuntimeError(f"{dataset.name}: {leaks} anchors are test-only documents — the split leaks into the "
                           "graphs; this is a bug in the builder, nothing was saved")
    if leaks:  # a folder's nodes are ids: equal text is not the same node, but the user should know
        log.warning("%s: %d anchor texts equal the text of a test-only document (e.g. a category and a headword "
                    "both called 'language'); kept — they are different nodes, but check the folder if unexpected",
                    dataset.name, leaks)
    path = dataset.save(dataset_dir(home, name))
    defined = {"definition": str(write_definition(home, definition))} if definition is not None else {}
    summary = {**dataset.summary(), **defined, "leaked_test_nodes": leaks,
               "seen_query_text": seen_text_shares(dataset), "path": str(path),
               "seconds": round(time.perf_counter() - started, 2)}
    return dataset, summary


def seen_text_shares(dataset: XCDataset) -> dict[str, Any]:
    """Per split, the share of its queries whose text was trained on (validation: the default split settings, seed 0;
    training/validation.py). Printed for the reader after the fact: validation keeps the training window's own mix,
    and no choice reads the test's; a wide gap says the test period differs from the window's end."""
    import numpy as np

    from xc_core.training.config import TrainConfig
    from xc_core.training.validation import validation_split

    found = validation_split(dataset, TrainConfig())
    trained = {dataset.train_texts[i] for i in found.train_rows}
    validation = float(np.mean([dataset.train_texts[i] in trained for i in found.val_rows])) if len(
        found.val_rows) else float("nan")
    test = float(1.0 - np.mean(dataset.test_novel)) if len(dataset.test_texts) else float("nan")
    return {"validation": round(validation, 4), "test": round(test, 4), "validation_kind": found.kind,
            "validation_rows": int(len(found.val_rows))}


def built_or_build(name: str, home: Path, seed: int = 0) -> XCDataset:
    """The home's build of data set ``name``, built first when the home has none (``xc anchors`` on a fresh home)."""
    try:
        return XCDataset.load(dataset_dir(home, name))
    except FileNotFoundError:
        return materialize_dataset(name, home, seed)[0]


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


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    command.add_argument("--seed", type=int, default=0)
    _add_definition(command)


def _run(args: argparse.Namespace) -> Payload:
    return materialize_dataset(args.dataset, resolve_home(args.home), seed=args.seed, definition=_definition(args))[1]


COMMAND = register(Command("dataset", "define, build and save an XC data set", _arguments, _run,
                           docs="docs/graphs.md", assets=("xc_dataset",)))
