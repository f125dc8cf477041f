"""Where the tower's validation plateau comes from (issue #62, round 3): fit against generalisation, and what the
validation days' clicks reward on queries asked before them. Reads the trainer's own split (training rows, the
validation rows of the training window's last days and their clicks in those days); reads no test row.

    .venv/bin/python experiments/encoder_tower/plateau.py --home HOME --dataset synthetic \\
        --encoder untrained --encoder r3-profile --encoder r3-bigrams64k

``--encoder NAME``: ``untrained`` (the shipped encoder) or a grid variant (``HOME/grid/<dataset>/NAME/best_encoder``,
written by ``grid.py``). Per encoder: P@1 on 1,000 seeded training rows against the labels training saw (the fit)
and on the validation rows against their validation-day clicks, the latter split into queries with clicks before
the validation days (repeated) and without (new); on the repeated ones, how often the top label is one the query
clicked before and how often it is the one it clicked on the most days. Per data set: P@1 of rules that read the past
clicks only (the most clicked past label, the most popular past label, a random one), the share of past pairs clicked
again in the validation days, and the text-only ceiling (identical texts get identical vectors: labels sharing a
text tie). Writes ``results/<dataset>-plateau.json``.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xc_core.provenance import write_result

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--encoder", action="append", default=[], help="untrained or a grid variant's name")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    from xc_core.datasets.container import XCDataset
    from xc_core.encoders.text import default_model_path, encoder_for
    from xc_core.methods.encoder import encoder_method
    from xc_core.paths import anchors_dir
    from xc_core.profiles import encoder_config, get_profile, train_settings
    from xc_core.provenance import code_stamp
    from xc_core.training.positives import click_day_weights
    from xc_core.training.trainer import Trainer

    home, profile = Path(args.home), get_profile(args.profile)
    data = XCDataset.load(anchors_dir(home, args.dataset))
    cfg = encoder_method("dual_encoder").configure(train_settings(profile))
    trainer = Trainer(data, encoder_config(profile, home), cfg, home / "grid" / args.dataset / "_plateau")
    y_fit, y_val = sp.csr_matrix(trainer.data.y_train), sp.csr_matrix(trainer.val_truth)
    days = y_fit.copy()
    days.data = click_day_weights(trainer.data, trainer.split.first_day)  # aligned with y_fit
    val = trainer.val_idx
    repeated = np.diff(y_fit.indptr)[val] > 0
    fit_rows = np.random.default_rng(0).choice(trainer.train_idx, min(1000, len(trainer.train_idx)), replace=False)
    record = {"dataset": args.dataset, "profile": args.profile, "code": code_stamp(), "val_rows": int(len(val)),
              "repeated_val_rows": int(repeated.sum()), "fit_rows": int(len(fit_rows)),
              "past_rules": past_rules(days, y_val, val[repeated], trainer.train_idx),
              "text_only_ceiling_P@1": text_ceiling(data.label_texts, y_val, val), "encoders": {}}
    labels = list(data.label_texts)
    for name in args.encoder:
        grid = home / "grid" / args.dataset
        path = Path(default_model_path()) if name == "untrained" else grid / name / "best_encoder"
        encoder = encoder_for(path, trainer.encoder.cfg.max_length)
        label_vectors = encoder.encode(labels)
        fit_top = _top1(encoder.encode([data.train_texts[i] for i in fit_rows]), label_vectors)
        top = _top1(encoder.encode([data.train_texts[i] for i in val]), label_vectors)
        hit = _member(y_val, val, top)
        most = np.array([_most_clicked(days, r) for r in val[repeated]])
        record["encoders"][name] = {
            "fit_P@1": _pct(_member(y_fit, fit_rows, fit_top)), "val_P@1": _pct(hit),
            "val_P@1_repeated": _pct(hit[repeated]), "val_P@1_new": _pct(hit[~repeated]),
            "top1_clicked_before": _pct(_member(y_fit, val[repeated], top[repeated])),
            "top1_most_clicked_before": _pct(top[repeated] == most)}
        print(name, json.dumps(record["encoders"][name]), flush=True)
    print(json.dumps({k: v for k, v in record.items() if k != "encoders"}, default=str))
    write_result(Path(args.out) / f"{args.dataset}-plateau.json", json.dumps(record, indent=1) + "\n")


def past_rules(days: sp.csr_matrix, y_val: sp.csr_matrix, rows: np.ndarray, train_rows: np.ndarray) -> dict:
    """P@1 on the repeated validation rows of rules that read only the clicks before the validation days, and the
    share of those past pairs clicked again in the validation days."""
    popularity = np.asarray(days[train_rows].sum(axis=0)).ravel()
    rng = np.random.default_rng(0)

    def past(r: int) -> np.ndarray:
        return days.indices[days.indptr[r]:days.indptr[r + 1]]

    rules = {"most_clicked_past_label": [_most_clicked(days, r) for r in rows],
             "most_popular_past_label": [past(r)[np.argmax(popularity[past(r)])] for r in rows],
             "random_past_label": [rng.choice(past(r)) for r in rows]}
    found = {f"{rule}_P@1": _pct(_member(y_val, rows, np.array(top))) for rule, top in rules.items()}
    again = [y_val[r, j] > 0 for r in rows for j in past(r)]
    return {**found, "past_pairs_clicked_again": _pct(np.array(again)),
            "past_labels_per_row": round(float(np.mean([len(past(r)) for r in rows])), 2)}


def text_ceiling(label_texts: list[str], y_val: sp.csr_matrix, rows: np.ndarray) -> float:
    """The best validation P@1 any text encoder can reach: labels with the same (lower-cased) text get the same
    vector and tie, so a row's best top label is the text with the largest share of validation positives."""
    text_of = [t.strip().lower() for t in label_texts]
    size: dict[str, int] = defaultdict(int)
    for t in text_of:
        size[t] += 1
    best = []
    for r in rows:
        share: dict[str, int] = defaultdict(int)
        for j in y_val.indices[y_val.indptr[r]:y_val.indptr[r + 1]]:
            share[text_of[j]] += 1
        best.append(max((n / size[t] for t, n in share.items()), default=0.0))
    return _pct(np.array(best))


def _top1(queries: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.argmax(queries @ labels.T, axis=1)


def _member(y: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.array([y[r, c] > 0 for r, c in zip(rows, cols, strict=True)], dtype=float)


def _most_clicked(days: sp.csr_matrix, row: int) -> int:
    lo, hi = days.indptr[row], days.indptr[row + 1]
    return int(days.indices[lo + np.argmax(days.data[lo:hi])])


def _pct(values: np.ndarray) -> float:
    return round(100 * float(np.mean(values)), 2) if len(values) else float("nan")


if __name__ == "__main__":
    main()
