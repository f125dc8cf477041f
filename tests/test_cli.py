"""The ``xc`` CLI prints exactly one JSON line per command (``run``/``promote``: a table, JSON with ``--json``),
naming the data set the same way in every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xc_core.datasets.container import XCDataset


def test_xc_ingest_prints_one_json_summary(aol_slice: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "xc_core.cli", "ingest", "--source", "aol", str(aol_slice),
                           "--home", str(tmp_path)], capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert {"query_events", "clicks", "read", "accepted", "rejected", "reasons", "seconds"} <= set(summary)
    assert summary["accepted"] + summary["rejected"] == summary["read"] == summary["query_events"] + summary["clicks"]


def test_xc_core_never_imports_dagster() -> None:
    code = ("import sys, pkgutil, importlib, xc_core\n"
            "for m in pkgutil.walk_packages(xc_core.__path__, 'xc_core.'): importlib.import_module(m.name)\n"
            "print('dagster' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_code_location_and_the_method_registry_load_without_torch() -> None:
    """Every Dagster step process, the code server and each `make` that lists the default methods load these; a
    method imports torch when it trains or scores, the A/B statistics scipy.stats when they test (~2 s and ~0.7 s
    a process: docs/results/issue-65.md)."""
    code = ("import sys, xc_core.methods, xc_assets.definitions\n"
            "print(sorted(m for m in ('torch', 'transformers', 'scipy.stats') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_no_xc_core_module_imports_dagster_or_xc_assets_even_inside_a_function() -> None:
    """Importing every module (above) misses a function-level import that runs later (``xc run`` did that):
    read every import statement and every ``importlib.import_module("...")`` string instead."""
    import ast

    import xc_core

    offenders = []
    for path in sorted(Path(xc_core.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                     if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" else [])
            offenders += [f"{path.name}:{getattr(node, 'lineno', 0)} {n}" for n in names
                          if n.split(".")[0] in {"dagster", "xc_assets"}]
    assert offenders == []


def test_xc_run_names_the_known_methods_when_given_an_unknown_one(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "xc_assets.cli", "run", "--methods", "ramen,ramen_v2",
                           "--home", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode != 0 and done.stdout == ""
    assert "unknown method(s) ramen_v2" in done.stderr and "auggt" in done.stderr and "'all'" in done.stderr
    assert not (tmp_path / "datasets").exists()  # refused before any stage ran


def test_every_registered_method_is_a_dagster_partition_headline_first() -> None:
    from xc_assets.defs.assets.model_assets import method_partitions
    from xc_core.methods import METHODS

    keys = method_partitions.get_partition_keys()
    assert keys[:3] == ["pretrained", "dual_encoder", "ramen"] and sorted(keys) == sorted(METHODS)


def test_min_lead_is_a_flag_of_xc_promote_and_xc_run_defaulting_to_no_threshold(
        capsys: pytest.CaptureFixture[str]) -> None:
    from xc_assets.cli import build_parser

    parser = build_parser()
    for command in ("promote", "run"):
        assert parser.parse_args([command]).min_lead == 0.0
        assert parser.parse_args([command, "--min-lead", "0.005"]).min_lead == 0.005
        with pytest.raises(SystemExit):  # a negative lead, or one given in points instead of a fraction
            parser.parse_args([command, "--min-lead", "-0.01"])
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--min-lead", "5"])
    assert "half a P@1 point" in capsys.readouterr().err


def test_an_unknown_data_set_is_one_line_naming_the_choices_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.cli import main

    expected = [
        "xc dataset: error: unknown data set 'mylog': use aol-1000, synthetic, wikispeedia, an XC-repository "
        "folder (a path to one with trn_X.txt, tst_X.txt, …), or define it: `xc dataset --name mylog "
        "--from-events --markets ...` (or `--from-xc-folder PATH`)"]
    # as a shell runs it: nothing but that line on stderr (no library noise, no traceback)
    done = subprocess.run([sys.executable, "-m", "xc_core.cli", "dataset", "--dataset", "mylog", "--home",
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.strip().splitlines() == expected
    # --name, the old spelling of dataset/anchors/graphs, says the same (in this process)
    capsys.readouterr()
    assert main(["dataset", "--name", "mylog", "--home", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == expected


def test_every_command_names_a_folder_data_set_by_its_name_not_the_path_it_was_given(
        tiny_data: XCDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.cli import main
    from xc_core.datasets.xc_repo import write_xc_repo

    folder = tmp_path / "shop-xc"
    write_xc_repo(tiny_data, folder)
    where = ["--dataset", str(folder), "--home", str(tmp_path / "home"), "--quiet"]
    for argv in (["dataset"], ["train", "--method", "pretrained", "--profile", "tiny"],
                 ["index", "--method", "pretrained", "--profile", "tiny"],  # printed the path before issue #15
                 ["eval", "--method", "pretrained", "--profile", "tiny"]):
        assert main([*argv, *where]) == 0
        assert json.loads(capsys.readouterr().out)["dataset"] == "shop-xc", argv



def test_a_negative_or_non_integer_seed_is_refused_before_the_home_is_touched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_assets.cli import main

    home = tmp_path / "home"
    for bad in ("-1", "one"):
        with pytest.raises(SystemExit) as stop:
            main(["run", "--dataset", "synthetic", "--profile", "tiny", "--home", str(home), "--seed", bad])
        assert stop.value.code == 2
        assert f"argument --seed: '{bad}' is not a seed: give a non-negative integer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["results", "--profile", "tiny", "--datasets", "synthetic", "--home", str(home), "--seeds", "0,-1"])
    assert stop.value.code == 2
    assert "argument --seeds: '0,-1': comma-separated non-negative integers" in capsys.readouterr().err
    assert not home.exists()
