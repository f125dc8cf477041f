"""A stage added in one place (this file) is an ``xc`` command and an asset of every data set's Dagster family, with
no other edit: it registers its command with ``xc_core.stages.register`` and declares its asset there.

The toy stage counts the training positives per label of a data set already built in the home."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, Field

from xc_core.datasets.container import XCDataset
from xc_core.paths import resolve_home
from xc_core.stages import COMMANDS, Command, Markdown, Payload, StageAsset


class CountOptions(BaseModel):
    top: int = Field(default=3, ge=1, description="how many of the most frequent labels to list")


def label_counts(home: Path, dataset: str, top: int) -> dict[str, Any]:
    """The stage's run function, which the command and the asset both call."""
    from xc_core.stages.anchor_sets import load_with_anchors

    data = load_with_anchors(home, dataset)
    counts = np.asarray(data.y_train.sum(axis=0)).ravel()
    frequent = np.argsort(-counts, kind="stable")[:top]
    return {"labels": int(data.n_labels), "positives": int(counts.sum()),
            "frequent": [data.label_texts[i] for i in frequent]}


def _arguments(command: argparse.ArgumentParser) -> None:
    from xc_core.stages.options import add_dataset

    add_dataset(command)
    command.add_argument("--top", type=int, default=3)


def _run(args: argparse.Namespace) -> Payload:
    return {"dataset": args.dataset, **label_counts(resolve_home(args.home), args.dataset, args.top)}


def _materialize(home: Path, dataset: str, method: str | None, options: CountOptions) -> dict[str, Any]:
    found = label_counts(home, dataset, options.top)
    return {**found, "summary": Markdown("\n".join(f"- {text}" for text in found["frequent"]))}


STAGE = Command("label-counts", "training positives per label (toy)", _arguments, _run,
                asset=StageAsset("label_counts", "training positives per label (toy)", _materialize,
                                 deps=("xc_dataset",), options=CountOptions))


@pytest.fixture
def new_stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[Command]:
    from xc_assets.defs.family import family

    monkeypatch.setitem(COMMANDS, STAGE.name, STAGE)  # registered for this test only
    family.cache_clear()
    yield STAGE
    family.cache_clear()


def test_a_stage_added_in_one_file_is_a_command_and_an_asset_of_every_family(
        new_stage: Command, tiny_data: XCDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dagster as dg

    from xc_assets.cli import build_parser, main
    from xc_assets.defs.family import family
    from xc_assets.defs.resources import XcHome
    from xc_core.paths import dataset_dir

    tiny_data.save(dataset_dir(tmp_path, tiny_data.name))
    assert "label-counts" in build_parser().format_help()
    assert main(["label-counts", "--dataset", tiny_data.name, "--top", "2", "--home", str(tmp_path), "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = label_counts(tmp_path, tiny_data.name, 2)
    assert printed == {"dataset": tiny_data.name, **expected} and len(printed["frequent"]) == 2
    assert printed["positives"] == int(tiny_data.y_train.sum())

    assets = family(tiny_data.name, True)
    asset = assets.declared["label_counts"]
    assert asset in assets.assets and asset.key == dg.AssetKey([tiny_data.name, "label_counts"])
    assert dg.AssetKey([tiny_data.name, "xc_dataset"]) in asset.asset_deps[asset.key]
    with dg.instance_for_test() as instance:
        result = dg.materialize([asset], instance=instance, resources={"xc_home": XcHome(home=str(tmp_path))},
                                run_config={"ops": {f"{tiny_data.name}__label_counts": {"config": {"top": 2}}}})
        [event] = result.get_asset_materialization_events()
    metadata = event.step_materialization_data.materialization.metadata
    assert metadata["labels"].value == expected["labels"] and metadata["frequent"].value == expected["frequent"]
    assert isinstance(metadata["summary"], dg.MarkdownMetadataValue)


def test_the_commands_come_in_pipeline_order_then_the_ones_registered_elsewhere(new_stage: Command) -> None:
    import xc_assets.cli  # noqa: F401 - registers run, promote and results
    from xc_core.stages import STAGES, commands

    found = commands()
    names = [c.name for c in found]
    builtin = [c for c in found if c.run.__module__.startswith("xc_core.stages.")]
    assert found[:len(builtin)] == builtin  # the stages first, in the order of STAGES
    assert [STAGES.index(c.run.__module__.rsplit(".", 1)[1]) for c in builtin] == sorted(
        STAGES.index(c.run.__module__.rsplit(".", 1)[1]) for c in builtin)
    assert names[:3] == ["ingest", "simulate", "graphs"]
    assert {"run", "promote", "results", "label-counts"} <= set(names[len(builtin):])
