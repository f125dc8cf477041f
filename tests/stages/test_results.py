"""The results job on ``tiny``: RESULTS.md + results.json with the provenance header, one row per method with its
95% CI and the commits its model was trained and evaluated at, measured costs with ratios to the cost reference, one
MLflow run holding both files. The job goes through Dagster: each method partition's steps are materializations on
the home's instance, the data set's tables are the ``<data set>/results`` asset and the page ``results_page``; a
second run finds everything current and trains nothing, a method whose code changed is retrained (and only it),
and an unknown method is refused before anything is written. The costs' own rules on hand-made records."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

METHODS = ["pretrained", "dual_encoder", "ramen"]
HEADER_FIELDS = ("command", "git commit", "profile", "machine", "date")
COMMIT = r"([0-9a-f]{40}( \(with uncommitted changes\))?|unknown)"  # a recorded git_commit


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One results run on a fresh tiny home: the data lineage, three trainings, evaluations, A/B tests, costs."""
    from xc_assets.results import run_results

    root = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DAGSTER_HOME", raising=False)  # the job's instance lives under its home
        summary = run_results(root / "home", "tiny", ["synthetic"], METHODS, out=root / "out", ab_queries=300,
                              timed_queries=64)
        yield {"home": root / "home", "root": root, **summary}


@pytest.fixture
def own_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)


def _section(page: str, title: str) -> str:
    """The markdown of one ``###`` section (its title line up to the next heading)."""
    start = page.index(f"### {title}")
    end = page.find("\n#", start + 1)
    return page[start:end if end > 0 else None]


def test_run_results_writes_the_page_with_its_header_a_ci_row_per_method_and_the_json(
        tiny_results: dict[str, Any]) -> None:
    from xc_core.paths import eval_dir, model_dir

    home, page = tiny_results["home"], Path(tiny_results["results"]).read_text()
    assert Path(tiny_results["results"]) == tiny_results["root"] / "out" / "RESULTS.md"
    for name in HEADER_FIELDS:
        assert re.search(rf"^\| {name} \| \S.*\|$", page, re.MULTILINE), name
    assert re.search(r"^\| git commit \| ([0-9a-f]{40}|unknown)", page, re.MULTILINE)
    assert "| profile | tiny |" in page and "xc results --profile tiny --datasets synthetic" in page
    metrics = _section(page, "Test-split metrics")
    ci = r"\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\]"
    for method in METHODS:
        commits = r"[0-9a-f]{7}\+? / [0-9a-f]{7}\+?"  # trained / evaluated at
        assert re.search(rf"^\| {method} \| {ci} \| {ci} \| {ci} \| {ci} \| {ci} \| {commits} \|$", metrics,
                         re.MULTILINE), method
    # paired against the references: ramen − dual_encoder once (not both signs), every method − pretrained
    paired = _section(page, "Paired differences")
    assert re.search(r"^\| ramen \| dual_encoder \| [+-]\d+\.\d\d \[", paired, re.MULTILINE)
    assert "| dual_encoder | ramen |" not in paired and "| pretrained | ramen |" not in paired
    assert "### Simulated A/B tests" in page and "| ramen | dual_encoder |" in _section(page, "Simulated A/B tests")
    saved = json.loads(Path(tiny_results["json"]).read_text())
    [synthetic] = saved["datasets"]
    assert [m["method"] for m in synthetic["methods"]] == METHODS
    # a fresh home: every method's every step ran, and says why
    ran = tiny_results["ran"]["synthetic"]["seed 0"]
    assert {m: r["steps"] for m, r in ran.items()} == {
        m: ["encoder", "label_index", "offline_eval", "ab_vs_control"] for m in METHODS}
    assert all(r["why"] == "training: not trained in this home" for r in ran.values())
    for row in synthetic["methods"]:
        value, low, high = row["P@1"]
        assert low <= value <= high
        # the commits the row's model and evaluation recorded
        trained = json.loads((model_dir(home, "synthetic", row["method"], "tiny") / "train_summary.json").read_text())
        evaluated = json.loads((eval_dir(home, "synthetic", row["method"], "tiny") / "metrics.json").read_text())
        assert row["commits"] == {"training": trained["git_commit"], "evaluation": evaluated["git_commit"]}
        assert re.fullmatch(COMMIT, trained["git_commit"]) and re.fullmatch(COMMIT, evaluated["git_commit"])
        short = [c[:7] + ("+" if c.endswith("(with uncommitted changes)") else "") for c in row["commits"].values()]
        assert re.search(rf"^\| {row['method']} \| .* \| {re.escape(' / '.join(short))} \|$", metrics, re.MULTILINE)
    assert saved["header"]["profile"] == "tiny" and saved["header"]["machine"]["cores"] >= 1
    assert saved["header"]["machine"]["cpu_capability"] in saved["header"]["machine"]["text"]
    # the headline (the README's table): P@1 with its interval and PSP@1, the same numbers as the JSON
    top = page[page.index("## Headline"):page.index("## synthetic")]
    assert "| method | synthetic P@1 | synthetic PSP@1 |" in top
    for row in synthetic["methods"]:
        p1, psp1 = row["P@1"], row["PSP@1"]
        cells = f"| {100 * p1[0]:.2f} [{100 * p1[1]:.2f}, {100 * p1[2]:.2f}] | {100 * psp1[0]:.2f} |"
        assert f"| {row['method']} {cells}" in top, row["method"]


def test_every_step_is_a_dagster_materialization_stamped_with_its_code_version(tiny_results: dict[str, Any]) -> None:
    """What the job ran is in the home's Dagster instance, each record naming the home, profile, seed and the code
    version of what it ran — what the next run compares."""
    import dagster as dg

    from xc_assets.defs.freshness import latest, lineage, lineage_code_version
    from xc_core.methods.versions import method_code_version
    from xc_core.provenance import home_key

    home = tiny_results["home"]
    instance = dg.DagsterInstance.local_temp(tempdir=str(home / "dagster"))
    anchors = lineage(instance, "synthetic", home)
    assert anchors is not None and anchors.metadata["code_version"] == lineage_code_version()
    for method in METHODS:
        model = latest(instance, ["synthetic", "encoder"], method, home=home_key(home), profile="tiny", seed=0)
        assert model is not None and model.metadata["lineage"] == anchors.storage_id
        assert model.metadata["code_version"] == method_code_version(method, "train")
        evaluation = latest(instance, ["synthetic", "offline_eval"], method, home=home_key(home), profile="tiny")
        assert evaluation is not None and evaluation.metadata["mlflow_run_id"] == model.metadata["mlflow_run_id"]
    assert method_code_version("ramen", "train") != method_code_version("dual_encoder", "train")
    page = latest(instance, ["results_page"])
    assert page is not None and page.metadata["results"] == tiny_results["results"]


def test_costs_are_measured_for_every_method_and_the_reference_is_its_own_unit(tiny_results: dict[str, Any]) -> None:
    [synthetic] = tiny_results["datasets"]
    costs = {c["method"]: c for c in synthetic["costs"]}
    assert list(costs) == METHODS
    assert costs["ramen"]["ratios"] == {"train": 1.0, "predict": 1.0, "size": 1.0}
    assert costs["pretrained"]["seconds_per_epoch"] is None and costs["pretrained"]["ratios"]["train"] is None
    for c in costs.values():
        assert c["ms_per_query"] > 0 and c["timed_queries"] == 64
        assert c["parameters"] > 0 and c["parameters_from"] == "encoder"
        assert c["split_ms"]["search"] > 0 and c["split_ms"]["encoder"] > 0  # the index stage timed both
    page = Path(tiny_results["results"]).read_text()
    table = _section(page, "Costs (RAMEN Table 5)")
    assert re.search(r"^\| pretrained \| \d+\.\d \| 0 \| n/a \| n/a \|", table, re.MULTILINE)
    assert re.search(r"^\| ramen \| \d+\.\d \| 2 \| \d+\.\d \| 1\.00 \| .* \| 1\.00 \| [\d,]+ \| encoder \| 1\.00 \|$",
                     table, re.MULTILINE)


def test_one_mlflow_run_of_xc_results_holds_the_page_and_the_json(tiny_results: dict[str, Any]) -> None:
    import mlflow

    from xc_core.tracking.store import tracking_uri

    client = mlflow.MlflowClient(tracking_uri(tiny_results["home"]))
    experiment = client.get_experiment_by_name("xc-results")
    assert experiment is not None
    run = client.get_run(tiny_results["header"]["mlflow_run_id"])
    assert run.info.experiment_id == experiment.experiment_id and run.info.run_name == "results/tiny"
    assert run.data.tags["profile"] == "tiny" and run.data.metrics["synthetic/ramen/P_at_1"] > 0
    assert {a.path for a in client.list_artifacts(run.info.run_id, "results")} == {"results/RESULTS.md",
                                                                                  "results/results.json"}
    logged = Path(client.download_artifacts(run.info.run_id, "results/RESULTS.md"))
    assert logged.read_text() == Path(tiny_results["results"]).read_text()
    assert f"run {run.info.run_id} of experiment xc-results" in logged.read_text()


def test_the_dagster_job_and_the_cli_find_everything_current_and_write_the_same_tables(
        tiny_results: dict[str, Any], own_instance: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import dagster as dg

    from xc_assets.cli import main
    from xc_assets.definitions import defs

    home, root = tiny_results["home"], tiny_results["root"]
    monkeypatch.setenv("XC_HOME", str(home))  # the job's xc_home resource
    tables = {"profile": "tiny", "methods": METHODS, "timed_queries": 16}
    page = {"profile": "tiny", "datasets": ["synthetic"], "methods": METHODS, "out": str(root / "dagster")}
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def("results").execute_in_process(
            instance=instance, asset_selection=[dg.AssetKey(["synthetic", "results"]), dg.AssetKey("results_page")],
            run_config={"ops": {"synthetic__results": {"config": tables}, "results_page": {"config": page}}})
    assert result.success
    first = Path(tiny_results["results"]).read_text()
    by_job = (root / "dagster" / "RESULTS.md").read_text()
    assert "dagster asset results_page (run " in by_job
    for title in ("Test-split metrics", "Paired differences"):  # the same records: the same numbers
        assert _section(by_job, title) == _section(first, title)

    assert main(["results", "--profile", "tiny", "--datasets", "synthetic", "--methods", ",".join(METHODS),
                 "--home", str(home), "--out", str(root / "cli"), "--quiet", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["ran"] == {"synthetic": {}}  # nothing stale: no training, evaluation or A/B test ran
    for title in ("Test-split metrics", "Paired differences", "Simulated A/B tests"):
        assert _section((root / "cli" / "RESULTS.md").read_text(), title) == _section(first, title)
    # a kept row keeps the commits its model and evaluation were made at
    kept = again["datasets"][0]["methods"]
    assert [m["commits"] for m in kept] == [m["commits"] for m in tiny_results["datasets"][0]["methods"]]
    assert main(["results", "--profile", "tiny", "--datasets", "synthetic", "--methods", ",".join(METHODS),
                 "--home", str(home), "--out", str(root / "cli"), "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "synthetic:" and lines[1].split()[:2] == ["method", "P@1"]
    assert [line.split()[0] for line in lines[2:5]] == METHODS
    assert lines[-1].startswith(f"results: {root / 'cli' / 'RESULTS.md'} ")

    # the UI's refresh_results_job is `xc results`: on the home's instance it finds everything current too
    refresh = {"profile": "tiny", "datasets": ["synthetic"], "methods": METHODS, "out": str(root / "ui"),
               "timed_queries": 16}
    with dg.DagsterInstance.local_temp(tempdir=str(home / "dagster")) as home_instance:
        refreshed = defs.resolve_job_def("refresh_results_job").execute_in_process(
            instance=home_instance, run_config={"ops": {"refresh_results": {"config": refresh}}})
    assert refreshed.success and refreshed.output_for_node("refresh_results") == {"synthetic": {}}
    assert _section((root / "ui" / "RESULTS.md").read_text(), "Test-split metrics") == _section(
        first, "Test-split metrics")


def test_more_seeds_add_a_table_over_seeds_each_trained_in_its_own_home(tiny_results: dict[str, Any],
                                                                        own_instance: None) -> None:
    from xc_assets.results import run_results

    home, root = tiny_results["home"], tiny_results["root"]
    summary = run_results(home, "tiny", ["synthetic"], ["pretrained", "dual_encoder"], seeds=(0, 1),
                          out=root / "seeds", abtests=False, timed_queries=16)
    assert set(summary["ran"]["synthetic"]) == {"seed 1"}  # seed 0 is the home's, current
    [synthetic] = summary["datasets"]
    first = {m["method"]: m for m in tiny_results["datasets"][0]["methods"]}
    for row in synthetic["seeds"]:
        assert row["seeds"] == [0, 1] and len(row["P@1"]["values"]) == 2
        assert row["P@1"]["values"][0] == pytest.approx(first[row["method"]]["P@1"][0])  # seed 0: the home's model
    seed_home = home / "seeds" / "s1"
    trained = json.loads((seed_home / "models" / "synthetic" / "dual_encoder-tiny" / "train_summary.json").read_text())
    assert trained["seed"] == 1
    # the seed home reads the same data lineage (TextGNN's relevance head finds the world there) but keeps its own
    # models and MLflow store
    from xc_core.methods.textgnn import ground_truth

    world, own = ground_truth("synthetic", seed_home), ground_truth("synthetic", home)
    assert world is not None and own is not None and world.config == own.config
    assert (seed_home / "anchor_sets").resolve() == (home / "anchor_sets").resolve()
    assert not (seed_home / "models").is_symlink() and not (seed_home / "mlflow").is_symlink()
    page = Path(summary["results"]).read_text()
    assert "| seeds | 0, 1 |" in page and "--seeds 0,1" in page
    assert re.search(r"^\| dual_encoder \| \d+\.\d\d ± \d+\.\d\d \|", _section(page, "Over seeds 0, 1"),
                     re.MULTILINE)


def test_a_method_whose_code_changed_is_retrained_and_only_it(
        tiny_results: dict[str, Any], own_instance: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pretrained``'s code is pointed at a module of this test's (as if its registering module were edited):
    the next results run retrains and re-evaluates pretrained, and re-runs the A/B tests that served it, while the
    other methods' models stay; editing the module again makes it stale again."""
    from xc_assets.results import run_results
    from xc_core.methods.base import REGISTERED_IN
    from xc_core.methods.versions import method_code_version

    module = tmp_path / "xc_edited_method.py"
    module.write_text("# the registering module of a method\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("xc_edited_method")
    monkeypatch.setitem(REGISTERED_IN, "pretrained", "xc_edited_method")
    before = method_code_version("pretrained", "train")
    home, root = tiny_results["home"], tiny_results["root"]
    summary = run_results(home, "tiny", ["synthetic"], METHODS, out=root / "edited", ab_queries=300,
                          timed_queries=16)
    ran = summary["ran"]["synthetic"]["seed 0"]
    assert ran["pretrained"]["steps"] == ["encoder", "label_index", "offline_eval", "ab_vs_control"]
    assert ran["pretrained"]["why"].startswith("training: code_version")
    assert ran["dual_encoder"]["steps"] == ["ab_vs_control"]  # its A/B control was retrained
    assert ran["ramen"]["steps"] == ["ab_vs_control"] and "retrained" in ran["ramen"]["why"]
    rows = {m["method"]: m for m in summary["datasets"][0]["methods"]}
    kept = {m["method"]: m for m in tiny_results["datasets"][0]["methods"]}
    assert rows["ramen"]["mlflow_run_id"] == kept["ramen"]["mlflow_run_id"]
    assert rows["pretrained"]["mlflow_run_id"] != kept["pretrained"]["mlflow_run_id"]

    module.write_text("# the registering module of a method, edited\n")
    assert method_code_version("pretrained", "train") != before
    again = run_results(home, "tiny", ["synthetic"], ["pretrained"], out=root / "edited-again", abtests=False,
                        timed_queries=16)
    assert list(again["ran"]["synthetic"]["seed 0"]) == ["pretrained"]
    sys.modules.pop("xc_edited_method", None)


def test_an_unknown_method_is_refused_before_anything_is_built_or_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_assets.cli import main
    from xc_assets.results import run_results
    from xc_core.stages.results import UnknownMethodError

    home, out = tmp_path / "home", tmp_path / "out"
    with pytest.raises(UnknownMethodError, match=r"unknown method\(s\) no_such_method: .*ramen"):
        run_results(home, "tiny", ["synthetic"], ["pretrained", "no_such_method"], out=out)
    assert not home.exists() and not out.exists()
    assert main(["results", "--profile", "tiny", "--datasets", "synthetic", "--methods", "no_such_method",
                 "--home", str(home), "--out", str(out)]) == 2
    assert "xc results: error: unknown method(s) no_such_method" in capsys.readouterr().err
    assert not home.exists() and not out.exists()
    with pytest.raises(LookupError, match="unknown data set 'no_such_set'"):
        run_results(home, "tiny", ["no_such_set"], ["pretrained"], out=out)
    assert not out.exists()


def test_the_page_needs_every_record_and_says_which_are_missing(tmp_path: Path) -> None:
    from xc_core.stages.results import MissingRecordError, load_records

    with pytest.raises(MissingRecordError, match=r"pretrained \(not trained\).*xc results --profile tiny"):
        load_records(tmp_path, "synthetic", "tiny", ("pretrained",))


def test_the_default_methods_are_registered() -> None:
    from xc_core.methods import result_methods
    from xc_core.stages.results import validate_methods

    assert validate_methods(result_methods()) == tuple(result_methods())


# ---- the costs' rules on hand-made records (xc_core/evaluation/costs.py) -----------------------------------------

def test_train_cost_reads_seconds_per_epoch_else_divides_and_says_none_without_epochs() -> None:
    from xc_core.evaluation.costs import train_cost

    assert train_cost({"epochs": 0, "seconds": 3.0}) == (3.0, 0, None)  # pretrained: n/a
    assert train_cost({"epochs": 4, "seconds": 10.0}) == (10.0, 4, 2.5)
    assert train_cost({"epochs": 4, "train_seconds": 8.0, "seconds": 10.0}) == (8.0, 4, 2.0)  # the method's own
    assert train_cost({"epochs": 4, "train_seconds": 8.0, "seconds_per_epoch": 1.5}) == (8.0, 4, 1.5)
    assert train_cost({"epochs": 2, "seconds": 1.0}, base_seconds=5.0) == (6.0, 2, 3.0)  # + the reused encoder's
    assert train_cost({"seconds": 2.0, "history": [{"epoch": 1}, {"epoch": 2}]}) == (2.0, 2, 1.0)  # IRENE: no key


def test_the_run_a_model_builds_on_is_named_by_either_key() -> None:
    from xc_core.evaluation.costs import base_run

    assert base_run({"encoder_from_run": "r1"}) == "r1" and base_run({"depends_on_run_id": "r2"}) == "r2"
    assert base_run({"depends_on_run_id": None}) is None and base_run({}) is None


def test_recorded_inference_splits_are_read_and_the_ann_search_stands_for_search() -> None:
    from xc_core.evaluation.costs import inference_split

    assert inference_split({"ms_per_query": 0.2}) == {"search": 0.2}
    recorded = {"encoder_ms_per_query": 1.0, "graph_ms_per_query": 0.5, "search_ms_per_query": 0.1,
                "ms_per_query": 0.2}
    assert inference_split(recorded) == {"encoder": 1.0, "graph": 0.5, "search": 0.1}


def test_parameters_are_the_recorded_count_else_counted_from_the_served_weights(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    from xc_core.evaluation.costs import count_parameters, parameter_count

    encoder = tmp_path / "encoder"
    encoder.mkdir()
    save_file({"a": np.zeros((3, 4), dtype=np.float32), "b": np.zeros(5, dtype=np.float16)},
              str(encoder / "model.safetensors"))
    np.save(tmp_path / "weights.npy", np.zeros((7, 2), dtype=np.float32))
    assert count_parameters([encoder, tmp_path / "weights.npy"]) == 12 + 5 + 14
    served = {"encoder": encoder, "classifier W": tmp_path / "weights.npy", "missing": tmp_path / "none.npy"}
    assert parameter_count({}, served) == (31, "encoder + classifier W")
    assert parameter_count({"parameters": 1234}, served) == (1234, "recorded")
    assert parameter_count({}, {"missing": tmp_path / "none.npy"}) == (None, "")


def test_ratios_divide_by_the_reference_on_the_same_data_set_and_are_none_without_one() -> None:
    from xc_core.evaluation.costs import MethodCost, with_ratios

    rows = with_ratios([
        MethodCost("ramen", "a", seconds_per_epoch=2.0, ms_per_query=1.0, parameters=100),
        MethodCost("oak", "a", seconds_per_epoch=3.0, ms_per_query=2.0, parameters=350),
        MethodCost("pretrained", "a", seconds_per_epoch=None, ms_per_query=0.5, parameters=100),
        MethodCost("oak", "b", seconds_per_epoch=3.0, ms_per_query=2.0, parameters=350)], reference="ramen")
    assert [r.ratios for r in rows] == [
        {"train": 1.0, "predict": 1.0, "size": 1.0}, {"train": 1.5, "predict": 2.0, "size": 3.5},
        {"train": None, "predict": 0.5, "size": 1.0}, {"train": None, "predict": None, "size": None}]


def test_the_page_lists_every_learned_choice_against_its_fallback() -> None:
    """A -clf model's three fusion tests and its encoder's epoch test become rows, served or not, with the reason."""
    from xc_core.evaluation.fallback import fallback_rows
    from xc_core.stages.results_page import DatasetResults, _dataset_section

    kept = {"choice": "fusion alpha", "kept": True, "metric": "P@1", "gain": 0.05, "low": 0.02, "high": 0.08,
            "candidate": {"alpha": 0.3, "lexical_weight": 0.0}, "tested_on_rows": 500, "reason": "served"}
    rejected = {**kept, "choice": "lexical weight", "kept": False, "low": -0.01, "reason": "not above 0"}
    epoch = {**kept, "choice": "trained epoch", "kept": False, "metric": "R@10", "candidate": {"epoch": 3}}
    summary = {"fallback_tests": {"alpha": kept, "lexical": rejected}, "epoch_fallback_test": epoch}
    rows = fallback_rows("dual_encoder-clf", summary)
    assert [(r["choice"], r["kept"]) for r in rows] == [("trained epoch", False), ("fusion alpha", True),
                                                       ("lexical weight", False)]
    assert fallback_rows("pretrained", {"epochs": 0}) == []
    page = "\n".join(_dataset_section(DatasetResults("d", {}, fallbacks=rows)))
    assert "Learned choices against their do-nothing fallback" in page
    row = "| dual_encoder-clf | fusion alpha | alpha 0.3, lexical_weight 0.0 | candidate | P@1 | +5.00 [+2.00, +8.00] |"
    assert row in page


def test_the_page_sets_the_graph_worth_check_beside_the_measured_graph_gain(tiny_results: dict[str, Any]) -> None:
    """Issue #43: the check's table (one row per anchor set, with a verdict) and ramen − dual_encoder on the test
    split, on all queries and the tail half; ramen's record names the encoder it serves."""
    import json

    from xc_core.graphs.worth import VERDICTS
    from xc_core.paths import model_dir

    page = Path(tiny_results["results"]).read_text()
    section = _section(page, "Will this graph help?")
    [synthetic] = tiny_results["datasets"]
    table = synthetic["graph_worth"]["table"]
    assert {row["anchor set"] for row in table} == {"cosession_queries", "click_graph", "coclick_items"}
    assert all(row["verdict"] in VERDICTS and f"| {row['anchor set']} | {row['verdict']} |" in section for row in table)
    gains = {g["subset"]: g for g in synthetic["graph_gain"] if g["method"] == "ramen" and g["vs"] == "dual_encoder"}
    assert gains["all"]["rows"] == synthetic["summary"]["test_documents"] and "tail half (deciles 5–9)" in gains
    record = json.loads((model_dir(tiny_results["home"], "synthetic", "ramen", "tiny") / "train_summary.json")
                        .read_text())
    served, test = record["served_encoder"], record["text_only_fallback_test"]
    assert served in ("ramen", "dual_encoder") and f"ramen → {served}" in section
    assert test["kept"] is (served == "ramen") and test["tested_on_rows"] > 0
    if served == "dual_encoder":  # the text-only encoder itself is served, byte for byte
        text_only = json.loads((model_dir(tiny_results["home"], "synthetic", "dual_encoder", "tiny") /
                                "train_summary.json").read_text())
        weights = [(Path(r["encoder_dir"]) / "model.safetensors").read_bytes() for r in (record, text_only)]
        assert weights[0] == weights[1]


def test_a_model_retrained_after_the_results_run_is_never_paired_with_the_old_evaluation(
        tiny_results: dict[str, Any], tmp_path: Path) -> None:
    """Issue #44: `xc train` with an override after a results run leaves an evaluation of the previous run beside
    the new model; the page refuses in one line, naming the method and the command that scores the new model."""
    import shutil

    from xc_assets.cli import main
    from xc_core.datasets.container import XCDataset
    from xc_core.paths import anchors_dir
    from xc_core.stages.results import MixedRecordError, dataset_results

    home = Path(shutil.copytree(tiny_results["home"], tmp_path / "home", symlinks=True))
    assert main(["train", "--dataset", "synthetic", "--method", "pretrained", "--profile", "tiny", "--home", str(home),
                 "--quiet", "--set", "batch_size=8"]) == 0
    with pytest.raises(MixedRecordError, match=r"pretrained \(its evaluation scored run \w{8}, the model on disk is "
                                               r"run \w{8}\).*xc eval"):
        dataset_results(XCDataset.load(anchors_dir(home, "synthetic")), home, "tiny", tuple(METHODS), abtests=False)
