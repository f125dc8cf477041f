"""Data-set definitions: a user's own log or XC folder becomes a data set every command takes by name, and a
definition that selects nothing says why without writing anything."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.datasets.test_container import assert_same_dataset
from xc_core.datasets.definitions import (
    DatasetDefinition,
    DefinitionError,
    builtin_definitions,
    definition_path,
    read_definition,
    write_definition,
)
from xc_core.datasets.registry import build_dataset, dataset_names, event_datasets, resolve_dataset
from xc_core.logs.ingest import Source, ingest
from xc_core.logs.store import EventStore

#: a small log in another market and language: intents, each with the ads its queries click
INTENTS = {
    "跑步鞋": ["ad-shoes-1", "ad-shoes-2"], "手机壳": ["ad-case-1", "ad-case-2"], "咖啡机": ["ad-coffee-1"],
    "机票 北京": ["ad-flight-1", "ad-flight-2"], "酒店 上海": ["ad-hotel-1"],
    "笔记本电脑": ["ad-laptop-1", "ad-laptop-2"],
}
AD_TEXT = {"shoes": "跑步鞋 运动", "case": "手机壳 保护", "coffee": "咖啡机 家用", "flight": "特价机票",
           "hotel": "上海酒店 预订", "laptop": "笔记本电脑 轻薄"}


def own_log(path: Path, days: int = 20, market: str = "zh-CN", item_url: bool = False) -> Path:
    """A canonical-schema Parquet log: 40 users a day search the intents (with variants), see the intent's ads and
    click one; ids are URLs with ``item_url`` (for the host label key)."""
    rng = np.random.default_rng(0)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    rows = []
    for day in range(days):
        for user in range(40):
            intent = list(INTENTS)[int(rng.integers(len(INTENTS)))]
            query = intent if rng.random() < 0.6 else f"{intent} {['便宜', '推荐', '正品'][int(rng.integers(3))]}"
            ts = start + timedelta(days=day, minutes=int(rng.integers(0, 1400)))
            clicked = INTENTS[intent][int(rng.integers(len(INTENTS[intent])))]
            for position, item in enumerate(INTENTS[intent], start=1):
                kind = item.split("-")[1]
                item_id = f"https://www.{kind}-shop{item[-1]}.cn/landing?id={item}" if item_url else item
                rows.append({"ts": ts, "user_id": f"u{user}", "market": market, "query_text": query,
                             "item_id": item_id, "item_text": AD_TEXT[kind], "position": position,
                             "impressed": True, "clicked": item == clicked})
    pl.DataFrame(rows).write_parquet(path)
    return path


def xc(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xc_assets.cli", *args, "--home", str(home), "--quiet"],
                          capture_output=True, text=True, timeout=600)


def xc_in_process(*args: str, home: Path, capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    """:func:`xc` through ``xc_assets.cli.main`` in this process (no interpreter start-up): for the error paths
    whose one-line message a subprocess test has already shown free of library noise."""
    from xc_assets.cli import main

    capsys.readouterr()
    try:
        code = main([*args, "--home", str(home), "--quiet"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["xc", *args], code, out, err)


def last_json(done: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- definition files ------------------------------------------------------------------------------------

def test_a_definition_round_trips_through_its_yaml_file(tmp_path: Path) -> None:
    definition = DatasetDefinition.model_validate({"name": "mylog", "markets": ["zh-CN"], "split": "2026-03-15",
                                                   "label": "host", "min_clicks": 2,
                                                   "raw": {"source": "events", "paths": ["/logs/*.parquet"]}})
    path = write_definition(tmp_path, definition)
    assert path == definition_path(tmp_path, "mylog") and path.read_text().startswith("# xc data set definition")
    assert read_definition(path) == definition
    assert definition.split == datetime(2026, 3, 15, tzinfo=UTC)  # a date without a zone is UTC
    assert dataset_names(tmp_path) == (*builtin_definitions(), "wikispeedia", "mylog")
    assert "mylog" in event_datasets(tmp_path)


@pytest.mark.parametrize(("body", "message"), [
    ("name: mylog\nmarkets: zh-CN\n", "markets: Input should be a valid list"),
    ("name: mylog\nlable: host\n", "lable: Extra inputs are not permitted"),
    ("name: other\n", "name 'other' differs from the file name"),
    ("kind: xc-folder\n", "kind xc-folder needs `path:`"),
    ("- just\n- a list\n", "expected a mapping of fields"),
])
def test_a_bad_definition_names_its_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "datasets" / "mylog.yaml"
    path.parent.mkdir()
    path.write_text(body)
    with pytest.raises(DefinitionError, match=message) as raised:
        dataset_names(tmp_path)
    assert str(path) in str(raised.value)
    assert "mylog" not in dataset_names(tmp_path, skip_broken=True)  # Dagster's code location skips it


def test_a_home_definition_cannot_take_a_built_in_name(tmp_path: Path) -> None:
    write_definition(tmp_path, DatasetDefinition(name="synthetic", markets=["zh-CN"]))
    with pytest.raises(DefinitionError, match="'synthetic' is a built-in data set"):
        dataset_names(tmp_path)


def test_an_xc_folder_path_is_defined_in_the_home_by_its_folder_name_once(tmp_path: Path) -> None:
    from tests.datasets.test_xc_repo import plain_folder

    folder = plain_folder(tmp_path / "LF-Toy 1")
    home = tmp_path / "home"
    assert resolve_dataset(str(folder), home, define=False) == "LF-Toy-1"
    assert not definition_path(home, "LF-Toy-1").exists()
    assert resolve_dataset(str(folder), home) == "LF-Toy-1"
    assert read_definition(definition_path(home, "LF-Toy-1")).path == str(folder.resolve())
    assert resolve_dataset("LF-Toy-1", home) == "LF-Toy-1" and build_dataset("LF-Toy-1", home).n_labels == 3
    (tmp_path / "elsewhere").mkdir()
    other = plain_folder(tmp_path / "elsewhere" / "LF-Toy 1")
    with pytest.raises(DefinitionError, match="taken by another data set"):
        resolve_dataset(str(other), home)


# -- event-log definitions ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def log_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home holding the zh-CN log, ingested with its market allowed."""
    home = tmp_path_factory.mktemp("own-log")
    log = own_log(home / "mylog.parquet")
    done = xc("ingest", "--source", "events", str(log), "--markets", "zh-CN", home=home)
    assert done.returncode == 0, done.stderr
    return home


def test_xc_dataset_from_events_saves_the_definition_only_once_it_builds(log_home: Path) -> None:
    done = xc("dataset", "--name", "mylog", "--from-events", "--markets", "zh-CN", "--test-days", "3",
              "--description", "our zh-CN log", home=log_home)
    assert done.returncode == 0, done.stderr
    summary = last_json(done)
    assert summary["definition"] == str(definition_path(log_home, "mylog"))
    assert summary["test_documents"] > 0 and summary["train_documents"] > 0 and summary["labels"] == 10
    definition = read_definition(definition_path(log_home, "mylog"))
    assert (definition.markets, definition.test_days, definition.description) == (["zh-CN"], 3, "our zh-CN log")
    # every later command takes the name; a rebuild from the file gives the same data set
    again = xc("dataset", "--dataset", "mylog", home=log_home)
    assert again.returncode == 0 and last_json(again)["test_pairs"] == summary["test_pairs"]


@pytest.mark.parametrize(("options", "message"), [
    (["--markets", "fr-FR"], "no events of data set broken (markets fr-FR; the store holds zh-CN ("),
    (["--test-days", "60"], "the events span less than test_days = 60 days"),
    (["--split", "2027-01-01"], "split 2027-01-01 00:00:00+00:00 leaves no train or no test period"),
    (["--label", "host"], "have no 'host' key"),
    (["--min-clicks", "100000"], "no click of a label with ≥ 100000 clicks"),
])
def test_a_definition_that_selects_nothing_is_one_line_and_writes_nothing(log_home: Path, options: list[str],
                                                                          message: str,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # the first case as a user's shell runs it (nothing but the line on stderr); the others in this process
    args = ("dataset", "--name", "broken", "--from-events", *options)
    done = xc(*args, home=log_home) if "fr-FR" in options else xc_in_process(*args, home=log_home, capsys=capsys)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not definition_path(log_home, "broken").exists()
    assert not (log_home / "datasets" / "broken").exists() and not (log_home / "graphs" / "broken").exists()


def test_the_host_of_a_url_item_id_is_a_label_key(tmp_path: Path) -> None:
    ingest([Source("events", own_log(tmp_path / "urls.parquet", days=8, market="en-US", item_url=True))], tmp_path,
           progress=False)
    definition = DatasetDefinition(name="hosts", markets=["en-US"], test_days=2, label="host")
    from xc_core.datasets.registry import spec_from_definition

    data = build_dataset("hosts", tmp_path, spec=spec_from_definition(definition))
    assert sorted(data.label_ids) == sorted(f"{item.split('-')[1]}-shop{item[-1]}.cn" for items in INTENTS.values()
                                            for item in items)
    assert data.label_texts[data.label_ids.index("shoes-shop1.cn")] == "shoes shop1"  # the host's words


def test_aol_1000_through_the_generic_path_is_the_built_in_data_set(aol_slice: Path,
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Export the ingested aol slice as canonical events, ingest them as any log, define the aol-1000 protocol
    by hand: the same data set as the built-in one."""
    from xc_core.logs.schema import INPUT_SCHEMA

    builtin_home, generic_home = tmp_path_factory.mktemp("builtin"), tmp_path_factory.mktemp("generic")
    ingest([Source("aol", aol_slice)], builtin_home, progress=False)
    builtin = build_dataset("aol-1000", builtin_home)
    export = generic_home / "aol-events.parquet"
    EventStore(builtin_home).scan().select(list(INPUT_SCHEMA)).collect().write_parquet(export)
    done = xc("ingest", "--source", "events", str(export), home=generic_home)
    assert done.returncode == 0, done.stderr
    done = xc("dataset", "--name", "my-aol", "--from-events", "--markets", "en-US", "--split", "2006-05-01",
              "--psp-a", "0.55", "--psp-b", "1.5", home=generic_home)
    assert done.returncode == 0, done.stderr
    generic = build_dataset("my-aol", generic_home)
    assert_same_dataset(builtin, generic, meta=False)
    ignore = ("protocol", "graphs_dir")
    assert {k: v for k, v in builtin.meta.items() if k not in ignore} == \
        {k: v for k, v in generic.meta.items() if k not in ignore}


def test_a_log_in_a_new_market_goes_define_run_predict_through_dagster(log_home: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The user's path end to end: ingested (above) → defined → `xc run` (Dagster, in-process) → `xc predict`
    answered by the champion from the same home's store. The commands run through the CLI's ``main`` in this process
    (a subprocess `xc dataset` is above, `xc predict` in tests/test_run.py)."""
    xc = functools.partial(xc_in_process, capsys=capsys)

    done = xc("dataset", "--name", "runlog", "--from-events", "--markets", "zh-CN", "--test-days", "3", home=log_home)
    assert done.returncode == 0, done.stderr
    done = xc("run", "--dataset", "runlog", "--profile", "tiny", "--methods", "pretrained", "--json", home=log_home)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = last_json(done)
    assert summary["dataset"] == "runlog" and summary["champion"]["method"] == "pretrained"
    assert (log_home / "dagster").exists() or summary["run_id"]  # a real Dagster run
    answer = xc("predict", "跑步鞋 推荐", "--dataset", "runlog", home=log_home)
    assert answer.returncode == 0, answer.stderr
    labels = [row["label_id"] for row in last_json(answer)["labels"]]
    assert labels and set(labels) <= {item for items in INTENTS.values() for item in items}


def test_an_xc_folder_goes_run_predict_through_dagster_by_its_path(log_home: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """An XC-repository folder (here the zh-CN log's data set written in that format) is run by its path and
    then served by its folder name: `xc run --dataset PATH` (Dagster, in-process) → `xc predict --dataset NAME`,
    through the CLI's ``main`` in this process."""
    from xc_core.datasets.xc_repo import write_xc_repo

    xc = functools.partial(xc_in_process, capsys=capsys)

    done = xc("dataset", "--name", "folderlog", "--from-events", "--markets", "zh-CN", "--test-days", "3",
              home=log_home)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "LF-MyLog"
    write_xc_repo(build_dataset("folderlog", log_home), folder)
    done = xc("run", "--dataset", str(folder), "--profile", "tiny", "--methods", "pretrained", "--json",
              home=log_home)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = last_json(done)
    assert summary["dataset"] == "LF-MyLog" and summary["champion"]["method"] == "pretrained"
    assert read_definition(definition_path(log_home, "LF-MyLog")).path == str(folder.resolve())
    answer = xc("predict", "跑步鞋 推荐", "--dataset", "LF-MyLog", home=log_home)
    assert answer.returncode == 0, answer.stderr
    labels = [row["label_id"] for row in last_json(answer)["labels"]]
    assert labels and set(labels) <= {item for items in INTENTS.values() for item in items}


def test_an_xc_folder_whose_anchor_text_equals_a_test_document_builds_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A category called "green" and a test headword "green" are different nodes of a folder: counted, not fatal."""
    from tests.datasets.test_xc_repo import plain_folder
    from xc_core.stages.dataset import materialize_dataset

    folder = plain_folder(tmp_path / "LF-Cats", **{"tst_X.txt": "green\n"})
    (folder / "anchors" / "categories").mkdir(parents=True)
    (folder / "anchors" / "categories" / "anchors.txt").write_text("green\ncolours\n")
    (folder / "anchors" / "categories" / "doc_edges.txt").write_text("0 0\n1 1\n")
    (folder / "anchors" / "categories" / "label_edges.txt").write_text("2 0\n")
    with caplog.at_level("WARNING"):
        dataset, summary = materialize_dataset(str(folder), tmp_path / "home")
    assert summary["leaked_test_nodes"] == 1 and dataset.anchor_sets["categories"].texts == ["green", "colours"]
    assert "1 anchor texts equal the text of a test-only document" in caplog.text


def test_the_code_location_shows_each_home_definition_as_its_own_group(tmp_path: Path) -> None:
    """Dagster's definitions, loaded for a home (``XC_HOME``), hold one asset group per data set defined there —
    no code edited; an unreadable definition is left out, not a broken code location."""
    import os

    from tests.datasets.test_xc_repo import plain_folder

    write_definition(tmp_path, DatasetDefinition(name="mylog", markets=["zh-CN"]))
    write_definition(tmp_path, DatasetDefinition(name="lf-toy", kind="xc-folder",
                                                 path=str(plain_folder(tmp_path / "LF-Toy"))))
    (tmp_path / "datasets" / "broken.yaml").write_text("lable: host\n")
    code = ("from xc_assets.definitions import defs\n"
            "groups = {k.path[0] for k in defs.resolve_all_asset_keys() if len(k.path) > 1}\n"
            "import json; print(json.dumps(sorted(groups)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "XC_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    groups = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"mylog", "lf_toy", "synthetic", "aol_1000", "wikispeedia", "xc_repo"} <= set(groups)
    assert "broken" not in groups and "broken.yaml" in done.stderr  # the warning names the file
