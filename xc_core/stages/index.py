"""``xc index`` and the ``label_index`` asset: a trained method scores the test queries anew and saves what it
needs (its label index, the queries' top-k) in its index folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from xc_core.paths import index_dir, resolve_home
from xc_core.stages import Command, Payload, StageAsset, register
from xc_core.stages.options import add_dataset, add_method, add_profile

if TYPE_CHECKING:
    from xc_core.datasets.container import XCDataset
    from xc_core.methods import Predictions


def index_method(dataset: XCDataset, method: str, profile: str, home: Path, progress: bool = False) -> Predictions:
    """The index stage of a trained method (``xc index`` and the Dagster ``label_index`` asset): the method
    scores the test queries anew and saves what it needs in its index folder.

    Args:
        dataset: the data set with its anchor sets.
        method: a trained method of the home.
        profile: the profile it was trained at.
        home: the data root; the index goes to ``<home>/indexes/<data set>/<method>-<profile>``.
        progress: show progress bars.

    Returns:
        The method's predictions on the test queries, with the index's own metrics (``index_metrics()``).
    """
    from xc_core.methods import get_method
    from xc_core.training.record import TrainedModel

    trained = TrainedModel.of(home, dataset.name, method, profile)
    return get_method(method).predict(dataset, trained, index_dir(home, dataset.name, method, profile),
                                      progress=progress)


def _arguments(command: argparse.ArgumentParser) -> None:
    add_dataset(command)
    add_method(command)
    add_profile(command)


def _run(args: argparse.Namespace) -> Payload:
    from xc_core.stages.anchor_sets import load_with_anchors

    home = resolve_home(args.home)
    dataset = load_with_anchors(home, args.dataset)
    preds = index_method(dataset, args.method, args.profile, home, progress=not args.quiet)
    return {"dataset": dataset.name, "method": args.method, "index_dir": str(preds.index_dir),
            "labels": preds.scores.shape[1], **preds.index_metrics()}


class IndexOptions(BaseModel):
    profile: str = Field(default="demo", description="profile the encoders were trained with")


def materialize_index(home: Path, dataset: str, method: str | None, options: IndexOptions) -> dict[str, Any]:
    """The ``label_index`` asset of one method partition."""
    from xc_core.stages.anchor_sets import load_with_anchors

    assert method is not None  # a per-method asset
    data = load_with_anchors(home, dataset)
    preds = index_method(data, method, options.profile, home)
    return {"labels": data.n_labels, **preds.index_metrics(), "model_uri": preds.model_uri,
            "path": Path(preds.index_dir)}


COMMAND = register(Command(
    "index", "build and measure the method's HNSW label index", _arguments, _run,
    asset=StageAsset("label_index", "The method's index and test-query predictions (for an encoder method: HNSW index "
                                    "of every label, recall@10 against exact search on the test queries)",
                     materialize_index, deps=("encoder",), per_method=True, options=IndexOptions, kinds=("faiss",),
                     code_stage="evaluate"),
    docs="docs/evaluation.md"))
