"""The store of encodings (``encoders/vector_cache.py``): a call met again with the same weights, tokenizer,
settings and texts is read back bit for bit, from any folder holding those weights; anything that could change the
vectors is a new key; small calls, corrupt files and the size limit are handled."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from xc_core.encoders.text import encoder_for
from xc_core.encoders.vector_cache import MIN_CACHED_TEXTS, VectorCache
from xc_core.profiles import encoder_config, get_profile

TEXTS = [f"query {i} about {word} near the old town square in the north" for i, word in
         enumerate(["shoes", "flights", "bank", "hotel"] * 150)]


@pytest.fixture
def model(tiny_home: Path) -> Path:
    return Path(encoder_config(get_profile("tiny"), tiny_home).model_path)


def test_the_same_call_from_a_copied_model_is_read_back_bit_for_bit(model: Path, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "vectors"
    first = encoder_for(model, 16, cache).encode(TEXTS)
    copy = tmp_path / "copied-model"
    shutil.copytree(model, copy)
    with caplog.at_level(logging.INFO, logger="xc_core.encoders.text"):
        again = encoder_for(copy, 16, cache).encode(TEXTS)
    assert "read from the vector cache" in caplog.text
    assert np.array_equal(first, again) and again.dtype == np.float32
    assert np.array_equal(encoder_for(copy, 16).encode(TEXTS), first), "what the store gave is what encoding gives"
    assert len(list(cache.glob("*.npy"))) == 1


def test_changed_weights_texts_or_settings_are_encoded_again(model: Path, tmp_path: Path) -> None:
    import torch

    cache = tmp_path / "vectors"
    encoder = encoder_for(model, 16, cache)
    base = encoder.encode(TEXTS)
    reversed_ = encoder.encode(TEXTS[::-1])  # the same texts in another order: another call (other batches)
    np.testing.assert_allclose(reversed_, base[::-1], atol=1e-5)
    shorter = encoder_for(model, 8, cache).encode(TEXTS)  # another max_length: other tokens, another key
    with torch.no_grad():  # a training step moves the weights in place
        next(encoder.model.parameters()).add_(0.01)
    moved = encoder.encode(TEXTS)
    assert len(list(cache.glob("*.npy"))) == 4
    assert not np.array_equal(moved, base) and not np.array_equal(shorter, base)
    assert np.array_equal(encoder_for(model, 16, cache).encode(TEXTS), base), "the first call is still stored"


def test_small_calls_are_not_stored_and_a_corrupt_file_is_encoded_again(model: Path, tmp_path: Path) -> None:
    cache = tmp_path / "vectors"
    encoder = encoder_for(model, 16, cache)
    encoder.encode(TEXTS[: MIN_CACHED_TEXTS - 1])
    assert not cache.exists()
    expected = encoder.encode(TEXTS)
    (stored,) = cache.glob("*.npy")
    stored.write_bytes(b"not an array")
    assert np.array_equal(encoder.encode(TEXTS), expected)
    assert np.array_equal(np.load(stored), expected), "the corrupt file is replaced"


def test_the_least_recently_read_files_go_first_past_the_limit(tmp_path: Path) -> None:
    import os

    one = np.ones((10, 4), np.float32)
    store = VectorCache(tmp_path, limit_bytes=3 * one.nbytes + 400)  # three files and their headers
    for i, key in enumerate("abc"):
        store.save(key, one * i)
        os.utime(store.path(key), (1000 + i, 1000 + i))
    assert store.load("a", 10, 4) is not None  # read: now the most recent
    store.save("d", one)
    assert sorted(p.stem for p in tmp_path.glob("*.npy")) == ["a", "c", "d"]
    assert store.load("a", 10, 3) is None, "another shape is not this call's result"
    store.save("huge", np.ones((1000, 4), np.float32))  # larger than the whole store: not kept
    assert not store.path("huge").exists()


def test_a_cache_path_that_is_no_folder_costs_the_reuse_not_the_vectors(model: Path, tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "vectors"
    blocked.write_text("a file where the store's folder should be")
    with caplog.at_level(logging.WARNING, logger="xc_core.encoders.vector_cache"):
        vectors = encoder_for(model, 16, blocked).encode(TEXTS)
    assert np.array_equal(vectors, encoder_for(model, 16).encode(TEXTS))
    assert "could not store" in caplog.text and str(blocked) in caplog.text
    assert blocked.read_text().startswith("a file"), "nothing the user had is overwritten"
