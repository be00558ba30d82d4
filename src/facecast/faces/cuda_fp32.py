"""The CUDA numerics of every stage that computes with torch: TF32 and cuDNN's autotuner.

PyTorch lets cuDNN convolutions (and, after ``torch.set_float32_matmul_precision("high")``,
cuBLAS matmuls) round float32 inputs to TF32 (10 mantissa bits). A stage that claims fp32
numbers must switch that off on CUDA: with MTCNN's convolutions in TF32 (issue 48,
emulated on a CPU), landmarks moved by a median of 0.013 px and up to 1.79 px, and 23 of
23 crops changed - so the faces stage, the attribute heads, pair mining and the 1:N
search run under :func:`cuda_fp32` as the embed stage does (``embed.tf32``, default off,
is the only stage option that turns TF32 on).

:func:`cuda_fp32` sets, for the block, on CUDA only:

- TF32 of cuBLAS matmuls and cuDNN convolutions, through torch's ``fp32_precision``
  switches (``"ieee"`` off, ``"tf32"`` on) where torch has them: the legacy
  ``allow_tf32`` flags must not be mixed with them (reading
  ``torch.get_float32_matmul_precision()`` after mixing raises a RuntimeError); older
  torch gets the legacy flags;
- ``torch.backends.cudnn.benchmark`` (the autotuner, which picks a convolution kernel by
  timing: a batch's kernel, and so its rounding, may then differ from run to run);

and restores all of them on exit and on error. Off CUDA (``device`` ``cpu``, or ``auto``
on a machine without CUDA) it changes nothing and a ``cpu`` device does not even import
torch, so a job without a model stays free of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["cuda_fp32", "cuda_numerics_state", "on_cuda"]


def on_cuda(device: Any) -> bool:
    """Whether ``device`` (a ``torch.device`` or a config string: ``cpu``, ``cuda[:i]``,
    ``auto``) runs CUDA kernels here. ``cpu`` answers without importing torch."""
    name = str(getattr(device, "type", device) or "cpu").lower()
    if name == "cpu":
        return False
    if name.startswith("cuda"):
        return True
    if name == "auto":
        import torch

        return bool(torch.cuda.is_available())
    return False


def _switches() -> list[tuple[Any, str]]:
    """(object, attribute) of each TF32 switch: the ``fp32_precision`` pair where torch has
    it, else the legacy ``allow_tf32`` pair."""
    import torch

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    conv = getattr(cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and conv is not None \
            and hasattr(conv, "fp32_precision"):
        return [(matmul, "fp32_precision"), (conv, "fp32_precision")]
    return [(matmul, "allow_tf32"), (cudnn, "allow_tf32")]


def cuda_numerics_state() -> dict[str, Any]:
    """The switches :func:`cuda_fp32` sets, as they are now (``tf32`` True/False,
    ``cudnn_benchmark``): for provenance and tests."""
    import torch

    values = [getattr(obj, attr) for obj, attr in _switches()]
    tf32 = [v == "tf32" if isinstance(v, str) else bool(v) for v in values]
    return {"tf32_matmul": tf32[0], "tf32_conv": tf32[1],
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}


@contextlib.contextmanager
def cuda_fp32(device: Any, *, tf32: bool = False, benchmark: bool = False) -> Iterator[bool]:
    """TF32 (matmul and convolution) set to ``tf32`` and cuDNN's autotuner to ``benchmark``
    for the block when ``device`` runs CUDA (:func:`on_cuda`); everything restored after,
    also on an error. Yields whether the settings were applied."""
    if not on_cuda(device):
        yield False
        return
    import torch

    switches = _switches()
    old = [getattr(obj, attr) for obj, attr in switches]
    old_benchmark = torch.backends.cudnn.benchmark
    for (obj, attr), was in zip(switches, old, strict=True):
        if isinstance(was, str):
            setattr(obj, attr, "tf32" if tf32 else "ieee")
        else:
            setattr(obj, attr, bool(tf32))
    torch.backends.cudnn.benchmark = bool(benchmark)
    try:
        yield True
    finally:
        for (obj, attr), was in zip(switches, old, strict=True):
            setattr(obj, attr, was)
        torch.backends.cudnn.benchmark = old_benchmark
