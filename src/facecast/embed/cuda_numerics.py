"""CUDA numerics of an embed job: TF32, the torch.compile cache, and the batch-invariance rule.

TF32 (``embed.tf32``, default false). PyTorch lets cuDNN convolutions round float32
inputs to TF32 (10 mantissa bits) by default, and cuDNN picks a convolution algorithm by
the batch's shape, so the same crop's fp32 embedding moved with the batch size on CUDA:
measured on an H200 (issue 40, r100, L2-normalised, against one batch of 96) 1.3e-4 at
batch 1, 1.1e-5 at 7, 1.6e-5 at 32, 1.2e-5 in reversed order. With both TF32 switches off
(``torch.backends.cudnn.allow_tf32`` and ``torch.backends.cuda.matmul.allow_tf32``) the
same figures were 4.1e-7 / 4.5e-7 and 0 reversed: within :data:`INVARIANT_TOLERANCE`
(1e-6), but not bit-equal - cuDNN still picks kernels by shape. The job runs inside the
one CUDA numerics context of every stage, :func:`facecast.faces.cuda_fp32.cuda_fp32`
(both TF32 switches off unless ``embed.tf32: true``, restored after), with cuDNN's
autotuner as :func:`cudnn_benchmark` says: off wherever batch invariance is claimed (fp32,
TF32 off, not compiled: the autotuner times kernels per shape and per run, so the kernel,
and its rounding, is not a function of the settings alone), on where the claim is false
anyway (fp16/bf16, TF32, compiled). ``benchmarks/batch_invariance.py`` measures under
exactly these settings.

Mixed precision is not batch-invariant on CUDA: fp16 embeddings of the same crop differed
by 4.7e-4 at batch 7 and 3.5e-4 at batch 1 (issue 40; :data:`FP16_SPREAD`); bf16 was not
measured there (its rounding step is 8x fp16's; ``benchmarks/batch_invariance.py``
prints it on a GPU). :func:`cuda_batch_invariance` turns these rules into the provenance
keys ``batch_invariant`` / ``batch_invariance`` of a CUDA job.

Compile cache (arcface_torch ``compile: true``). A ``torch.compile`` of r100 took ~31 s
per job on the H200. :func:`compile_cache` points TorchInductor's cache
(``TORCHINDUCTOR_CACHE_DIR``: the FX graph cache, the AOTAutograd cache and the Triton
kernels below it) at one folder for the job - ``embed.compile_cache``, by default
``results/.cache/torch_compile`` of the run folder - so the embed jobs of a run (and later
runs in the same folder) share one compile; inductor writes its cache entries atomically,
so concurrent jobs may share it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: fp32 on CUDA with TF32 off: a crop's normalised embedding at any batch size equals its
#: batch-1 value to this max |difference| (4.5e-7 measured, issue 40); not bit-equal
INVARIANT_TOLERANCE = 1e-6
#: the same with TF32 on (PyTorch's default for cuDNN): batch 1 vs one batch of 96
TF32_SPREAD = 1.3e-4
#: fp16 on CUDA: (batch 7, batch 1) vs one batch of 96
FP16_SPREAD = (4.7e-4, 3.5e-4)
#: environment variable of TorchInductor's cache folder
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
DEFAULT_COMPILE_CACHE = "results/.cache/torch_compile"


def cudnn_benchmark(amp: str, tf32: bool, compiled: bool = False) -> bool:
    """Whether a CUDA embed job runs cuDNN's autotuner: only where its provenance does not
    claim batch invariance (:func:`cuda_batch_invariance`), so a claim of invariance is
    always made, and measured, with the autotuner off."""
    return not cuda_batch_invariance(amp, tf32, compiled)["batch_invariant"]


def compile_cache_dir(configured: str | os.PathLike | None) -> Path | None:
    """The folder TorchInductor caches compiles in for an embed job.

    ``configured`` (``embed.compile_cache``; relative paths are against the working
    directory, the run folder) when set; with ``""``/``None`` the environment's
    ``TORCHINDUCTOR_CACHE_DIR`` when set, else ``None`` (torch's own default folder).
    """
    if configured:
        return Path(os.path.abspath(os.fspath(configured)))
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else None


@contextlib.contextmanager
def compile_cache(folder: Path | None) -> Iterator[Path | None]:
    """``TORCHINDUCTOR_CACHE_DIR`` set to ``folder`` (created) for the block, restored after.

    ``None`` leaves the environment as it is. Yields the folder.
    """
    if folder is None:
        yield None
        return
    folder.mkdir(parents=True, exist_ok=True)
    old = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = old


def cuda_batch_invariance(amp: str, tf32: bool, compiled: bool = False) -> dict[str, Any]:
    """Provenance ``batch_invariant`` / ``forward_batch`` / ``batch_invariance`` of a CUDA
    embed job, from the rule of the module docstring (whole batches on the GPU)."""
    if amp == "fp16":
        lo, hi = sorted(FP16_SPREAD)
        why = (f"fp16 on CUDA: a crop's embedding moves with the batch (measured up to "
               f"{hi:.1e} at batch 7, {lo:.1e} at batch 1, issue 40)")
    elif amp != "none":
        why = (f"{amp} on CUDA: reduced precision (8 mantissa bits), kernels chosen by "
               "batch shape; its spread is not measured yet")
    elif tf32:
        why = (f"embed.tf32 true: TF32 convolutions and matmuls, kernels chosen by batch "
               f"shape (measured up to {TF32_SPREAD:.1e} at batch 1 vs 96, issue 40)")
    elif compiled:
        why = ("torch.compile'd model: generated kernels not covered by the fp32 rule "
               "(not measured)")
    else:
        return {"batch_invariant": True, "forward_batch": None,
                "batch_invariance": f"fp32 on CUDA with TF32 and cuDNN's autotuner off: a "
                                    f"crop's embedding equals its batch-1 value to <= "
                                    f"{INVARIANT_TOLERANCE:g} (not bit-equal; "
                                    "benchmarks/batch_invariance.py)"}
    return {"batch_invariant": False, "forward_batch": None, "batch_invariance": why}
