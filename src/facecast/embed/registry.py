"""Backend names -> embedder classes, and building an embedder from its config block.

The DAG side (job threads, GPU requests, job inputs) is :mod:`facecast.embed.targets`.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the registry is imported when the Snakefile is parsed: no torch there
    from facecast.embed.base import Embedder

#: backend name -> (module, class); imported lazily so a CPU-only run needs no extras
BACKENDS: dict[str, tuple[str, str]] = {
    "dlib_resnet": ("facecast.embed.dlib_resnet", "DlibEmbedder"),
    "facenet": ("facecast.embed.facenet", "FacenetEmbedder"),
    "arcface_torch": ("facecast.embed.arcface.embedder", "ArcfaceTorchEmbedder"),
    "iresnet": ("facecast.embed.arcface.embedder", "ArcfaceTorchEmbedder"),  # alias
    "onnx": ("facecast.embed.onnx_model", "OnnxEmbedder"),
    "torchscript": ("facecast.embed.torchscript_model", "TorchScriptEmbedder"),
    "lbp": ("facecast.embed.lbp", "LBPEmbedder"),
    "sface": ("facecast.embed.sface", "SFaceEmbedder"),
}
#: other names of a backend (same class, same options): alias -> backend
BACKEND_ALIASES = {"iresnet": "arcface_torch"}
#: backends that need a fitted artefact from the pipeline (rule ``embed_fit``)
FITTED_BACKENDS = {"lbp"}
#: model-config keys that are not constructor options
NON_OPTIONS = {"backend", "fit_split", "pca_dim", "whiten_eps", "on_small_fit"}


def backend_class(backend: str) -> type[Embedder]:
    """The embedder class of ``backend`` (ValueError naming the known backends)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; known: {sorted(BACKENDS)}")
    module, cls = BACKENDS[backend]
    return getattr(importlib.import_module(module), cls)


def build_embedder(name: str, model_cfg: dict[str, Any], *, device: str = "auto",
                   amp: str = "none", fit_path: str | None = None,
                   threads: int | None = None) -> Embedder:
    """Load model ``name`` as its config block describes (weights are loaded now).

    A missing weight file raises :class:`~facecast.embed.base.MissingWeightsError` naming
    the file and where to put it. ``fit_path`` is the pipeline's fit for fitted backends.
    """
    cfg = dict(model_cfg)
    backend = cfg.get("backend")
    if backend is None:
        raise ValueError(f"embedding model {name!r} has no backend")
    import torch

    from facecast.embed.base import resolve_device

    cls = backend_class(backend)
    options = {k: v for k, v in cfg.items() if k not in NON_OPTIONS}
    if backend in FITTED_BACKENDS:
        options["weights"] = fit_path
    params = {k: p for k, p in inspect.signature(cls.__init__).parameters.items()
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    internal = ("self", "name", "device", "amp", "threads")
    unknown = sorted(k for k in options if k not in params)
    if unknown:
        allowed = sorted(k for k in params if k not in internal)
        if backend in FITTED_BACKENDS:
            allowed = sorted({*allowed, *NON_OPTIONS} - {"backend", "weights"})
        raise ValueError(f"embed.models.{name}: unknown option(s) {unknown} for backend "
                         f"{backend}; its options are {allowed}")
    missing = [k for k, p in params.items()
               if k not in internal and p.default is p.empty and k not in options]
    if missing:
        raise ValueError(f"embed.models.{name}.{missing[0]}: backend {backend} needs "
                         f"{missing[0]!r} (e.g. the path of its weight file); set "
                         f"embed.models.{name}.{missing[0]}")
    dev = resolve_device(device) if cls.supports_cuda else torch.device("cpu")
    if "threads" in params and threads:
        options["threads"] = threads
    return cls(name, device=dev, amp=amp, **options)
