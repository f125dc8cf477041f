"""Validation grid for the tower recipe (issue #62): train ``dual_encoder`` (or any encoder method) with each
variant's TrainConfig overrides on one home's data set and record, per epoch, the validation metrics the trainer
itself selects on, the served epoch, the fallback test against epoch 0, seconds and examples/s. Reads no test row.

    .venv/bin/python experiments/encoder_tower/grid.py --home /tmp/h_syn --dataset synthetic \\
        --variant 'lr1e-3={"lr": 1e-3}' --variant 'lr3e-3={"lr": 3e-3}'

Each variant's record is written to ``results/<dataset>-<variant>.json`` as soon as it ends; a variant whose file
exists is skipped (the grid is resumable). ``--save-tops`` also writes the epochs' validation rankings beside it
(``.npz``: every epoch's top labels, the validation truth and propensities), so that epoch-selection rules can be
compared on the same training run (``experiments/epoch_choice/``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from xc_core.provenance import write_result

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--method", default="dual_encoder")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON overrides")
    parser.add_argument("--seed", type=int, default=0, help="the profile's seed (validation rows, batches); a "
                        "seed other than 0 names the records <variant>-s<seed>")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--save-tops", action="store_true", help="write the epochs' validation rankings (.npz)")
    args = parser.parse_args()

    from xc_core.datasets.container import XCDataset
    from xc_core.methods.encoder import encoder_method
    from xc_core.paths import anchors_dir
    from xc_core.profiles import encoder_config, get_profile, train_settings
    from xc_core.provenance import code_stamp
    from xc_core.training.trainer import Trainer

    home, profile = Path(args.home), get_profile(args.profile).model_copy(update={"seed": args.seed})
    data = XCDataset.load(anchors_dir(home, args.dataset))
    method = encoder_method(args.method)
    for spec in args.variant or ["profile={}"]:
        name, _, raw = spec.partition("=")
        name = f"{name}-s{args.seed}" if args.seed else name
        out = Path(args.out) / f"{args.dataset}-{args.method}-{name}.json"
        if out.exists():
            print(f"{name}: {out} exists, skipped")
            continue
        overrides = json.loads(raw or "{}")
        cfg = method.configure(train_settings(profile).model_copy(update=overrides))
        started = time.perf_counter()
        trainer = Trainer(data, encoder_config(profile, home), cfg, home / "grid" / args.dataset / name)
        setup = time.perf_counter() - started
        result = trainer.fit()
        record = {"dataset": args.dataset, "method": args.method, "profile": args.profile, "variant": name,
                  "seed": args.seed,
                  "overrides": overrides, "code": code_stamp(), "train_docs": int(len(trainer.train_idx)),
                  "val_rows": int(len(trainer.val_idx)), "setup_s": round(setup, 1),
                  "fit_s": round(result.seconds, 1), "examples_per_s": round(result.examples_per_s, 1),
                  "steps": result.steps, "selected_epoch": result.selected_epoch,
                  "fallback_test": result.fallback_test, "history": result.history,
                  "val_hits": served_hits(trainer, result.selected_epoch)}
        out.parent.mkdir(parents=True, exist_ok=True)
        write_result(out, json.dumps(record, indent=1, default=float) + "\n")
        if args.save_tops:
            save_tops(out.with_suffix(".npz"), trainer, record)
        best = max(result.history, key=lambda h: h.get("val_recall@10", -1))
        print(f"{name}: epoch 0 P@1 {result.history[0].get('val_P@1'):.4f} R@10 "
              f"{result.history[0].get('val_recall@10'):.4f}; best epoch {best['epoch']} P@1 {best.get('val_P@1'):.4f}"
              f" R@10 {best.get('val_recall@10'):.4f}; served {result.selected_epoch}; {result.examples_per_s:.0f} "
              f"ex/s, fit {result.seconds:.0f} s, setup {setup:.0f} s", flush=True)


def save_tops(path: Path, trainer: object, record: dict) -> None:
    """The epoch choice's inputs: ``tops`` (epochs × validation rows × ranked labels, −1 pads), the validation
    truth (CSR parts), the labels' inverse propensities, the selection's k, seed and fallback policy (JSON)."""
    import numpy as np
    import scipy.sparse as sp

    choice = trainer.choice  # type: ignore[attr-defined]
    epochs = sorted(choice.tops)
    truth = sp.csr_matrix(choice.truth)
    np.savez_compressed(path, epochs=np.array(epochs), tops=np.stack([choice.tops[e] for e in epochs]).astype(np.int32),
                        truth_data=truth.data, truth_indices=truth.indices, truth_indptr=truth.indptr,
                        truth_shape=np.array(truth.shape), inv_propensity=np.asarray(choice.inv_propensity),
                        k=choice.k, seed=choice.seed, policy=json.dumps(choice.policy.model_dump()),
                        commit=record["code"]["git_commit"])


def served_hits(trainer: object, epoch: int) -> dict[str, list[int]]:
    """Per validation row, 1 where the epoch's top label is a positive (P@1) — the served epoch's and epoch 0's, so
    two variants (same seed: the same rows) can be paired (``table.py --base``)."""
    import numpy as np

    choice = trainer.choice  # type: ignore[attr-defined]

    def hits(e: int) -> list[int]:
        top = np.asarray(choice.tops[e])[:, 0]
        found = np.asarray(choice.truth[np.arange(len(top)), np.maximum(top, 0)]).ravel() > 0
        return (found & (top >= 0)).astype(int).tolist()

    return {"P@1": hits(epoch), "P@1_epoch0": hits(0)}


if __name__ == "__main__":
    main()
