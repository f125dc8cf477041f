"""IRENE's streaming cost: milliseconds per novel keyword to represent it zero-shot and add it to the serving index,
through ``xc_core.methods.irene.stream.add_keywords`` itself, split into its steps — encode (the frozen encoder,
MiniLM-L6 or its fine-tune), shortlist (the K most text-similar seen labels, exact), refine (their classifiers,
τ0), combine (the combiner) and add (HNSW insertion) — for ``--n`` (10,000) generated keywords in batches of
``--batch``. Goal: ≤ 1 ms per keyword on 2 CPU cores. Baseline in the same run: the encoder alone (encode + add,
what streaming would cost without IRENE), and the ratio of the two.

The home needs IRENE trained and indexed (``xc train`` / ``xc index --method irene``). Its index is never
modified: it is copied to a temporary folder and the keywords go there. The keywords are deterministic novel
strings built from the simulator's vocabulary (prefix, brand, modifier, product or alias, suffix or place),
none of them a label of the data set. Results are merged into benchmarks/results/bench_irene.json under
``<dataset>/<profile>`` (``/threads=N`` with ``--threads``).

    .venv/bin/python benchmarks/bench_irene.py --home .xc [--dataset synthetic] [--profile demo] [--n 10000]
        [--batch 4096] [--threads N] [--note "..."]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from xc_core.measure import peak_rss_mb
from xc_core.paths import dataset_dir, index_dir, resolve_home
from xc_core.provenance import write_result

RESULTS_DIR = Path(__file__).resolve().parent / "results"

RESULTS = RESULTS_DIR / "bench_irene.json"
GOAL_MS_PER_KEYWORD = 1.0


def novel_keywords(n: int, exclude: set[str], seed: int = 0) -> list[str]:
    """``n`` distinct keyword strings from the simulator vocabulary, seeded, none in ``exclude``."""
    from xc_core.simulate.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    rng = np.random.default_rng(seed)
    places = [p for market in vocab.locations.values() for p in market]
    synonyms = {m: (m, *alts) for m, alts in vocab.modifiers.items()}
    out: dict[str, None] = {}
    while len(out) < n:
        product = vocab.products[rng.integers(len(vocab.products))]
        parts = [str(rng.choice(vocab.prefixes))] if rng.random() < 0.3 else []
        brands = vocab.brands.get(product.category, ())
        if brands and rng.random() < 0.5:
            parts.append(str(rng.choice(brands)))
        if product.modifiers and rng.random() < 0.7:
            modifier = str(rng.choice(product.modifiers))
            parts.append(str(rng.choice(synonyms.get(modifier, (modifier,)))))
        parts.append(str(rng.choice([product.name, *product.aliases])))
        tail = rng.random()
        if tail < 0.7:  # a suffix, a place, or nothing
            parts.append(str(rng.choice(vocab.suffixes if tail < 0.4 else places)))
        text = " ".join(parts)
        if text not in exclude:
            out[text] = None
    return list(out)


def measure(home: Path, dataset: str, profile: str, n: int, batch: int, seed: int) -> dict[str, Any]:
    from xc_core.methods.irene.stream import add_keywords
    from xc_core.training.record import TrainedModel

    labels = set(pl.read_parquet(dataset_dir(home, dataset) / "labels.parquet").get_column("text").to_list())
    texts = novel_keywords(n, labels, seed)
    trained = TrainedModel.of(home, dataset, "irene", profile)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:  # the home's index stays as it is
        folder = Path(tmp) / "index"
        shutil.copytree(index_dir(home, dataset, "irene", profile), folder)
        result = add_keywords(home, dataset, profile, texts, [f"bench-{i}" for i in range(n)], batch=batch,
                              index_folder=folder)
    steps = result["steps_ms_per_item"]
    encoder_only = steps["encode"] + steps["add"]
    encoder_config = json.loads((Path(trained.summary["encoder_dir"]) / "config.json").read_text())
    import torch

    return {
        "dataset": dataset, "profile": profile, "keywords": n, "batch": batch, "seed": seed,
        "examples": texts[:5], "added": result["added"], "skipped": result["skipped"],
        "ms_per_item": result["ms_per_item"], "steps_ms_per_item": steps,
        "keywords_per_s": round(1000 / result["ms_per_item"]) if result["ms_per_item"] else None,
        "baseline": {"what": "the encoder alone: encode + add (streaming without IRENE's shortlist, refine and "
                             "combine)", "ms_per_item": round(encoder_only, 4)},
        "ratio_vs_encoder_only": round(result["ms_per_item"] / encoder_only, 3) if encoder_only else None,
        "associated_mean": result["associated_mean"], "load_ms": result["load_ms"], "save_ms": result["save_ms"],
        "index_count_after": result["index_count"], "seconds": result["seconds"],
        "encoder": {"dir": trained.summary["encoder_dir"], "stage_one": trained.summary.get("stage_one"),
                    "layers": encoder_config.get("num_hidden_layers"), "hidden": encoder_config.get("hidden_size"),
                    "max_length": trained.summary.get("max_length")},
        "goal": {"ms_per_item": GOAL_MS_PER_KEYWORD, "on": "2 CPU cores, every step included"},
        "meets_goal": result["ms_per_item"] <= GOAL_MS_PER_KEYWORD,
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "torch_threads": torch.get_num_threads(), "peak_rss_mb": round(peak_rss_mb(), 1), "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", help="a home where IRENE is trained and indexed (default: $XC_HOME or ./.xc)")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--n", type=int, default=10_000, help="novel keywords streamed")
    parser.add_argument("--batch", type=int, default=4096, help="keywords represented at once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch and faiss threads (default: theirs, one per core)")
    parser.add_argument("--note", default="", help="recorded with the result (e.g. what else shared the cores)")
    parser.add_argument("--no-save", action="store_true", help="do not update benchmarks/results")
    args = parser.parse_args()
    if args.threads:  # on cores another process keeps busy, fewer threads than cores avoid oversubscription
        import faiss
        import torch

        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    result = measure(resolve_home(args.home), args.dataset, args.profile, args.n, args.batch, args.seed)
    if args.note:
        result["note"] = args.note
    print(json.dumps(result, indent=2))
    if not args.no_save:
        merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        merged[f"{args.dataset}/{args.profile}" + (f"/threads={args.threads}" if args.threads else "")] = result
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        write_result(RESULTS, json.dumps(merged, indent=2) + "\n")


if __name__ == "__main__":
    main()
