"""The ``full`` profile (the papers' GPU schedule) on a lent GPU machine, scored here by xc's own evaluation.

The GPU machine has PyTorch and transformers but none of xc's storage stack (polars, duckdb, faiss, MLflow,
Dagster), nothing can be fetched there, and what travels is capped at 64 MiB going and 16 MiB per file coming
back. So the run is three steps:

    # here: the data sets (with their anchor sets) of a home, pickled, and the shipped encoder in float16
    .venv/bin/python benchmarks/device_full.py pack --home /work/device_home --datasets synthetic,wikispeedia
    # there (device tool, one call): xc's trainer with the full profile, then exact top-k of every test query
    python3 benchmarks/device_full.py train --bundle .device_bundle --out $OUT
    # here: score the returned rankings exactly as `xc evaluate` scores a method, pair them, write the table
    .venv/bin/python benchmarks/device_full.py score --home /work/device_home --returned DIR [DIR ...]

The runs are bound by the CPU side (tokenisation, per-epoch validation), not the GPU: several ``train`` processes
can share the one GPU, each with ``--datasets``/``--methods``/``--set seed=N`` of its own and its own ``--out``
(``OMP_NUM_THREADS`` split between them); ``score`` merges the folders of one seed. The 2026-11-27 lease ran four
at once (H100 utilisation 96 %, 44 GiB) with ``pydantic`` carried as wheels (the image lacks it). The bundle
is git-ignored: name ``.device_bundle`` (and the wheels' folder) in the device call's ``carry``.

What the device step runs is xc's code, unchanged: the registry's method configuration (``train_config``), the
data-set transform (``prepare``), ``Trainer.fit`` with its validation-epoch selection and fallback test, and
``TextEncoder.encode``. Its retrieval is exact inner product over every label (a flat index), where `xc evaluate`
searches the label index; the untrained encoder is ranked the same way, so the paired rows compare like with like.

Two departures, both measured by ``score``: the encoder travels as float16 (its float32 weights are 87 MiB) and is
widened back to float32 before training; and training runs under bf16 autocast (``TextEncoder.forward``). The
``score`` step ranks the untrained encoder here twice, from the shipped float32 weights and from the float16 copy,
and reports how far apart they are.
"""

from __future__ import annotations

import argparse
import json
import pickle
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from xc_core.provenance import write_result

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the GPU machine runs this file from a bare checkout, not an installed package
    sys.path.insert(0, str(ROOT))

PROFILE = "full"
#: retrieved per test query: the evaluation removes filter pairs and keeps the top 100 of what is left
DEPTH = 128
RESULT = ROOT / "benchmarks" / "results" / "device_full.json"


# -- here: the bundle that travels -------------------------------------------------------------------------------
def pack(home: Path, datasets: list[str], bundle: Path) -> None:
    """Each data set as the training stage loads it (anchor sets when built), pickled; the encoder in float16."""
    from xc_core.encoders.text import default_model_path
    from xc_core.stages.anchor_sets import load_with_anchors

    bundle.mkdir(parents=True, exist_ok=True)
    for name in datasets:
        data = load_with_anchors(home, name)
        (bundle / f"{name}.pkl").write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
        print(f"{name}: {len(data.train_texts)} train, {len(data.test_texts)} test documents, "
              f"anchor sets {sorted(data.anchor_sets)}")
    narrow(default_model_path(), bundle / "model16")
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) / 2**20
    print(f"bundle {bundle}: {size:.1f} MiB")


def narrow(source: Path, out: Path) -> Path:
    """The encoder at ``source`` saved in float16 (what travels), tokenizer beside it."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    AutoModel.from_pretrained(source, local_files_only=True).to(torch.float16).save_pretrained(
        out, safe_serialization=True)
    AutoTokenizer.from_pretrained(source, local_files_only=True).save_pretrained(out)
    return out


def widen(model16: Path, out: Path) -> Path:
    """The float16 copy back in float32 (the trainer's weights), saved where TextEncoder loads it."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(model16, local_files_only=True, dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(model16, local_files_only=True).save_pretrained(out)
    return out


# -- both machines: exact ranking ------------------------------------------------------------------------------
def rank(encoder_dir: Path, max_length: int, data: Any, depth: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """(top ids, their scores) of every test query over every label: exact inner product, on the GPU if any."""
    import torch

    from xc_core.encoders.text import encoder_for

    encoder = encoder_for(encoder_dir, max_length)
    queries = torch.from_numpy(encoder.encode(data.test_texts)).to(encoder.device)
    labels = torch.from_numpy(encoder.encode(data.label_texts)).to(encoder.device)
    ids, scores = [], []
    for start in range(0, len(queries), 4096):
        found = torch.topk(queries[start:start + 4096] @ labels.T, min(depth, labels.shape[0]), dim=1)
        scores.append(found.values.cpu().numpy())
        ids.append(found.indices.cpu().numpy().astype(np.int32))
    return np.concatenate(ids), np.concatenate(scores).astype(np.float32)


# -- there: training ----------------------------------------------------------------------------------------------
def train_one(data: Any, method_name: str, model32: Path, work: Path,
              overrides: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    """One method with the full profile (``overrides``: a smoke test's, none for the reported run), through the
    registry's configuration and xc's trainer."""
    from xc_core.methods import get_method
    from xc_core.methods.encoder import EncoderMethod
    from xc_core.methods.encoder.training import train_config
    from xc_core.profiles import get_profile
    from xc_core.training.trainer import Trainer

    method = get_method(method_name)
    if not isinstance(method, EncoderMethod):
        raise ValueError(f"{method_name}: not a dual-encoder method (this runner trains through the one Trainer)")
    profile = get_profile(PROFILE)
    cfg = train_config(method, profile, overrides)
    enc_cfg = profile.encoder.model_copy(update={"model_path": str(model32), **method.encoder_overrides})
    started = time.perf_counter()
    trainer = Trainer(method.prepare(data, cfg), enc_cfg, cfg, work, val_truth=data.y_train)
    if not method.trains:
        return {"epochs": 0, "val_recall": trainer.validation_recall(),
                "train_seconds": round(time.perf_counter() - started, 1)}, model32
    result = trainer.fit()
    return {"epochs": result.epochs, "steps": result.steps, "selected_epoch": result.selected_epoch,
            "val_recall": result.val_recall, "final_task_loss": result.final_task_loss,
            "examples_per_s": round(result.examples_per_s, 1), "train_seconds": round(result.seconds, 1),
            "fallback_test": result.fallback_test, "history": result.history,
            "prune_log": result.prune_log[-3:], "lambda_last": result.lambda_trajectory[-1:],
            "config": cfg.model_dump(mode="json")}, result.encoder_dir


def device_info() -> dict[str, Any]:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"gpu": gpu, "torch": torch.__version__, "python": platform.python_version(),
            "bf16": bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())}


def train(bundle: Path, out: Path, methods: list[str], budget_s: float, overrides: dict[str, Any],
          datasets: list[str] | None = None) -> None:
    """Every (data set, method) of the bundle in turn (``datasets``: only these), until the budget would be
    overrun: rankings + a summary. Several of these can share one GPU, each with its own ``out``."""
    import shutil
    import tempfile

    from xc_core.profiles import get_profile

    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="xc-full-"))
    model32 = widen(bundle / "model16", scratch / "model32")
    max_length = get_profile(PROFILE).encoder.max_length
    summary: dict[str, Any] = {"device": device_info(), "profile": PROFILE, "overrides": overrides, "runs": {},
                               "skipped": []}
    for path in sorted(bundle.glob("*.pkl")):
        if datasets and path.stem not in datasets:
            continue
        data = pickle.loads(path.read_bytes())
        arrays: dict[str, np.ndarray] = {}
        for name in methods:
            elapsed = time.perf_counter() - started
            if elapsed > budget_s:
                summary["skipped"].append(f"{data.name}/{name} (budget: {elapsed:.0f} s used)")
                continue
            try:
                run, encoder_dir = train_one(data, name, model32, scratch / data.name / name, overrides)
                ranked = time.perf_counter()
                arrays[f"{name}/top"], arrays[f"{name}/scores"] = rank(encoder_dir, max_length, data)
                run["rank_seconds"] = round(time.perf_counter() - ranked, 1)
            except Exception as error:  # one failure must not cost the other runs their device time
                run = {"error": f"{type(error).__name__}: {error}"}
            summary["runs"][f"{data.name}/{name}"] = run
            print(f"{data.name}/{name}: {json.dumps({k: v for k, v in run.items() if k != 'history'})[:600]}",
                  flush=True)
            # after every run: a call cut off at its time limit still returns what finished
            np.savez_compressed(out / f"{data.name}.npz", **arrays)  # type: ignore[arg-type]
            (out / "summary.json").write_text(json.dumps(summary, default=str))
        shutil.rmtree(scratch / data.name, ignore_errors=True)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, default=str))


# -- here: scoring ------------------------------------------------------------------------------------------------
def _evaluate(data: Any, top: np.ndarray, scores: np.ndarray, out: Path, method: str) -> tuple[Any, dict[str, Any]]:
    """(the saved evaluation record, its summary) of one method's rankings, scored as `xc evaluate` scores."""
    from xc_core.evaluation.metrics import to_csr
    from xc_core.evaluation.record import EvaluationRecord, fingerprint_test_split
    from xc_core.stages.evaluate import evaluate_scores

    info = {"dataset": data.name, "method": method, "profile": PROFILE, "test_split": fingerprint_test_split(data),
            "retrieval": "exact inner product"}
    summary, _ = evaluate_scores(data, to_csr(scores, top, data.n_labels), out, info)
    return EvaluationRecord.load(out), summary


def score(home: Path, returned: list[Path], demo_home: Path | None) -> dict[str, Any]:
    """Evaluate the returned rankings (and the untrained encoder ranked here from float32 and float16 weights)
    into ``<home>/eval``; pair every method with the untrained one, the methods with each other, PECOS where
    ``xc_core.stages.peer`` has scored it, and the demo-profile model of ``demo_home``."""
    import tempfile

    from xc_core.encoders.text import default_model_path
    from xc_core.evaluation.record import EvaluationRecord
    from xc_core.methods.roles import control_method, references
    from xc_core.paths import eval_dir
    from xc_core.profiles import get_profile
    from xc_core.stages.anchor_sets import load_with_anchors
    from xc_core.stages.device import merge_returned
    from xc_core.stages.evaluate import PEERS
    from xc_core.stages.results import paired_rows

    summary, returned_arrays = merge_returned(returned)
    max_length = get_profile(PROFILE).encoder.max_length
    table: dict[str, Any] = {"device": summary["device"], "device_seconds": summary.get("seconds"),
                             "skipped": summary["skipped"], "datasets": {}}
    control = control_method()
    for name, arrays in sorted(returned_arrays.items()):
        data = load_with_anchors(home, name)
        records: dict[str, Any] = {}
        summaries: dict[str, dict[str, Any]] = {}
        for key in sorted(k for k in arrays if k.endswith("/top")):
            method = key.removesuffix("/top")
            records[method], summaries[method] = _evaluate(data, arrays[key], arrays[f"{method}/scores"],
                                        eval_dir(home, data.name, method, PROFILE), method)
        here, _ = _evaluate(data, *rank(default_model_path(), max_length, data),
                         eval_dir(home, data.name, f"{control}@float32", PROFILE), f"{control}@float32")
        with tempfile.TemporaryDirectory() as tmp:
            widened = widen(narrow(default_model_path(), Path(tmp) / "model16"), Path(tmp) / "model32")
            rounded, _ = _evaluate(data, *rank(widened, max_length, data),
                                eval_dir(home, data.name, f"{control}@float16", PROFILE), f"{control}@float16")
        rows: dict[str, Any] = {m: {k: r.metrics.get(k) for k in ("P@1", "P@5", "R@10", "PSP@5")}
                                for m, r in records.items()}
        for m in records:  # brand / place mismatch in the top-k, where labels carry item metadata
            mismatch = summaries[m].get("mismatch")
            if mismatch:
                rows[m]["mismatch"] = mismatch
        pairs = [{"method": f"{control}@float16", "vs": f"{control}@float32", **paired_rows(rounded, here)}]
        pairs += [{"method": m, "vs": control, **paired_rows(r, records[control])}
                  for m, r in records.items() if m != control and control in records]
        trained = [m for m in references() if m in records and m != control]  # the registry's order: a − b once
        pairs += [{"method": a, "vs": b, **paired_rows(records[a], records[b])}
                  for i, a in enumerate(trained) for b in trained[i + 1:]]
        for name in PEERS:  # the peers ignore xc's training profile: their demo-profile scoring is theirs
            peer = EvaluationRecord.load(eval_dir(home, data.name, name, PROFILE)) or EvaluationRecord.load(
                eval_dir(home, data.name, name, "demo"))
            if peer is not None:
                rows[name] = {k: peer.metrics.get(k) for k in ("P@1", "P@5", "R@10", "PSP@5")}
                pairs += [{"method": m, "vs": name, **paired_rows(r, peer)} for m, r in records.items()]
        if demo_home is not None:
            for m, r in records.items():
                demo = EvaluationRecord.load(eval_dir(demo_home, data.name, m, "demo"))
                if demo is not None:
                    rows[f"{m} (demo)"] = {k: demo.metrics.get(k) for k in ("P@1", "P@5", "R@10", "PSP@5")}
                    pairs.append({"method": m, "vs": f"{m} (demo)", **paired_rows(r, demo)})
        runs = {k.split("/", 1)[1]: {f: v for f, v in run.items() if f not in ("history", "config")}
                for k, run in summary["runs"].items() if k.startswith(f"{data.name}/")}
        table["datasets"][data.name] = {"metrics": rows, "paired": pairs, "runs": runs,
                                        "float16_check": {"P@1 float32": here.metrics["P@1"],
                                                          "P@1 float16": rounded.metrics["P@1"]}}
    return table


def main(argv: list[str] | None = None) -> None:
    from xc_core.stages.train import setting  # `xc train --set`'s parser: one KEY=VALUE rule
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("pack", help="here: pickle the data sets and a float16 encoder into the bundle")
    p.add_argument("--home", type=Path, required=True)
    p.add_argument("--datasets", default="synthetic,wikispeedia")
    p.add_argument("--bundle", type=Path, default=ROOT / ".device_bundle")
    t = sub.add_parser("train", help="there: train with the full profile, rank the test queries")
    t.add_argument("--bundle", type=Path, default=ROOT / ".device_bundle")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--methods", default="", help="comma-separated (default: the registry's references)")
    t.add_argument("--datasets", default="", help="comma-separated (default: every data set of the bundle)")
    t.add_argument("--budget-s", type=float, default=420.0, help="start no new run after this many seconds")
    t.add_argument("--set", dest="settings", action="append", default=[], type=setting, metavar="KEY=VALUE",
                   help="a TrainConfig override, for a smoke test only (recorded in the summary)")
    s = sub.add_parser("score", help="here: evaluate what came back and write the table")
    s.add_argument("--home", type=Path, required=True)
    s.add_argument("--returned", type=Path, nargs="+", required=True,
                   help="what came back: one folder per train run (runs that shared the GPU are merged)")
    s.add_argument("--demo-home", type=Path, default=None)
    s.add_argument("--result", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    if args.step == "pack":
        pack(args.home, args.datasets.split(","), args.bundle)
    elif args.step == "train":
        from xc_core.methods.roles import control_method, dependency_order, references

        control = control_method()  # first: every trained method is paired with it
        methods = (args.methods.split(",") if args.methods
                   else [control, *(m for m in dependency_order(references()) if m != control)])
        train(args.bundle, args.out, methods, args.budget_s, dict(args.settings),
              [d for d in args.datasets.split(",") if d])
    else:
        table = score(args.home, args.returned, args.demo_home)
        write_result(args.result, json.dumps(table, indent=1, default=str) + "\n")
        print(json.dumps({d: v["metrics"] for d, v in table["datasets"].items()}, indent=1))


if __name__ == "__main__":
    main()
