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
* ``half`` (CUDA under ``embed.amp`` fp16/bf16): the weights stored once in the reduced
  precision instead of cast by autocast at every call, channels-last; what arcface_torch's
  forward runs in fp32 stays fp32 (each arch's ``fp32_modules``: iResNet ``fc`` +
  ``features``, MobileFaceNet ``conv_sep`` + ``features``, ViT ``norm`` + ``feature`` and
  ``pos_embed``, so its residual stream stays fp32), and so do LayerNorms (autocast computes
  them in fp32). The forward still runs under autocast. Measured on an H200 (issue 40, r100
  fp16, batch 512): 11,855 faces/s against 10,730 for autocast alone (channels-last).
  Without reduced precision that really runs (``amp: none``, or fp16 on a CPU, where
  autocast ignores it) it falls back to ``eager`` (logged).
* ``auto`` (default): ``frozen`` on CPU without mixed precision; on CUDA ``half`` under
  fp16, else ``eager``. bf16 stays eager: bf16 weights keep 8 mantissa bits, and the r100
  half model's features matched the eager module's only to cosine 0.999805 on an H200
  (issue 48) - below :data:`MIN_COSINE`, so the check would drop it on every build; no
  threshold that admits it would still catch a broken model, so ``inference: half`` needs
  ``embed.amp: fp16`` (a config error otherwise) and bf16 runs autocast on the eager
  module.

``compile: true`` (model option) wraps the model that runs in ``torch.compile`` (dynamic
batch dimension, so one compile serves every batch size; a batch of one crop is run as
two, as a size-1 dimension would compile again). The compile happens at build time, on
the check batch, timed (``compile_seconds`` in the log and provenance), with TorchInductor's
cache where :mod:`facecast.embed.cuda_numerics` points it. Measured on an H200 (r100 fp16,
half weights): 16,475 faces/s against 11,855, for ~31 s of compile per job without a cache.
A compiled model that fails to build or to match is dropped (logged) and the uncompiled
one runs.

Folding and half weights change floating-point rounding only. Every non-eager model (and
every compiled one) is checked when it is built: on :data:`CHECK_BATCH` fixed face images
(:func:`check_inputs`: faces of the synthetic demo's renderer, not noise - the rounding
error of half weights on faces was 2-3x that on uniform noise, issue 48; another batch
size than the trace's) its features must match the eager module's on the same device,
under the same autocast, to cosine >= :data:`MIN_COSINE` (a NaN or inf cosine fails),
else the eager (or uncompiled) module is used and a warning says why. The mode that really runs is in every
embedding file's provenance (``inference``).
"""

from __future__ import annotations

import copy
import logging
import time
import warnings

import torch
from torch import nn

from facecast.embed.base import AMP_DTYPES, active_amp, autocast

log = logging.getLogger("facecast.embed")

INFERENCE_MODES = ("auto", "eager", "fused", "frozen", "half")
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
    if mode == "half" and amp != "fp16":
        raise ValueError(f"arcface_torch inference half needs embed.amp fp16 (the half "
                         f"weights' precision; bf16 stays eager), got amp {amp}")
    if mode != "auto":
        return mode
    if device.type == "cpu":
        return "frozen" if amp in ("none", "fp16") else "eager"
    return "half" if amp == "fp16" else "eager"


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
    """Smallest row-wise cosine similarity of two feature batches (float64); NaN when any
    feature is not finite (so ``cos >= MIN_COSINE`` fails for it)."""
    a, b = a.double(), b.double()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return float("nan")
    return float(torch.nn.functional.cosine_similarity(a, b).min())


def matches(cos: float) -> bool:
    """Whether a rewritten model's :func:`min_cosine` passes the build-time check: at least
    :data:`MIN_COSINE`, never NaN."""
    return bool(cos >= MIN_COSINE)


def check_inputs() -> torch.Tensor:
    """:data:`CHECK_BATCH` fixed face images scaled to [-1, 1] like a crop: the synthetic
    demo's renderer (seeded), rendered at 150 px and the middle 112 px kept."""
    import numpy as np

    from facecast.datasets.synthetic.render import render_image
    from facecast.datasets.synthetic.sampling import sample_covariates, sample_identity

    rng = np.random.default_rng(0)
    faces = []
    for _ in range(CHECK_BATCH):
        traits = sample_identity(rng)
        img = render_image(traits, sample_covariates(rng, traits), 150, rng)
        faces.append(img[19:19 + INPUT_SIZE, 19:19 + INPUT_SIZE])
    x = torch.from_numpy(np.stack(faces)).permute(0, 3, 1, 2).float()
    return (x / 127.5 - 1.0).contiguous()


def half_model(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """A channels-last copy of eval ``model`` with its weights and buffers in ``dtype``,
    except the arch's ``fp32_modules`` (modules or parameters) and every LayerNorm, which
    stay float32 (module docstring, ``half``)."""
    half = copy.deepcopy(model).eval().to(dtype)
    for mod in half.modules():
        if isinstance(mod, nn.LayerNorm):
            mod.float()
    for name in getattr(type(model), "fp32_modules", ()):
        part = getattr(half, name)
        if isinstance(part, nn.Parameter):
            part.data = part.data.float()
        else:
            part.float()
    return _channels_last(half)


def check_input(device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """:func:`check_inputs` on ``device`` in the layout the embedder feeds the model."""
    x = check_inputs().to(device)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def forward(model: nn.Module, x: torch.Tensor, device: torch.device, amp: str) -> torch.Tensor:
    """float32 features of ``x`` as the embedder runs the model (inference mode, autocast)."""
    with torch.inference_mode(), autocast(device, amp):
        return model(x).float()


def _eager(model: nn.Module, device: torch.device) -> tuple[nn.Module, str]:
    return (_channels_last(model) if device.type == "cuda" else model), "eager"


def build_half(model: nn.Module, device: torch.device, amp: str,
               name: str = "") -> tuple[nn.Module, str]:
    """``(model, mode)``: the half-weights model when it builds and its features match the
    eager module's under the same autocast (cosine >= :data:`MIN_COSINE`), else eager."""
    active = active_amp(device, amp)
    if AMP_DTYPES.get(active) is None:
        log.warning("model %s: inference half needs reduced precision that runs (amp %s on "
                    "%s); using eager", name, amp, device.type)
        return _eager(model, device)
    x = check_input(device, channels_last=device.type == "cuda")
    try:
        reference = forward(model, x, device, amp)
        candidate = half_model(model, AMP_DTYPES[active])
        cos = min_cosine(forward(candidate, x, device, amp), reference)
    except Exception as exc:  # noqa: BLE001 - any failure falls back to eager
        log.warning("model %s: inference half could not be built (%s: %s); using eager",
                    name, type(exc).__name__, exc)
        return _eager(model, device)
    if matches(cos):
        log.info("model %s: inference half (%s weights; features match the eager model to "
                 "cosine %.7f)", name, active, cos)
        return candidate, "half"
    log.warning("model %s: inference half gives features that differ from the eager model "
                "(min cosine %.6f < %s); not used", name, cos, MIN_COSINE)
    return _eager(model, device)


def compile_model(model: nn.Module, eager: nn.Module, device: torch.device, amp: str,
                  name: str = "", channels_last: bool = False,
                  backend: str = "inductor") -> tuple[nn.Module, float | None]:
    """``(torch.compile(model), compile seconds)``, compiled now on the check batch; or
    ``(model, None)`` when compiling fails or the compiled features differ from the eager
    module ``eager``'s (cosine < :data:`MIN_COSINE`), with a warning."""
    x = check_input(device, channels_last=channels_last)
    try:
        reference = forward(eager, x, device, amp)
        compiled = torch.compile(model, dynamic=True, backend=backend)
        start = time.perf_counter()
        out = forward(compiled, x, device, amp)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        cos = min_cosine(out, reference)
    except Exception as exc:  # noqa: BLE001 - any failure keeps the uncompiled model
        log.warning("model %s: torch.compile failed (%s: %s); running uncompiled", name,
                    type(exc).__name__, exc)
        return model, None
    if not matches(cos):  # NaN included: a compiled model that gives NaN is not kept
        log.warning("model %s: the compiled model's features differ from the eager model "
                    "(min cosine %.6f < %s); running uncompiled", name, cos, MIN_COSINE)
        return model, None
    log.info("model %s: torch.compile took %.1f s (features match the eager model to cosine "
             "%.7f)", name, seconds, cos)
    return compiled, seconds


def build_inference_model(model: nn.Module, mode: str, device: torch.device,
                          name: str = "", amp: str = "none") -> tuple[nn.Module, str]:
    """``(model to run, mode that runs)`` for an eval-mode ``model`` already on ``device``.

    ``mode`` is resolved (not ``auto``). A rewritten model that fails to build or whose
    features differ from ``model``'s (cosine < :data:`MIN_COSINE` on :func:`check_inputs`)
    is replaced: ``frozen`` by ``fused``, ``fused`` and ``half`` by ``eager``. ``amp`` is
    only read by ``half`` (:func:`build_half`).
    """
    if mode == "half":
        return build_half(model, device, amp, name)
    if mode == "eager":
        return _eager(model, device)
    x = check_input(device)
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
                xin = check_input(device, channels_last=True)
            with torch.inference_mode():
                cos = min_cosine(candidate(xin).float(), reference)
        except Exception as exc:  # noqa: BLE001 - any failure falls back to a safer mode
            log.warning("model %s: inference %s could not be built (%s: %s); trying the next "
                        "mode", name, attempt, type(exc).__name__, exc)
            continue
        if matches(cos):
            log.info("model %s: inference %s (features match the eager model to cosine %.7f)",
                     name, attempt, cos)
            return candidate, attempt
        log.warning("model %s: inference %s gives features that differ from the eager model "
                    "(min cosine %.6f < %s); not used", name, attempt, cos, MIN_COSINE)
    return _eager(model, device)
