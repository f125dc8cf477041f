"""A light trainable tower beside a frozen text encoder: the CPU training path.

The tower adds to the frozen encoder's unit vector ``f(x)`` a linear map of it and a bag of trainable token
embeddings (the bag-of-embeddings encoders of Astec and DECAF, used here as a residual beside a transformer):

    v(x) = normalize( f(x) + W f(x) + mean_{t in tokens(x)} E[t] [+ mean_{(s, t) adjacent in x} B[h(s, t)]] )

``W`` and ``E`` start at zero, so an untrained tower *is* the frozen encoder (epoch 0 of a training run is the
shipped model, bit for bit up to the normalisation). Training touches only the tower, so a step costs a gather and
two small matrix products instead of a transformer's forward and backward pass: the frozen ``f(x)`` of every text is
computed once (:meth:`TextEncoder.freeze_base`) and read back at every step. An optional second bag ``B`` holds
adjacent token pairs hashed into ``bigrams`` rows (the word n-gram features of fastText and of XC's bag-of-words
encoders): a phrase can then move apart from its words, at the cost of one more gather per text.

A tower is saved beside the Hugging Face files of an encoder folder (:data:`WEIGHTS`, :data:`CONFIG`); the folder
still loads in plain ``transformers`` (without the tower), and :class:`~xc_core.encoders.text.TextEncoder` applies
it whenever the folder has one — training, encoding, the vector cache key and the ONNX export all see it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: the tower's weights and its shape, beside an encoder folder's ``model.safetensors``
WEIGHTS = "xc_tower.safetensors"
CONFIG = "xc_tower.json"
#: the multiplier of the token-pair hash ``(s * PAIR_HASH + t) mod bigrams`` (a prime above any vocabulary's size,
#: so distinct pairs collide only through the modulus)
PAIR_HASH = 1_000_003


def _module_class() -> Any:
    import torch
    from torch import nn

    class Tower(nn.Module):
        """``forward(base, input_ids, attention_mask)``: unit vectors (B, dim) from the frozen unit vectors ``base``
        and the texts' token ids (padding masked out of the bag)."""

        def __init__(self, vocab_size: int, dim: int, hidden: int = 0, bigrams: int = 0) -> None:
            super().__init__()
            self.vocab_size, self.dim, self.hidden, self.bigrams = vocab_size, dim, hidden, bigrams
            self.bag = nn.Embedding(vocab_size, dim, sparse=True)  # lazy Adam: a step touches its tokens only
            self.linear = nn.Linear(dim, dim, bias=False)
            nn.init.zeros_(self.bag.weight)
            nn.init.zeros_(self.linear.weight)
            self.pairs: nn.Embedding | None = None
            if bigrams:
                self.pairs = nn.Embedding(bigrams, dim, sparse=True)
                nn.init.zeros_(self.pairs.weight)
            # optional: a residual MLP on the frozen vector (its output layer at zero, so the start is unchanged)
            self.mlp: nn.Module | None = None
            if hidden:
                output = nn.Linear(hidden, dim)
                nn.init.zeros_(output.weight)
                nn.init.zeros_(output.bias)
                self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), output)

        def forward(self, base: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            mask = attention_mask.unsqueeze(-1).to(base.dtype)
            bag = (self.bag(input_ids) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            out = base + self.linear(base) + bag
            if self.pairs is not None and input_ids.shape[1] > 1:
                pair_mask = (attention_mask[:, :-1] * attention_mask[:, 1:]).unsqueeze(-1).to(base.dtype)
                pair_ids = (input_ids[:, :-1] * PAIR_HASH + input_ids[:, 1:]) % self.bigrams
                out = out + (self.pairs(pair_ids) * pair_mask).sum(dim=1) / pair_mask.sum(dim=1).clamp(min=1.0)
            if self.mlp is not None:
                out = out + self.mlp(base)
            return torch.nn.functional.normalize(out, dim=-1)

        def sparse_weights(self) -> list[torch.Tensor]:
            """The tables whose gradient is sparse (the bags): lazy Adam's, not AdamW's."""
            return [self.bag.weight, *([self.pairs.weight] if self.pairs is not None else [])]

    return Tower


def new_tower(vocab_size: int, dim: int, hidden: int = 0, bigrams: int = 0) -> Any:
    """A zero tower (the identity on the frozen encoder's vectors) for a vocabulary and a vector size; ``hidden``:
    the width of its residual MLP (0: none); ``bigrams``: the rows of its hashed token-pair bag (0: none)."""
    return _module_class()(vocab_size, dim, hidden, bigrams)


def save_tower(tower: Any, folder: Path) -> None:
    """Write ``tower`` into the encoder folder ``folder`` (which must exist)."""
    from safetensors.torch import save_file

    state = {k: v.detach().cpu().contiguous() for k, v in tower.state_dict().items()}
    save_file(state, str(Path(folder) / WEIGHTS))
    (Path(folder) / CONFIG).write_text(json.dumps({"vocab_size": tower.vocab_size, "dim": tower.dim,
                                                  "hidden": tower.hidden, "bigrams": tower.bigrams}) + "\n")


def load_tower(folder: Path) -> Any | None:
    """The tower saved in an encoder folder, or None when it has none. A folder with one of the two files but not
    the other, or weights of another shape, is a clear error: the encoder would be served without what trained it."""
    folder = Path(folder)
    weights, config = folder / WEIGHTS, folder / CONFIG
    if not weights.exists() and not config.exists():
        return None
    if not (weights.exists() and config.exists()):
        missing = CONFIG if weights.exists() else WEIGHTS
        raise FileNotFoundError(f"{folder}: the encoder's tower is incomplete ({missing} is missing): copy the whole "
                                f"encoder folder, or delete {WEIGHTS} and {CONFIG} to use the encoder without it")
    try:
        shape = json.loads(config.read_text())
        tower = new_tower(int(shape["vocab_size"]), int(shape["dim"]), int(shape.get("hidden", 0)),
                          int(shape.get("bigrams", 0)))
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{config}: expected a JSON object with integer 'vocab_size' and 'dim' ({err}); the file "
                         "is written by xc's trainer: train the encoder again or restore the file") from err
    load_tower_weights(tower, folder)
    return tower


def load_tower_weights(tower: Any, folder: Path) -> None:
    """Put the weights of ``folder``'s tower into ``tower`` (same shape)."""
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS
    try:
        tower.load_state_dict(load_file(str(path)))
    except RuntimeError as err:
        raise ValueError(f"{path}: the tower's weights do not match {CONFIG} ({str(err).splitlines()[0]}); train "
                         "the encoder again or restore the folder") from err
