"""Training benchmark (issue 5), demo profile, same data, same run:

- examples/s of the demo profile's tower step (encoders/tower.py) against a full fine-tune of the transformer
  (``dual_encoder_finetune``: the former demo step), whole epochs with their validation (goal ≥ 20×, issue #62);
- examples/s of ``dual_encoder`` vs ``ramen`` (goal: RAMEN's cost ≤ 1.5× the text-only baseline; the
  paper reports 1× vs 0.9×);
- query-encoding latency of the two trained encoders (goal ratio ≤ 1.05: RAMEN adds nothing at inference);
- the same cost for ``ramen`` with fixed anchor targets (``anchor_grad=False``: anchors deduplicated and
  encoded without gradient), the cheaper variant of the regularizer;
- peak RSS.

    .venv/bin/python benchmarks/bench_train.py [--docs 2000] [--home /tmp/xc-bench-train]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from xc_core.measure import peak_rss_mb
from xc_core.provenance import write_result

RESULTS = Path(__file__).parent / "results" / "bench_train.json"




def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=2000, help="training documents per method")
    parser.add_argument("--tower-epochs", type=int, default=5, help="epochs of the tower variants (the fine-tune: 1)")
    parser.add_argument("--home", default="/tmp/xc-bench-train")
    args = parser.parse_args()

    from xc_core.datasets.container import XCDataset
    from xc_core.encoders.text import EncoderConfig, TextEncoder
    from xc_core.methods.encoder import encoder_method
    from xc_core.paths import anchors_dir
    from xc_core.profiles import encoder_config, get_profile
    from xc_core.simulate.pipeline import current_simulation, simulate_into_store
    from xc_core.stages.anchor_sets import materialize_anchor_sets
    from xc_core.stages.dataset import materialize_dataset
    from xc_core.training.trainer import Trainer

    home = Path(args.home)
    profile = get_profile("demo")
    if current_simulation(home) is None:
        simulate_into_store("demo", 0, home)
    if not (anchors_dir(home, "synthetic") / "meta.json").exists():
        dataset, _ = materialize_dataset("synthetic", home)
        materialize_anchor_sets(dataset, home, profile)
    data = XCDataset.load(anchors_dir(home, "synthetic"))
    results: dict[str, Any] = {"docs": args.docs, "profile": "demo"}  # the JSON record written below
    encoders = {}
    tower = {"epochs": args.tower_epochs}
    variants = {"dual_encoder": ("dual_encoder", tower), "ramen": ("ramen", tower),
                "ramen_fixed_anchors": ("ramen", {**tower, "anchor_grad": False}),
                # the former demo step: no shortlist or sampled negatives, which would cost transformer passes here
                "dual_encoder_finetune": ("dual_encoder", {"epochs": 1, "tower": False, "batch_size": 64,
                                                           "shortlist_negatives": 0, "sampled_negatives": 0})}
    for name, (method_name, extra) in variants.items():
        method = encoder_method(method_name)
        cfg = method.configure(profile.train.model_copy(update={"max_train_docs": args.docs,
                                                                "prune_warmup_epochs": 5, **extra}))
        trainer = Trainer(data, encoder_config(profile, home), cfg, home / "bench" / name)
        result = trainer.fit()
        results[f"{name}_examples_per_s"] = round(result.examples_per_s, 2)
        if name in ("dual_encoder", "ramen"):
            encoders[name] = result.encoder_dir
    for name in ("ramen", "ramen_fixed_anchors"):
        results[f"{name}_cost_vs_dual_encoder"] = round(
            results["dual_encoder_examples_per_s"] / results[f"{name}_examples_per_s"], 3)
    results["tower_speedup_vs_finetune"] = round(
        results["dual_encoder_examples_per_s"] / results["dual_encoder_finetune_examples_per_s"], 2)
    queries = data.test_texts[:2000]
    for name, folder in encoders.items():
        encoder = TextEncoder(EncoderConfig(model_path=str(folder), max_length=profile.encoder.max_length))
        encoder.encode(queries[:64])  # warm-up
        started = time.perf_counter()
        encoder.encode(queries)
        results[f"{name}_query_ms"] = round(1000 * (time.perf_counter() - started) / len(queries), 4)
    results["latency_ratio_ramen_vs_dual_encoder"] = round(
        results["ramen_query_ms"] / results["dual_encoder_query_ms"], 3)
    results["peak_rss_mb"] = round(peak_rss_mb(), 1)
    results["goals"] = {"tower_speedup>=20x": results["tower_speedup_vs_finetune"] >= 20,
                        "ramen_cost<=1.5x": results["ramen_cost_vs_dual_encoder"] <= 1.5,
                        "ramen_fixed_anchors_cost<=1.5x": results["ramen_fixed_anchors_cost_vs_dual_encoder"] <= 1.5,
                        "latency_ratio<=1.05": results["latency_ratio_ramen_vs_dual_encoder"] <= 1.05}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS, json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
