"""glibc ``malloc`` settings for CPU embedding jobs (``embed.tune_malloc``).

A CPU forward pass allocates and frees activation buffers of a few MB to tens of MB for
every layer of every batch. With glibc's defaults each such buffer above the (adaptive)
mmap threshold is a fresh ``mmap`` whose pages the kernel must zero on first touch and
``munmap`` returns, and a freed heap top is trimmed back to the kernel: on MobileFaceNet a
third of the job's CPU time went to that page-fault churn (system time). Raising the mmap
threshold to its maximum (32 MiB), the trim threshold to 256 MiB and the heap top pad to
64 MiB lets freed buffers be reused; the job keeps up to a few hundred MB more resident.
The results do not change. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("facecast.embed")

#: mallopt parameters (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
SETTINGS = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: 256 << 20, M_TOP_PAD: 64 << 20}


def tune_malloc() -> bool:
    """Apply :data:`SETTINGS` with glibc's ``mallopt``; True when every setting took."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl, macOS, Windows): nothing to tune
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all(mallopt(param, value) == 1 for param, value in SETTINGS.items())
    if not ok:
        log.warning("glibc mallopt refused a setting; malloc left at its defaults")
    return ok
