"""insightface verification ``.bin`` sets (lfw.bin, cfp_fp.bin, agedb_30.bin, ...).

A ``.bin`` is a pickle of ``(bins, issame_list)``: ``bins`` the encoded images (JPEG/PNG
bytes, or uint8 numpy arrays of those bytes), two per pair, pairs consecutive
(images ``2k`` and ``2k+1`` form pair ``k``); ``issame_list`` one bool per pair.

The file is never handed to ``pickle.load``: :class:`RestrictedUnpickler` resolves only
the few callables this layout needs (numpy's array and scalar reconstructors, restricted
to bool and uint8 data, ``_codecs.encode`` for Python 3 protocol-2 ``bytes`` in latin-1,
and ``bytes()`` without arguments for an empty entry) and refuses every other global with
:class:`UnsafePickleError`. The result is then checked against the layout: a pair of
(list of encoded images, list of bools), two images per label, else :class:`DatasetError`
naming the file and what is wrong. The dataset's ``layout`` (``pairs``; ``cc11``: eleven
equal consecutive blocks; ``blocks``: the consecutive blocks a facecast ``export.bins``
file's ``.json`` sidecar lists, :mod:`facecast.config.bin_sets`) is checked against the
pair count when the manifest is built (:func:`check_layout`, :func:`block_ranges`).

An empty entry is a manifest row with status ``decode_error``; other bytes that do not
decode as an image get that status from the faces stage. Either way the image's pairs keep
a status and the evaluation counts them as skipped.

The images become a dataset (kind ``insightface_bin``): manifest paths are locators
``<bin name>#<index>``. The file names no identities; each image gets a placeholder
identity from the pair labels (``p<k>`` for both images of a genuine pair, ``p<k>a`` /
``p<k>b`` for an impostor pair), so identities are consistent with the labels but the same
person in two pairs has two identities: do not mine benchmarks from such a dataset.
"""

from __future__ import annotations

import io
import os
import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.config.bin_sets import (
    BIN_FOLDS,
    CC11_NAMES,
    LAYOUT_BLOCKS,
    SidecarError,
    cc11_refusal,
    sidecar_blocks,
)
from facecast.datasets.manifest import DatasetError

#: numpy dtypes a .bin may carry (bytes of images, bool labels)
_ALLOWED_DTYPES = {np.dtype(np.uint8), np.dtype(np.bool_), np.dtype(np.int8)}
_NUMPY_CORE = ("numpy.core.multiarray", "numpy._core.multiarray")


class UnsafePickleError(DatasetError):
    """The pickle asks for something a verification .bin never needs."""


def _safe_dtype(*args: Any) -> np.dtype:
    dt = np.dtype(*args)
    if dt not in _ALLOWED_DTYPES:
        raise UnsafePickleError(f"refused numpy dtype {dt} (only bool and uint8 arrays are "
                                "allowed in a verification .bin)")
    return dt


def _safe_reconstruct(cls: Any, shape: Any, dtype_code: Any) -> np.ndarray:
    if cls is not np.ndarray:
        raise UnsafePickleError(f"refused array subclass {cls!r}")
    return np.ndarray.__new__(np.ndarray, shape, _safe_dtype(dtype_code))


def _safe_scalar(dtype: Any, data: Any = None) -> Any:
    dt = _safe_dtype(dtype)
    if not isinstance(data, (bytes, bytearray)) or len(data) != dt.itemsize:
        raise UnsafePickleError("refused numpy scalar without raw bytes of its size")
    return np.frombuffer(bytes(data), dtype=dt)[0]


def _safe_frombuffer(buf: Any, dtype: Any, shape: Any, order: str = "C") -> np.ndarray:
    # numpy's reduction of arrays for pickle protocol 5
    if not isinstance(buf, (bytes, bytearray, pickle.PickleBuffer)):
        raise UnsafePickleError("refused numpy _frombuffer without a byte buffer")
    dt = _safe_dtype(dtype)
    return np.frombuffer(bytes(buf), dtype=dt).reshape(shape, order=order).copy()


def _safe_encode(text: Any, encoding: str = "utf-8") -> bytes:
    # Python 3 pickles `bytes` with protocol < 3 as _codecs.encode(str, 'latin1')
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError("refused _codecs.encode other than (str, 'latin1')")
    return text.encode("latin-1")


def _safe_empty_bytes(*args: Any) -> bytes:
    # Python 3 pickles b"" with protocol < 3 as bytes()
    if args:
        raise UnsafePickleError("refused bytes(...) with arguments")
    return b""


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("builtins", "bytes"): _safe_empty_bytes,
    ("__builtin__", "bytes"): _safe_empty_bytes,
    **{(m, "_reconstruct"): _safe_reconstruct for m in _NUMPY_CORE},
    **{(m, "scalar"): _safe_scalar for m in _NUMPY_CORE},
    **{(m, "_frombuffer"): _safe_frombuffer for m in ("numpy.core.numeric",
                                                       "numpy._core.numeric")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _safe_dtype,
    ("_codecs", "encode"): _safe_encode,
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only tuples, lists, bytes, bools and bool/uint8 arrays."""

    def find_class(self, module: str, name: str) -> Any:
        fn = _ALLOWED_GLOBALS.get((module, name))
        if fn is None:
            raise UnsafePickleError(
                f"refused to load {module}.{name}: a verification .bin holds only lists of "
                "encoded images and bools, so this file is not one (or is malicious)")
        return fn


def restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler` (``encoding='bytes'`` for
    Python 2 pickles, as insightface loads them)."""
    return RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()


def _as_image_bytes(item: Any) -> bytes | None:
    if isinstance(item, (bytes, bytearray)):
        return bytes(item)
    if isinstance(item, np.ndarray) and item.dtype == np.uint8 and item.ndim == 1:
        return item.tobytes()
    return None


def _as_issame(issame: Any, path: Path) -> np.ndarray:
    """The pair labels as a bool array: Python / numpy bools (0 and 1 accepted, as numpy
    bool arrays of old files hold); anything else is refused with its index and type."""
    if isinstance(issame, np.ndarray) and issame.dtype == np.bool_ and issame.ndim == 1:
        return issame.astype(bool)
    if not isinstance(issame, (list, tuple, np.ndarray)):
        raise DatasetError(f"{path}: expected a pickled (list of encoded images, list of "
                           f"bools); the issame labels are a {type(issame).__name__}, not a "
                           "list of bools")
    out = np.zeros(len(issame), dtype=bool)
    for k, x in enumerate(issame):
        if isinstance(x, (bool, np.bool_)) or (isinstance(x, (int, np.integer))
                                                and int(x) in (0, 1)):
            out[k] = bool(x)
        else:
            raise DatasetError(f"{path}: issame label {k} is {x!r} "
                               f"({type(x).__name__}), not a bool; the file is not an "
                               "insightface verification .bin")
    return out


def check_layout(path: str | os.PathLike, n_pairs: int, layout: str = "pairs") -> int:
    """Pairs per block of ``layout`` (:data:`facecast.config.bin_sets.LAYOUT_BLOCKS`);
    DatasetError naming the file, the count and the layout when the pairs do not split into
    that many equal consecutive blocks of :data:`~facecast.config.bin_sets.BIN_FOLDS`
    equal folds (CC11: 11 blocks of 10 folds, so a multiple of 110 pairs). A ``pairs``
    layout is one block of any size (insightface's KFold makes the first ``n % 10`` folds
    one pair longer). A ``cc11`` layout is refused where the file's facecast sidecar says
    ``cc11_compatible: false`` (:func:`facecast.config.bin_sets.cc11_refusal`), whatever its
    pair count."""
    if layout not in LAYOUT_BLOCKS:
        raise DatasetError(f"{path}: unknown .bin layout {layout!r} "
                           f"({' | '.join(LAYOUT_BLOCKS)})")
    if layout == "blocks":
        return max(n for _, _, n in block_ranges(path, n_pairs, layout))
    blocks = LAYOUT_BLOCKS[layout]
    if blocks == 1:
        return n_pairs
    refusal = cc11_refusal(path)
    if refusal:
        raise DatasetError(f"{path}: layout cc11 refused: {refusal}")
    unit = blocks * BIN_FOLDS
    if n_pairs == 0 or n_pairs % unit:
        raise DatasetError(
            f"{path}: {n_pairs:,} pairs do not split into layout {layout}'s {blocks} equal "
            f"consecutive blocks ({', '.join(CC11_NAMES)}) of {BIN_FOLDS} equal folds: the "
            f"count must be a multiple of {unit} (cc11.bin has 110,000 pairs, cc11_val.bin "
            "11,000). Is it a CC11 file? Use layout: pairs for a single benchmark.")
    return n_pairs // blocks


def block_ranges(path: str | os.PathLike, n_pairs: int, layout: str = "pairs"
                 ) -> list[tuple[str, int, int]]:
    """``(name, first pair, pairs)`` of each block of ``layout``, in file order: the whole
    file (name ''), CC11's eleven equal blocks (:func:`check_layout`), or the blocks of the
    ``.json`` sidecar of a ``blocks`` file, which must tile the file's pairs exactly (else
    DatasetError naming the sidecar and the mismatch)."""
    if layout == "pairs":
        return [("", 0, int(n_pairs))]
    if layout == "cc11":
        m = check_layout(path, n_pairs, layout)
        return [(name, k * m, m) for k, name in enumerate(CC11_NAMES)]
    try:
        blocks = sidecar_blocks(path)
    except SidecarError as exc:
        raise DatasetError(str(exc)) from None
    start = 0
    for b in blocks:
        if b["first_pair"] != start or b["n_pairs"] < 1:
            raise DatasetError(f"{path}: its sidecar's block {b['name']} starts at pair "
                               f"{b['first_pair']} with {b['n_pairs']} pairs, but the blocks "
                               f"before it end at {start}: blocks must be consecutive")
        start += b["n_pairs"]
    if start != n_pairs:
        raise DatasetError(f"{path}: {n_pairs:,} pairs, but its sidecar's blocks hold "
                           f"{start:,}: the .bin and its .json do not belong together")
    return [(b["name"], b["first_pair"], b["n_pairs"]) for b in blocks]


def load_bin(path: str | os.PathLike) -> tuple[list[bytes], np.ndarray]:
    """``(encoded images, issame)`` of a verification .bin; DatasetError if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"verification .bin {path} does not exist")
    try:
        obj = restricted_loads(path.read_bytes())
    except UnsafePickleError as exc:
        raise UnsafePickleError(f"{path}: {exc}") from None
    except Exception as exc:  # truncated or not a pickle at all
        raise DatasetError(f"{path}: not a readable insightface .bin "
                           f"({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, (tuple, list)) or len(obj) != 2:
        raise DatasetError(f"{path}: expected a pickled (list of encoded images, list of "
                           f"bools) pair; got a {type(obj).__name__}"
                           + (f" of {len(obj)}" if isinstance(obj, (tuple, list)) else ""))
    bins, issame = obj
    if not isinstance(bins, (list, tuple, np.ndarray)):
        raise DatasetError(f"{path}: expected a pickled (list of encoded images, list of "
                           f"bools); the images are a {type(bins).__name__}, not a list")
    images = []
    for i, item in enumerate(bins):
        b = _as_image_bytes(item)
        if b is None:
            raise DatasetError(f"{path}: image {i} is {type(item).__name__}, not encoded bytes")
        images.append(b)
    same = _as_issame(issame, path)
    if len(images) != 2 * len(same):
        raise DatasetError(f"{path}: {len(images)} images for {len(same)} pairs "
                           f"(expected {2 * len(same)})")
    return images, same


def write_bin(path: str | os.PathLike, images: list[bytes], issame: list[bool],
              protocol: int = 4) -> None:
    """Write a verification .bin in insightface's layout (for tests and tools)."""
    with open(path, "wb") as fh:
        pickle.dump((list(images), list(map(bool, issame))), fh, protocol=protocol)


_CACHE: dict[tuple[str, float], tuple[list[bytes], np.ndarray]] = {}
_LOCK = threading.Lock()


def cached_bin(path: str | os.PathLike) -> tuple[list[bytes], np.ndarray]:
    """:func:`load_bin`, loaded once per process (the faces stage reads images by index)."""
    real = os.path.realpath(path)
    key = (real, os.path.getmtime(real))
    with _LOCK:
        if key not in _CACHE:
            _CACHE.clear()
            _CACHE[key] = load_bin(real)
        return _CACHE[key]


def placeholder_identities(issame: np.ndarray) -> list[str]:
    """Identity per image from the pair labels (module docstring)."""
    out = []
    for k, same in enumerate(issame.tolist()):
        out += [f"p{k}", f"p{k}"] if same else [f"p{k}a", f"p{k}b"]
    return out


def read_insightface_bin(path: str | os.PathLike, layout: str = "pairs") -> pd.DataFrame:
    """Raw manifest rows of a .bin: ``path`` (``<bin name>#<i>``), placeholder ``identity``.

    The pair count is checked against ``layout`` (:func:`check_layout`), so a file that does
    not split into its declared blocks fails here, before any image is processed.
    """
    path = Path(path)
    images, issame = load_bin(path)
    check_layout(path, len(issame), layout)
    n = len(images)
    status = ["ok" if len(b) else "decode_error" for b in images]
    message = ["" if len(b) else f"image {i} of {path.name} is empty" for i, b in
               enumerate(images)]
    return pd.DataFrame({"path": [f"{path.name}#{i}" for i in range(n)],
                         "identity": placeholder_identities(issame),
                         "status": status, "message": message})
