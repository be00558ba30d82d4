"""Lossless PNG bytes for aligned crops stored inside the faces Parquet, and the one decoder
of stored crops (:func:`decode_crop`)."""

from __future__ import annotations

import io
import re
import struct
import zlib

import numpy as np
from isal import isal_zlib
from PIL import Image

#: zlib level used for crops: 1 is ~3x faster than PIL's default 6 and only a few % larger.
PNG_COMPRESS_LEVEL = 1


def encode_png(arr: np.ndarray, compress_level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """Encode an HxWx3 (or HxW) uint8 array as PNG bytes; decoding gives the array back exactly.

    The bytes depend only on the pixels and ``compress_level`` (no timestamps), so the same
    crop always encodes to the same bytes.
    """
    arr = np.asarray(arr)
    if arr.dtype != np.uint8:
        raise ValueError(f"encode_png needs uint8 pixels, got {arr.dtype}")
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
        raise ValueError(f"encode_png needs HxW, HxWx3 or HxWx4, got shape {arr.shape}")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(arr)).save(buf, format="PNG",
                                                     compress_level=int(compress_level))
    return buf.getvalue()


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _deflate(data: bytes, level: int) -> bytes:
    """A zlib stream of ``data``: level 0 stored (zlib), 1-9 deflate by ISA-L.

    ISA-L (``isal``) deflates 3-5x faster than zlib on filtered image rows at about the
    same size; its levels run 0-3, so zlib levels 1-9 map to ISA-L 1-3 (``min(level, 3)``).
    The stream is standard zlib: any PNG decoder reads it.
    """
    if level == 0:
        return zlib.compress(data, 0)
    return isal_zlib.compress(data, min(int(level), 3))


def encode_png_fast(arr: np.ndarray, compress_level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """Lossless PNG of an HxWx3 uint8 array, ~2x faster than Pillow's encoder.

    Every row uses PNG filter 2 ("up", computed with one numpy subtraction) and one zlib
    stream deflated by ISA-L at ``compress_level`` (0 = stored, fastest, ~1.5x larger;
    see :func:`_deflate`); Pillow's adaptive per-row filter choice and zlib's deflate cost
    more than everything else on the pre-aligned path, where encoding dominates.
    Deterministic (no timestamps); :func:`decode_png` gives the array back exactly.
    """
    arr = np.ascontiguousarray(arr)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"encode_png_fast needs HxWx3 uint8, got {arr.dtype} {arr.shape}")
    h, w = arr.shape[:2]
    flat = arr.reshape(h, w * 3)
    rows = np.empty((h, w * 3 + 1), np.uint8)
    rows[:, 0] = 2
    rows[0, 0] = 0  # first row: filter none (up on row 0 would equal it anyway)
    rows[0, 1:] = flat[0]
    np.subtract(flat[1:], flat[:-1], out=rows[1:, 1:])  # uint8 wrap-around = mod 256
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (_PNG_SIGNATURE + _chunk(b"IHDR", ihdr)
            + _chunk(b"IDAT", _deflate(rows.tobytes(), int(compress_level)))
            + _chunk(b"IEND", b""))


#: an object's default repr (``<_io.BytesIO object at 0x7f...>``): differs run to run
_OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


def decode_error_text(exc: BaseException) -> str:
    """``str(exc)`` of a decoding error without object addresses (Pillow names the
    ``BytesIO`` it read), so the same bad bytes give the same row message in every run."""
    return _OBJECT_REPR.sub("", str(exc))


#: first bytes of the crop formats :func:`decode_crop` reads
_JPEG_SOI = b"\xff\xd8\xff"
#: the name of the crop decoder, per format, as the embedding provenance records it
DECODER_NAMES = {"png": "opencv-png", "jpeg": "opencv-jpeg"}


def crop_format(data: bytes | None) -> str:
    """``"png"`` or ``"jpeg"`` from the first bytes of a stored crop, else ``""``."""
    if not data:
        return ""
    if bytes(data[:8]) == _PNG_SIGNATURE:
        return "png"
    return "jpeg" if bytes(data[:3]) == _JPEG_SOI else ""


def check_crop_bytes(data: bytes | None, formats: tuple[str, ...] = ("png", "jpeg")) -> str:
    """The format of stored crop bytes (:func:`crop_format`) when it is one of ``formats``
    and, for JPEG, the stream ends with its end-of-image marker; else ``ValueError`` with a
    deterministic message. Every decoder checks the bytes here first (libjpeg and nvJPEG
    may fill a truncated stream with grey and decode it; Pillow refuses it)."""
    fmt = crop_format(data)
    if fmt not in formats:
        got = fmt.upper() if fmt else f"{len(data or b'')} bytes of no known image format"
        raise ValueError(f"expected {' or '.join(f.upper() for f in formats)} bytes, got {got}")
    assert data is not None
    if fmt == "jpeg" and not bytes(data[-2:]) == b"\xff\xd9":
        raise ValueError(f"truncated JPEG data: no end-of-image marker ({len(data)} bytes)")
    return fmt


def decode_crop(data: bytes, formats: tuple[str, ...] = ("png", "jpeg")) -> np.ndarray:
    """The HxWx3 uint8 RGB pixels of stored crop bytes (PNG or JPEG, as ``formats`` allow).

    The one crop decoder of the package: OpenCV's ``imdecode``, which releases the GIL, so
    decode threads scale with the cores (Pillow's decoder holds it for part of each crop).
    The pixels equal Pillow's ``Image.open(...).convert("RGB")`` of the same bytes: PNG is
    lossless, and OpenCV's JPEG decoder is libjpeg-turbo with the same defaults as
    Pillow's (tests/test_crop_decode.py proves both). Bytes of another format, truncated or
    corrupt data (OpenCV checks PNG CRCs, Pillow does not) raise ``ValueError`` with a
    deterministic message.
    """
    import cv2  # here: the stages that only import this module's helpers skip OpenCV's import

    fmt = check_crop_bytes(data, formats)
    # 8-bit 3-channel colour (grey replicated, alpha dropped, as Pillow's convert("RGB")),
    # EXIF orientation ignored (as Pillow's decode of the bytes)
    arr = cv2.imdecode(np.frombuffer(data, np.uint8),
                       cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if arr is None or arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"truncated or corrupt {fmt.upper()} data ({len(data)} bytes)")
    return cv2.cvtColor(arr, cv2.COLOR_BGR2RGB)


def decode_png(data: bytes) -> np.ndarray:
    """Decode PNG bytes (:func:`encode_png`, :func:`encode_png_fast`) to HxWx3 uint8 RGB
    through :func:`decode_crop`; any other format raises ``ValueError``."""
    return decode_crop(data, ("png",))


def jpeg_as_crop(data: bytes | None, image: np.ndarray) -> bytes | None:
    """``data`` (a source JPEG) to store as a crop as it is, when :func:`decode_crop` gives
    exactly ``image``'s pixels (what the crop would be); else None (encode a PNG).

    Storing a pre-aligned JPEG source's bytes saves the PNG encode (the faces stage's
    largest cost there) and lets consumers decode JPEG (about 2x faster than PNG, a third of
    the bytes); the check keeps every consumer's pixels what the faces stage decoded.
    """
    if data is None or crop_format(data) != "jpeg":
        return None
    try:
        same = np.array_equal(decode_crop(data, ("jpeg",)), image)
    except ValueError:
        return None
    return bytes(data) if same else None
