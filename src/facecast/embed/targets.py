"""The DAG side of the embed stage (workflow/rules/embed.smk): inputs, threads and GPU
requests of the per-shard embed jobs, the model wildcard and the default targets.

Imported when the Snakefile is parsed (by every Snakemake process, cluster jobs too), so it
stays free of torch and the backend modules (:mod:`facecast.embed.registry` names them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.datasets.targets import name_regex
from facecast.embed.registry import FITTED_BACKENDS
from facecast.io.shard_index import EMBED_INDEX

#: backends that can run on a GPU (lbp is numpy; dlib_resnet with its torch engine, below)
CUDA_BACKENDS = {"arcface_torch", "facenet", "iresnet", "onnx"}
#: backends whose CPU build computes on one core and holds the GIL (dlib-bin, i.e.
#: dlib_resnet with ``engine: dlib``): a job asks the scheduler for one thread, so two
#: shards run side by side on two cores
SINGLE_CORE_BACKENDS = {"dlib_resnet"}


def runs_dlib_engine(model_cfg: Mapping[str, Any]) -> bool:
    """True when the model runs dlib's own forward (dlib_resnet with ``engine: dlib``);
    dlib_resnet's default engine, torch, is an ordinary torch model (CPU threads, CUDA)."""
    return model_cfg.get("backend") in SINGLE_CORE_BACKENDS \
        and model_cfg.get("engine", "torch") == "dlib"


def models(config: Mapping[str, Any]) -> dict[str, Any]:
    """``embed.models``: model name -> its config block."""
    return dict((config.get("embed") or {}).get("models") or {})


def model_regex(config: Mapping[str, Any]) -> str:
    """The ``{model}`` wildcard constraint: exactly the configured embed models."""
    return name_regex(models(config))


def job_threads(model_cfg: Mapping[str, Any], embed_cfg: Mapping[str, Any]) -> int:
    """Threads an embed job of this model asks Snakemake for: ``embed.threads``, or 1 for a
    backend in :data:`SINGLE_CORE_BACKENDS` on dlib's engine (more would leave cores idle)."""
    if runs_dlib_engine(model_cfg):
        return 1
    return int(embed_cfg.get("threads", 1))


def needs_fit(model_cfg: Mapping[str, Any]) -> bool:
    """True when the model needs a per-dataset fit (``results/{ds}/embed/{model}/fit.npz``)."""
    return model_cfg.get("backend") in FITTED_BACKENDS


def uses_cuda(model_cfg: Mapping[str, Any], device: str) -> bool:
    """Whether jobs of this model should ask the scheduler for a GPU (``device: cuda``)."""
    torch_dlib = model_cfg.get("backend") == "dlib_resnet" and not runs_dlib_engine(model_cfg)
    return device == "cuda" and (model_cfg.get("backend") in CUDA_BACKENDS or torch_dlib)


def embed_shard_inputs(ds: str, shard: str, model: str,
                       model_cfg: Mapping[str, Any]) -> dict[str, str]:
    """Input files of the embed job (ds, shard, model): the faces shard, plus the fit of a
    fitted backend."""
    inputs = {"faces": f"results/{ds}/faces/{shard}.parquet"}
    if needs_fit(model_cfg):
        inputs["fit"] = f"results/{ds}/embed/{model}/fit.npz"
    return inputs


def default_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """What `rule all` builds of the embed stage: each model's index (standing for every
    shard of that model)."""
    return [EMBED_INDEX.format(ds=ds, model=m) for m in models(config)]
