"""A tiny random BERT saved as a local HF model folder: for tests and the ``tiny`` profile (seconds)."""

from __future__ import annotations

import shutil
from pathlib import Path

from xc_core.encoders.text import default_model_path


def build_tiny_bert(out_dir: Path, hidden: int = 32, layers: int = 2, heads: int = 2, seed: int = 0) -> Path:
    """Random-weight BertModel with MiniLM's tokenizer (so texts tokenise realistically)."""
    import torch
    from transformers import BertConfig, BertModel

    out_dir.mkdir(parents=True, exist_ok=True)
    source = default_model_path()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(source / name, out_dir / name)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=hidden * 2, max_position_embeddings=64)
    BertModel(config).save_pretrained(out_dir)
    return out_dir
