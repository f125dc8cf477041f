"""The encoder's forward pass on ONNX Runtime, for serving: the same tokenizer, the HF model plus xc's mean pooling
exported as one graph (dynamic batch and sequence axes); ``TextEncoder.use_onnx`` runs it (``text.OnnxForward``).

Why: serving a single query on 2 CPU cores, torch's forward is most of a request's time (aol-1000, MiniLM-L6:
5.4 ms of an 8 ms search); ONNX Runtime runs the same graph in 1.5 ms, and the top-10 labels of 1,000 test
queries were identical (``benchmarks/bench_serve.py``, docs/benchmarks.md). A served model carries the
exported graph only when, at registration, it reproduces torch's vectors on sample texts
(:func:`export_checked`) and the served model's own search on it ranks their labels as on torch, up to ties
(``tracking/served.py``: what the encoder feeds, e.g. OAK's linker, can turn vector noise into other labels);
otherwise it serves with torch and says why.

The export (torch's dynamo exporter: ~20 s for MiniLM, 5–15 s for the tiny test BERT, most of a registration's time)
goes through a store (:class:`ExportCache`) at two levels. The same weights take their stored graph: a `-clf`
method serves its base encoder's weights byte for byte, and `ramen` the encoder `dual_encoder` served when its graph
test finds no gain. Other weights of the same architecture (every trained encoder of a run, of a test session) take
the architecture's graph with their own parameters written into it (:func:`rebind`, ~2 s for MiniLM): the graph is
exported once per architecture from a copy whose parameters are all distinct random values, so the exporter can
neither merge two equal parameters nor specialise the graph to particular values, and each of its initializers is
either a parameter, a parameter transposed, or a constant that no parameter feeds. Any graph, stored, rebound or
fresh, is checked against torch before it is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from xc_core.encoders.text import TextEncoder

log = logging.getLogger(__name__)
#: largest |torch − onnx| over the sample vectors' coordinates for the export to be used (unit vectors)
TOLERANCE = 1e-4
#: a folder of exported graphs shared by several homes (a machine's homes, a test session); default: the home's
CACHE_ENV = "XC_ONNX_CACHE"


class ExportCache:
    """Exported graphs in ``folder``: ``<key>.onnx`` and ``<key>.json`` (the exporter's name). The key hashes every
    weight and the tokenizer (:func:`~xc_core.encoders.vector_cache.weights_digest`), the source of the modules the
    graph is traced from (pooling, tower, this exporter) and torch's and onnxscript's versions. Only a graph that
    passed :func:`export_checked` is stored; files are written whole (a temporary name, then a rename), so parallel
    registrations never read half a graph."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @classmethod
    def for_home(cls, home: Path) -> ExportCache:
        """``$XC_ONNX_CACHE`` when set, else ``<home>/cache/onnx`` (safe to delete at any time)."""
        return cls(Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else home / "cache" / "onnx")

    @staticmethod
    def key(encoder: TextEncoder) -> str:
        import onnxscript
        import torch

        from xc_core.encoders.vector_cache import weights_digest

        digest = hashlib.sha256(f"{weights_digest(encoder)}\0{torch.__version__}\0{onnxscript.__version__}\0".encode())
        _add_traced_sources(digest)
        return digest.hexdigest()[:32]

    @staticmethod
    def architecture_key(encoder: TextEncoder) -> str:
        """What an exported graph depends on besides the parameters' values: the model's class and configuration,
        each parameter's name, shape and dtype, every buffer's value (position ids …), the traced sources and
        torch's and onnxscript's versions."""
        import onnxscript
        import torch

        module = _pooled(encoder)
        digest = hashlib.sha256(f"{type(encoder.model).__name__}\0{torch.__version__}\0{onnxscript.__version__}\0"
                                .encode())
        config = {k: v for k, v in encoder.model.config.to_dict().items()
                  if not k.startswith("_") and k not in ("name_or_path", "transformers_version")}
        digest.update(json.dumps(config, sort_keys=True, default=str).encode())
        for name, parameter in module.named_parameters():
            digest.update(f"{name}:{tuple(parameter.shape)}:{parameter.dtype}\0".encode())
        for name, buffer in module.named_buffers():
            digest.update(f"{name}\0".encode() + buffer.detach().cpu().contiguous().numpy().tobytes())
        _add_traced_sources(digest)
        return "arch-" + digest.hexdigest()[:27]

    def fetch_template(self, arch: str) -> tuple[Path, dict[str, list[str]], str] | None:
        """The architecture's graph, its binding (initializer → [parameter, "identity" | "transpose"]) and its
        exporter's name; None when none is stored."""
        try:
            meta = json.loads((self.folder / f"{arch}.json").read_text())
            graph = self.folder / f"{arch}.onnx"
            return (graph, dict(meta["binding"]), str(meta["exporter"])) if graph.exists() else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store_template(self, arch: str, path: Path, binding: dict[str, list[str]], exporter: str) -> None:
        self._write(arch, path, {"exporter": exporter, "binding": binding})

    def mark_unrebindable(self, arch: str, reason: str) -> None:
        """Remember that ``arch``'s graph folds a parameter (:func:`export_template`): its encoders are exported
        directly, without first exporting a template that cannot serve them."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / f"{arch}.unrebindable").write_text(reason + "\n")
        except OSError as err:
            log.warning("ONNX export cache: could not mark %s unrebindable (%s)", arch, err)

    def unrebindable(self, arch: str) -> str | None:
        """Why ``arch`` cannot be rebound, when a template export found so; else None."""
        try:
            return (self.folder / f"{arch}.unrebindable").read_text().strip()
        except OSError:
            return None

    def fetch(self, key: str, path: Path) -> str | None:
        """Copy the graph stored under ``key`` to ``path``; its exporter's name, or None when none is stored."""
        try:
            exporter = str(json.loads((self.folder / f"{key}.json").read_text())["exporter"])
            shutil.copyfile(self.folder / f"{key}.onnx", path)
        except (OSError, ValueError, KeyError):
            return None
        return exporter

    def store(self, key: str, path: Path, exporter: str) -> None:
        """Keep the graph at ``path`` under ``key``."""
        self._write(key, path, {"exporter": exporter})

    def _write(self, key: str, path: Path, meta: dict[str, Any]) -> None:
        """The graph first, then its meta (a meta always has its graph), each under a temporary name, then renamed."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for name, write in ((f"{key}.onnx", lambda f: shutil.copyfile(path, f)),
                                (f"{key}.json", lambda f: f.write_text(json.dumps(meta)))):
                partial = self.folder / f".{name}.{os.getpid()}.partial"
                write(partial)
                os.replace(partial, self.folder / name)
        except OSError as err:  # a full or read-only disk costs the reuse, never the export
            log.warning("ONNX export cache: could not store %s (%s); check that %s is a writable folder",
                        key, err, self.folder)

    def drop(self, key: str) -> None:
        for name in (f"{key}.json", f"{key}.onnx"):
            (self.folder / name).unlink(missing_ok=True)


def _pooled(encoder: TextEncoder) -> Any:
    """The module the graph is traced from: HF model + mean pooling + L2 norm, then the tower when there is one."""
    import torch

    from xc_core.encoders.text import mean_pool

    class Pooled(torch.nn.Module):
        def __init__(self, model: Any, tower: Any) -> None:
            super().__init__()
            self.model, self.tower = model, tower

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            pooled = mean_pool(hidden, attention_mask)
            return pooled if self.tower is None else self.tower(pooled, input_ids, attention_mask)

    return Pooled(encoder.model, encoder.tower)


def export(encoder: TextEncoder, path: Path) -> str:
    """Write ``encoder`` (HF model + mean pooling + L2 norm, then its tower when it has one) to ``path``; returns the
    exporter used."""
    return _export_module(_pooled(encoder).eval().cpu(), encoder, path)


def _export_module(module: Any, encoder: TextEncoder, path: Path) -> str:
    import torch

    example = encoder.tokenize(["running shoes for men", "bank"])  # padded: the mask path is traced
    args = (example["input_ids"].cpu(), example["attention_mask"].cpu())
    inputs, outputs = ["input_ids", "attention_mask"], ["vectors"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
            torch.onnx.export(module, args, str(path), dynamo=True, opset_version=18, verbose=False,
                              external_data=False,
                              dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
                              input_names=inputs, output_names=outputs)
            return "torch.onnx.export(dynamo=True), opset 18"
        except Exception as exc:  # the dynamo exporter is the newer one: fall back to TorchScript's, and say so
            log.warning("dynamo ONNX export failed (%s); using the TorchScript exporter", str(exc).splitlines()[0])
            axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                    "vectors": {0: "batch"}}
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17, dynamic_axes=axes,
                              input_names=inputs, output_names=outputs)
            return "torch.onnx.export(dynamo=False), opset 17"


def export_template(encoder: TextEncoder, path: Path) -> tuple[str, dict[str, list[str]]]:
    """Export ``encoder``'s architecture to ``path`` from a copy whose parameters are distinct random values; returns
    the exporter and the binding :func:`rebind` writes any weights of that architecture through (initializer name →
    [parameter name, "identity" | "transpose"]). Raises ``ValueError`` when a floating-point initializer is neither a
    parameter nor its transpose (the exporter folded a parameter into something else): that graph cannot be rebound.
    """
    import copy

    import onnx
    import torch
    from onnx import numpy_helper

    module = copy.deepcopy(_pooled(encoder)).eval().cpu()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.rand(parameter.shape, generator=generator, dtype=parameter.dtype) * 2 - 1)
    exporter = _export_module(module, encoder, path)
    values: dict[tuple[Any, ...], list[list[str]]] = {}
    for name, parameter in module.named_parameters():
        array = parameter.detach().numpy()
        for transform, view in (("identity", array), ("transpose", array.T if array.ndim == 2 else None)):
            if view is not None:
                values.setdefault(_fingerprint(view), []).append([name, transform])
    binding: dict[str, list[str]] = {}
    for initializer in onnx.load(str(path), load_external_data=False).graph.initializer:
        array = numpy_helper.to_array(initializer)
        found = values.get(_fingerprint(array), [])
        if len(found) == 1:
            binding[initializer.name] = found[0]
        elif np.issubdtype(array.dtype, np.floating) and array.size > 1:
            raise ValueError(f"initializer {initializer.name} {list(array.shape)} is no parameter of the module "
                             f"({len(found)} candidates): the graph cannot be rebound")
    return exporter, binding


def _add_traced_sources(digest: Any) -> None:
    """Hash the modules a graph is traced from (pooling, tower, this exporter) into ``digest``."""
    from xc_core.encoders import text, tower

    for source in (str(text.__file__), str(tower.__file__), __file__):
        digest.update(Path(source).read_bytes())


def _fingerprint(array: np.ndarray) -> tuple[Any, ...]:
    array = np.ascontiguousarray(array)
    return array.shape, array.dtype.str, hashlib.sha1(array.tobytes()).hexdigest()


def rebind(template: Path, binding: dict[str, list[str]], encoder: TextEncoder, path: Path) -> None:
    """Write ``encoder``'s parameters into the architecture's graph ``template`` (:func:`export_template`) at
    ``path``."""
    import onnx
    from onnx import numpy_helper

    parameters = dict(_pooled(encoder).named_parameters())
    graph = onnx.load(str(template))
    for initializer in graph.graph.initializer:
        if initializer.name in binding:
            name, transform = binding[initializer.name]
            array = parameters[name].detach().cpu().numpy()
            array = np.ascontiguousarray(array.T if transform == "transpose" else array)
            initializer.CopyFrom(numpy_helper.from_array(array, initializer.name))
    onnx.save(graph, str(path))


def export_checked(encoder: TextEncoder, path: Path, sample: list[str],
                   cache: ExportCache | None = None) -> dict[str, Any]:
    """Export ``encoder`` to ``path`` and compare ONNX Runtime's vectors with torch's on ``sample``; the file is
    removed (serve with torch) when they differ by more than :data:`TOLERANCE` or the export fails.

    With ``cache``: a graph stored for the same weights is taken; else the architecture's graph, exported once from
    random parameters, with these weights written into it (:func:`rebind`); either is checked like a fresh export,
    and one that fails its check (a damaged file) is dropped and made again. A graph that passes is stored under its
    weights. An architecture whose graph cannot be rebound is exported directly, as without a cache.
    """
    if cache is None:
        return _exported(encoder, path, sample)[0]
    key = ExportCache.key(encoder)
    exporter = cache.fetch(key, path)
    if exporter is not None:
        found = _checked(encoder, path, sample, f"{exporter}, from the export cache")
        if found["encoder_runtime"] == "onnxruntime":
            return found
        log.warning("ONNX export cache: the stored graph %s failed its check (%s); exporting again", key,
                    found["onnx"])
        cache.drop(key)
    found, exporter = _rebound(encoder, path, sample, cache) or _exported(encoder, path, sample)
    if found["encoder_runtime"] == "onnxruntime":
        cache.store(key, path, exporter)
    return found


def _rebound(encoder: TextEncoder, path: Path, sample: list[str],
             cache: ExportCache) -> tuple[dict[str, Any], str] | None:
    """The encoder's weights in its architecture's graph (exported and stored first when missing), checked, and the
    exporter's name; None when the architecture cannot be rebound or its graph fails (exported directly instead)."""
    arch = ExportCache.architecture_key(encoder)
    if cache.unrebindable(arch) is not None:
        return None
    stored = cache.fetch_template(arch)
    if stored is None:
        template = path.with_name(f".{path.name}.template.onnx")
        try:
            exporter, binding = export_template(encoder, template)
        except Exception as exc:  # a graph with folded parameters, or no export at all: a direct export next
            template.unlink(missing_ok=True)
            log.info("ONNX export: no architecture graph to rebind (%s); exporting these weights directly", exc)
            if isinstance(exc, ValueError):  # the architecture's, not this attempt's: never tried again
                cache.mark_unrebindable(arch, str(exc))
            return None
        cache.store_template(arch, template, binding, exporter)
        stored = (template, binding, exporter)
    graph, binding, exporter = stored
    try:
        rebind(graph, binding, encoder, path)
    except Exception as exc:  # a damaged stored graph: dropped, and a direct export next
        log.warning("ONNX export cache: the architecture graph %s could not be rebound (%s)", arch, exc)
        cache.drop(arch)
        path.unlink(missing_ok=True)
        return None
    finally:
        path.with_name(f".{path.name}.template.onnx").unlink(missing_ok=True)
    found = _checked(encoder, path, sample, f"{exporter}, these weights written into the export cache's graph "
                                            "of their architecture")
    if found["encoder_runtime"] != "onnxruntime":
        log.warning("ONNX export cache: the architecture graph %s failed its check (%s); exporting directly",
                    arch, found["onnx"])
        cache.drop(arch)
        return None
    return found, exporter


def _exported(encoder: TextEncoder, path: Path, sample: list[str]) -> tuple[dict[str, Any], str]:
    """A direct export of the encoder's own weights, checked, and the exporter's name."""
    try:
        exporter = export(encoder, path)
    except Exception as exc:  # no ONNX is a slower server, not a broken one
        path.unlink(missing_ok=True)
        return _failed(exc), ""
    return _checked(encoder, path, sample, exporter), exporter


def _failed(exc: Exception) -> dict[str, Any]:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return {"encoder_runtime": "torch", "onnx": f"export failed: {type(exc).__name__}: {first}"}


def _checked(encoder: TextEncoder, path: Path, sample: list[str], exporter: str) -> dict[str, Any]:
    """The runtime record of the graph at ``path``: ONNX Runtime when its vectors on ``sample`` are torch's within
    :data:`TOLERANCE`, else torch (the file removed)."""
    try:
        torch_vectors = encoder.encode(sample)
        encoder.use_onnx(path)
        try:
            onnx_vectors = encoder.encode(sample)
        finally:
            encoder.use_onnx(None)
        gap = float(np.abs(torch_vectors - onnx_vectors).max()) if len(sample) else 0.0
    except Exception as exc:  # a graph ONNX Runtime cannot load or run: serve with torch
        path.unlink(missing_ok=True)
        return _failed(exc)
    if gap > TOLERANCE:
        path.unlink(missing_ok=True)
        return {"encoder_runtime": "torch", "onnx": f"vectors differ from torch's by {gap:.2e} > {TOLERANCE}"}
    return {"encoder_runtime": "onnxruntime", "onnx": f"{exporter}; max |torch − onnx| {gap:.1e} on "
                                                      f"{len(sample)} label texts"}
