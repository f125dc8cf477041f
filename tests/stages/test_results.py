"""The results stage on ``tiny``: RESULTS.md + results.json with the provenance header, one row per method with its
95% CI and the commits its model was trained and evaluated at, measured costs with ratios to ramen, one MLflow run
holding both files; the Dagster ``results`` job and ``xc results`` write the same tables from the same records; a
model or evaluation made by another code version is made anew; an unknown method is refused before anything is
written. The costs' own rules (train seconds per epoch, recorded splits, parameter counts) on hand-made records."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

METHODS = ["pretrained", "dual_encoder", "ramen"]
HEADER_FIELDS = ("command", "git commit", "profile", "machine", "date")
COMMIT = r"([0-9a-f]{40}( \(with uncommitted changes\))?|unknown)"  # a recorded git_commit


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One results run on a fresh tiny home: the data lineage, three trainings, evaluations, A/B tests, costs."""
    from xc_core.stages.results import run_results

    root = tmp_path_factory.mktemp("results")
    summary = run_results(root / "home", "tiny", ["synthetic"], METHODS, out=root / "out", ab_queries=300,
                          timed_queries=64)
    return {"home": root / "home", "root": root, **summary}


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
    for row in synthetic["methods"]:
        value, low, high = row["P@1"]
        assert low <= value <= high
        # the commits the row's model and evaluation recorded (with the code version they are reused by)
        trained = json.loads((model_dir(home, "synthetic", row["method"], "tiny") / "train_summary.json").read_text())
        evaluated = json.loads((eval_dir(home, "synthetic", row["method"], "tiny") / "metrics.json").read_text())
        assert row["commits"] == {"training": trained["git_commit"], "evaluation": evaluated["git_commit"]}
        assert re.fullmatch(COMMIT, trained["git_commit"]) and re.fullmatch(COMMIT, evaluated["git_commit"])
        assert len(trained["code_version"]) == 12 and len(evaluated["code_version"]) == 12
        assert row["reused"] == {"training": False, "evaluation": False}
        short = [c[:7] + ("+" if c.endswith("(with uncommitted changes)") else "") for c in row["commits"].values()]
        assert re.search(rf"^\| {row['method']} \| .* \| {re.escape(' / '.join(short))} \|$", metrics, re.MULTILINE)
    assert saved["header"]["profile"] == "tiny" and saved["header"]["machine"]["cores"] >= 1
    # the headline (the README's table): P@1 with its interval and PSP@1, the same numbers as the JSON
    top = page[page.index("## Headline"):page.index("## synthetic")]
    assert "| method | synthetic P@1 | synthetic PSP@1 |" in top
    for row in synthetic["methods"]:
        p1, psp1 = row["P@1"], row["PSP@1"]
        cells = f"| {100 * p1[0]:.2f} [{100 * p1[1]:.2f}, {100 * p1[2]:.2f}] | {100 * psp1[0]:.2f} |"
        assert f"| {row['method']} {cells}" in top, row["method"]


def test_costs_are_measured_for_every_method_and_ramen_is_its_own_unit(tiny_results: dict[str, Any]) -> None:
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


def test_the_dagster_job_and_the_cli_reuse_the_models_and_write_the_same_tables(
        tiny_results: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import dagster as dg

    from xc_assets.definitions import defs
    from xc_core.cli import main

    home, root = tiny_results["home"], tiny_results["root"]
    monkeypatch.setenv("XC_HOME", str(home))  # the job's xc_home resource
    config = {"profile": "tiny", "datasets": ["synthetic"], "methods": METHODS, "out": str(root / "dagster")}
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def("results").execute_in_process(
            instance=instance, run_config={"ops": {"write_results": {"config": config}}})
    assert result.success and result.output_for_node("write_results") == str(root / "dagster" / "RESULTS.md")
    first = Path(tiny_results["results"]).read_text()
    by_job = (root / "dagster" / "RESULTS.md").read_text()
    assert "dagster job results (run " in by_job
    for title in ("Test-split metrics", "Paired differences"):  # the same records: the same numbers
        assert _section(by_job, title) == _section(first, title)
    reused = json.loads((root / "dagster" / "results.json").read_text())["datasets"][0]["methods"]
    assert all(m["reused"] == {"training": True, "evaluation": True} for m in reused)
    # a reused row keeps the commits its model and evaluation were made at
    assert [m["commits"] for m in reused] == [m["commits"] for m in tiny_results["datasets"][0]["methods"]]

    assert main(["results", "--profile", "tiny", "--datasets", "synthetic", "--methods", ",".join(METHODS),
                 "--home", str(home), "--out", str(root / "cli"), "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "synthetic:" and lines[1].split()[:2] == ["method", "P@1"]
    assert [line.split()[0] for line in lines[2:5]] == METHODS
    assert lines[-1].startswith(f"results: {root / 'cli' / 'RESULTS.md'} ")
    assert _section((root / "cli" / "RESULTS.md").read_text(), "Test-split metrics") == _section(
        first, "Test-split metrics")


def test_more_seeds_add_a_table_over_seeds_each_trained_in_its_own_home(tiny_results: dict[str, Any]) -> None:
    from xc_core.stages.results import run_results

    home, root = tiny_results["home"], tiny_results["root"]
    summary = run_results(home, "tiny", ["synthetic"], ["pretrained", "dual_encoder"], seeds=(0, 1),
                          out=root / "seeds", abtests=False, timed_queries=16)
    [synthetic] = summary["datasets"]
    first = {m["method"]: m for m in tiny_results["datasets"][0]["methods"]}
    for row in synthetic["seeds"]:
        assert row["seeds"] == [0, 1] and len(row["P@1"]["values"]) == 2
        assert row["P@1"]["values"][0] == pytest.approx(first[row["method"]]["P@1"][0])  # seed 0: the home's model
    seed_home = home / "seeds" / "s1"
    assert (seed_home / "models" / "synthetic" / "dual_encoder-tiny" / "train_summary.json").exists()
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


def test_a_model_or_evaluation_of_another_code_version_is_made_anew_and_says_why(
        tiny_results: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    import mlflow

    from xc_core.paths import eval_dir, model_dir
    from xc_core.profiles import get_profile
    from xc_core.provenance import code_version
    from xc_core.stages.results import evaluate_or_reuse, prepare_data, train_or_reuse

    home, profile = tiny_results["home"], get_profile("tiny")
    data = prepare_data("synthetic", home, profile, anchors=False)
    model, reused = train_or_reuse(data, "pretrained", profile, home)
    assert reused and model.summary["code_version"] == code_version()
    tags = mlflow.MlflowClient(model.tracking_uri).get_run(model.mlflow_run_id).data.tags
    assert tags["code_version"] == code_version() and tags["git_commit"] == model.summary["git_commit"]

    summary = model_dir(home, "synthetic", "pretrained", "tiny") / "train_summary.json"
    summary.write_text(json.dumps({**model.summary, "code_version": "0123456789ab"}))
    with caplog.at_level("WARNING", logger="xc_core.stages.results"):
        retrained, reused = train_or_reuse(data, "pretrained", profile, home)
    assert not reused and retrained.mlflow_run_id != model.mlflow_run_id
    assert retrained.summary["code_version"] == code_version()
    assert "training tiny anew" in caplog.text and "0123456789ab" in caplog.text
    # the retrained model is evaluated anew, though the saved evaluation was made by the current code
    record, evaluation_reused = evaluate_or_reuse(data, retrained, home, model_reused=False)
    assert not evaluation_reused and record.mlflow_run_id == retrained.mlflow_run_id
    assert record.summary["git_commit"] and record.summary["code_version"] == code_version()

    caplog.clear()
    metrics = eval_dir(home, "synthetic", "pretrained", "tiny") / "metrics.json"
    metrics.write_text(json.dumps({k: v for k, v in record.summary.items() if k != "code_version"}))
    with caplog.at_level("WARNING", logger="xc_core.stages.results"):
        assert not evaluate_or_reuse(data, retrained, home)[1]
    assert "evaluating tiny anew" in caplog.text and "records no code version" in caplog.text
    assert evaluate_or_reuse(data, retrained, home)[1], "made by this code: reused"


def test_an_unknown_method_is_refused_before_anything_is_built_or_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xc_core.cli import main
    from xc_core.stages.results import UnknownMethodError, run_results

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


def test_the_default_methods_are_registered() -> None:
    from xc_core.stages.results import RESULT_METHODS, validate_methods

    assert validate_methods(RESULT_METHODS) == RESULT_METHODS


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
        MethodCost("oak", "b", seconds_per_epoch=3.0, ms_per_query=2.0, parameters=350)])
    assert [r.ratios for r in rows] == [
        {"train": 1.0, "predict": 1.0, "size": 1.0}, {"train": 1.5, "predict": 2.0, "size": 3.5},
        {"train": None, "predict": 0.5, "size": 1.0}, {"train": None, "predict": None, "size": None}]


def test_the_page_lists_every_learned_choice_against_its_fallback() -> None:
    """A -clf model's three fusion tests and its encoder's epoch test become rows, served or not, with the reason."""
    from xc_core.evaluation.fallback import fallback_rows
    from xc_core.stages.results import DatasetResults, _dataset_section

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
