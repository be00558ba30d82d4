"""How an arcface_torch backbone runs its forward pass (model option ``inference``).

The loaded ``nn.Module`` computes exactly what arcface_torch's evaluation computes. On a
CPU most of its time goes to things that do not change the result: BatchNorm as a separate
pass over every activation, and oneDNN re-ordering every convolution's weights on every
call. The modes:

* ``eager``: the module as loaded (channels-last on CUDA), the literal forward.
* ``fused``: every ``Conv2d`` followed by a ``BatchNorm2d`` (eval statistics) becomes one
  convolution with the BatchNorm folded into its weight and bias
  (:func:`torch.nn.utils.fusion.fuse_conv_bn_eval`); channels-last memory layout.
* ``frozen``: the model traced, frozen and optimised for inference by TorchScript
  (``torch.jit.trace`` + ``torch.jit.freeze`` + ``torch.jit.optimize_for_inference``:
  BatchNorm folded, convolution weights pre-packed for oneDNN once). About 2x ``eager``'s
  faces per CPU second for MobileFaceNet on 2 cores. TorchScript is deprecated in recent
  torch; when tracing or freezing fails the model falls back to ``fused`` (logged).
* ``auto`` (default): ``frozen`` on CPU without mixed precision, else ``eager``.

Folding changes floating-point rounding only. Every non-eager model is checked when it is
built: on :data:`CHECK_BATCH` fixed pseudo-random inputs (another batch size than the trace's)
its features must match the eager module's to cosine >= :data:`MIN_COSINE`, else the
eager module is used and a warning says why. The mode that really runs is in every
embedding file's provenance (``inference``).
"""

from __future__ import annotations

import copy
import logging
import warnings

import torch
from torch import nn

log = logging.getLogger("facecast.embed")

INFERENCE_MODES = ("auto", "eager", "fused", "frozen")
#: features of a rewritten model must match the eager module's at least this closely
MIN_COSINE = 0.9999
#: inputs of the build-time check (and the trace: TRACE_BATCH)
CHECK_BATCH = 3
TRACE_BATCH = 2
INPUT_SIZE = 112


def resolve_mode(mode: str, device: torch.device, amp: str) -> str:
    """The mode ``auto`` stands for on ``device`` under ``amp`` (others are returned as is)."""
    if mode not in INFERENCE_MODES:
        raise ValueError(f"arcface_torch inference must be one of {', '.join(INFERENCE_MODES)}, "
                         f"got {mode!r}")
    if mode != "auto":
        return mode
    return "frozen" if device.type == "cpu" and amp in ("none", "fp16") else "eager"


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of ``model`` (eval) with each Conv2d + BatchNorm2d pair of a Sequential folded
    into one Conv2d (the BatchNorm becomes an Identity, so state-dict keys of the rest stay)."""
    model = copy.deepcopy(model).eval()
    for seq in model.modules():
        if not isinstance(seq, nn.Sequential):
            continue
        for i in range(len(seq) - 1):
            conv, bn = seq[i], seq[i + 1]
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d) \
                    and bn.track_running_stats:
                seq[i] = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
                seq[i + 1] = nn.Identity()
    return model


def _channels_last(model: nn.Module) -> nn.Module:
    return model.to(memory_format=torch.channels_last)


def freeze_model(model: nn.Module) -> torch.jit.ScriptModule:
    """``model`` traced on a batch of :data:`TRACE_BATCH`, frozen and optimised for inference."""
    x = torch.zeros(TRACE_BATCH, 3, INPUT_SIZE, INPUT_SIZE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # TorchScript's deprecation notes
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        with torch.inference_mode():
            traced = torch.jit.trace(copy.deepcopy(model).eval(), x, check_trace=False)
        frozen = torch.jit.freeze(traced.eval())
        return torch.jit.optimize_for_inference(frozen)


def min_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Smallest row-wise cosine similarity of two feature batches (float64)."""
    return float(torch.nn.functional.cosine_similarity(a.double(), b.double()).min())


def check_inputs() -> torch.Tensor:
    """:data:`CHECK_BATCH` fixed pseudo-random inputs in [-1, 1] (the scaled-crop range)."""
    gen = torch.Generator().manual_seed(0)
    return torch.rand(CHECK_BATCH, 3, INPUT_SIZE, INPUT_SIZE, generator=gen) * 2 - 1


def build_inference_model(model: nn.Module, mode: str, device: torch.device,
                          name: str = "") -> tuple[nn.Module, str]:
    """``(model to run, mode that runs)`` for an eval-mode ``model`` already on ``device``.

    ``mode`` is resolved (not ``auto``). A rewritten model that fails to build or whose
    features differ from ``model``'s (cosine < :data:`MIN_COSINE` on :func:`check_inputs`)
    is replaced: ``frozen`` by ``fused``, ``fused`` by ``eager``.
    """
    if mode == "eager":
        return (_channels_last(model) if device.type == "cuda" else model), "eager"
    x = check_inputs().to(device)
    with torch.inference_mode():
        reference = model(x).float()
    tries = ["frozen", "fused"] if mode == "frozen" else ["fused"]
    for attempt in tries:
        try:
            if attempt == "frozen":
                candidate: nn.Module = freeze_model(model)
                xin = x
            else:
                candidate = _channels_last(fold_batchnorm(model))
                xin = x.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                cos = min_cosine(candidate(xin).float(), reference)
        except Exception as exc:  # noqa: BLE001 - any failure falls back to a safer mode
            log.warning("model %s: inference %s could not be built (%s: %s); trying the next "
                        "mode", name, attempt, type(exc).__name__, exc)
            continue
        if cos >= MIN_COSINE:
            log.info("model %s: inference %s (features match the eager model to cosine %.7f)",
                     name, attempt, cos)
            return candidate, attempt
        log.warning("model %s: inference %s gives features that differ from the eager model "
                    "(min cosine %.6f < %s); not used", name, attempt, cos, MIN_COSINE)
    return (_channels_last(model) if device.type == "cuda" else model), "eager"
