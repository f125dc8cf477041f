"""Does training the encoder's top transformer layer(s) on cached lower-layer states beat the tower's validation
plateau? (issue #62, "frozen lower layers with cached hidden states and trained top layer(s)").

A prototype outside xc_core: the lower ``n_layers - top`` layers of the shipped encoder run once per text (their
token states are kept), the top ``top`` layers and the mean pool train with the trainer's own task loss (in-batch
softmax over the trainer's batches: the same documents, positives and masks as ``dual_encoder``), and every epoch is
scored on the trainer's validation rows (its ``ValidationRanker``: the rows ``grid.py`` scores). Reads no test row.

    PYTHONPATH=. .venv/bin/python experiments/top_layers/top_layers.py --home HOME --dataset synthetic --top 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from xc_core.provenance import write_result

RESULTS = Path(__file__).parent / "results"


class TopLayers:
    """The shipped encoder split at layer ``n - top``: the lower part's token states per text, computed once, and
    the trainable top layers with mean pooling on them. ``encode`` makes it a stand-in for the validation ranker."""

    def __init__(self, model_path: str, top: int, max_length: int, texts: list[str]) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModel.from_pretrained(model_path)
        self.max_length = max_length
        layers = self.model.encoder.layer
        self.split = len(layers) - top
        self.top = layers[self.split:]
        for p in self.model.parameters():
            p.requires_grad_(False)
        for p in self.top.parameters():
            p.requires_grad_(True)
        self.states: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._cache(texts)

    def _cache(self, texts: list[str]) -> None:
        import torch

        missing = [t for t in dict.fromkeys(texts) if t not in self.states]
        self.model.eval()
        with torch.no_grad():
            for s in range(0, len(missing), 256):
                chunk = missing[s: s + 256]
                batch = self.tok(chunk, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="pt")
                out = self.model(**batch, output_hidden_states=True)
                hidden = out.hidden_states[self.split]
                for i, t in enumerate(chunk):
                    n = int(batch["attention_mask"][i].sum())
                    self.states[t] = (hidden[i, :n].clone(), batch["attention_mask"][i, :n].clone())

    def forward(self, texts: list[str]):
        import torch
        from torch.nn import functional as F

        self._cache(texts)
        rows = [self.states[t] for t in texts]
        width = max(len(m) for _, m in rows)
        hidden = torch.zeros(len(rows), width, rows[0][0].shape[-1])
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for i, (h, m) in enumerate(rows):
            hidden[i, : len(m)], mask[i, : len(m)] = h, m
        # the additive mask BERT's attention adds to its scores: 0 on tokens, the float minimum on padding
        extended = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
        for layer in self.top:
            out = layer(hidden, attention_mask=extended)
            hidden = out[0] if isinstance(out, tuple) else out
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return F.normalize(pooled, dim=-1)

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        import torch

        self.top.eval()
        with torch.no_grad():
            out = np.concatenate([self.forward(texts[s: s + 512]).numpy() for s in range(0, len(texts), 512)])
        self.top.train()
        return out.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--top", type=int, default=1, help="transformer layers trained (the rest frozen, cached)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--against", help="a grid.py record of the same seed (e.g. the tower's): paired with it")
    args = parser.parse_args()

    import torch

    from xc_core import seeds
    from xc_core.datasets.container import XCDataset
    from xc_core.evaluation.analyses import paired_bootstrap_diff
    from xc_core.methods.encoder import encoder_method
    from xc_core.paths import anchors_dir
    from xc_core.profiles import encoder_config, get_profile, train_settings
    from xc_core.provenance import code_stamp
    from xc_core.seeds import Stream
    from xc_core.training.clusters import random_batches
    from xc_core.training.losses.softmax import InBatchSoftmaxLoss
    from xc_core.training.trainer import Trainer

    torch.manual_seed(args.seed)
    home, profile = Path(args.home), get_profile(args.profile).model_copy(update={"seed": args.seed})
    data = XCDataset.load(anchors_dir(home, args.dataset))
    cfg = encoder_method("dual_encoder").configure(train_settings(profile))
    enc_cfg = encoder_config(profile, home)
    trainer = Trainer(data, enc_cfg, cfg, home / "top_layers" / args.dataset)
    texts = [*(data.train_texts[i] for i in trainer.train_idx), *data.label_texts,
             *(data.train_texts[i] for i in trainer.val_idx)]
    started = time.perf_counter()
    from xc_core.encoders.text import default_model_path

    model = TopLayers(enc_cfg.model_path or str(default_model_path()), args.top, enc_cfg.max_length, texts)
    cache_s = time.perf_counter() - started
    loss_fn = InBatchSoftmaxLoss(cfg.softmax_scale)
    optimizer = torch.optim.AdamW(model.top.parameters(), lr=args.lr, weight_decay=0.01)
    truth = trainer.ranker.truth

    def hits() -> tuple[dict[str, float], np.ndarray]:
        found, top = trainer.ranker.metrics(model)  # type: ignore[arg-type]
        first = np.asarray(top)[:, 0]
        per_row = (np.asarray(truth[np.arange(len(first)), np.maximum(first, 0)]).ravel() > 0) & (first >= 0)
        return found, per_row.astype(int)

    found, start_hits = hits()
    history = [{"epoch": 0, **found}]
    best = (found["recall@10"] if "recall@10" in found else 0.0, 0, start_hits)
    print(f"epoch 0: {found} (cache {cache_s:.0f} s)", flush=True)
    examples, fit_started = 0, time.perf_counter()
    for epoch in range(args.epochs):
        for step, rows in enumerate(random_batches(len(trainer.train_idx), cfg.batch_size,
                                                   seeds.rng(args.seed, Stream.EPOCH_BATCHES, epoch))):
            batch = trainer.builder.build(trainer.train_idx[rows], seeds.step_rng(args.seed, epoch, step))
            emb = model.forward([*batch.doc_texts, *batch.label_texts])
            b = len(batch.doc_texts)
            loss = loss_fn(emb[:b], emb[b:], torch.from_numpy(batch.positive_mask))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            examples += b
        found, per_row = hits()
        history.append({"epoch": epoch + 1, "task_loss": float(loss), **found})
        print(f"epoch {epoch + 1}: {found} ({examples / (time.perf_counter() - fit_started):.0f} ex/s)", flush=True)
        recall = found.get("recall@10", 0.0)
        if recall > best[0]:
            best = (recall, epoch + 1, per_row)
    d, lo, hi, _ = paired_bootstrap_diff(best[2], start_hits)
    record = {"dataset": args.dataset, "profile": args.profile, "seed": args.seed, "top": args.top, "lr": args.lr,
              "epochs": args.epochs, "code": code_stamp(), "cache_s": round(cache_s, 1),
              "fit_s": round(time.perf_counter() - fit_started, 1), "selected_epoch": best[1],
              "P@1_gain_vs_epoch0": [d, lo, hi], "history": history,
              "val_hits": {"P@1": best[2].tolist(), "P@1_epoch0": start_hits.tolist()}}
    if args.against:  # the same seed draws the same validation rows
        other = np.array(json.loads(Path(args.against).read_text())["val_hits"]["P@1"])
        record["P@1_vs_against"] = [args.against, *paired_bootstrap_diff(best[2], other)[:3]]
        print(f"against {args.against}: {record['P@1_vs_against']}")
    out = RESULTS / f"{args.dataset}-top{args.top}-lr{args.lr:g}-e{args.epochs}-s{args.seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_result(out, json.dumps(record, indent=1, default=float) + "\n")
    print(f"best epoch {best[1]} (by R@10): P@1 − epoch 0 {100 * d:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]")


if __name__ == "__main__":
    main()
