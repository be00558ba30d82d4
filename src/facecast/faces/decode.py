"""Decode any image file to an RGB uint8 array, or say clearly why not.

:func:`decode_image` never raises for bad input: it returns ``(array, status, message)``
with status ``ok``, ``decode_error`` (empty, not an image, truncated/corrupt, over the pixel
limit), ``missing`` or ``unreadable``. EXIF orientation is applied; grayscale, palette,
RGBA/LA (composited on white), CMYK, 16-bit and float images all come out as 8-bit RGB.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

#: Default decompression-bomb limit (pixels, checked from the header before decoding).
DEFAULT_MAX_PIXELS = 100_000_000
_EXIF_ORIENTATION = 0x0112
_SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
_ALPHA_MODES = ("RGBA", "RGBa", "LA", "La", "PA")


@dataclass
class DecodedImage:
    """Result of :func:`read_image`.

    ``array`` is HxWx3 uint8 RGB (None unless ``status == "ok"``). ``width``/``height`` are
    the full-resolution size after EXIF orientation (0 when unknown). ``scale_x``/``scale_y``
    are array pixels per full-resolution pixel: 1.0 unless JPEG reduced decoding was asked for
    with ``min_side``. ``jpeg`` holds the source bytes when they are a JPEG decoded as is
    (full size, no EXIF rotation, mode RGB or L): then ``array`` is exactly their decode, and
    the faces stage may store them as the crop (``faces.keep_jpeg``).
    """

    array: np.ndarray | None
    status: str
    message: str
    width: int = 0
    height: int = 0
    scale_x: float = 1.0
    scale_y: float = 1.0
    jpeg: bytes | None = None


def _error(status: str, message: str, width: int = 0, height: int = 0) -> DecodedImage:
    return DecodedImage(None, status, message, width, height)


def _read_bytes(data_or_path: bytes | bytearray | memoryview | str | os.PathLike
                ) -> tuple[bytes | None, DecodedImage | None]:
    if isinstance(data_or_path, (bytes, bytearray, memoryview)):
        return bytes(data_or_path), None
    path = Path(data_or_path)
    try:
        return path.read_bytes(), None
    except FileNotFoundError:
        return None, _error("missing", f"file not found: {path}")
    except OSError as exc:  # directory, permission, I/O error
        return None, _error("unreadable", f"cannot read {path}: {exc.strerror or exc}")


def _sixteen_to_eight(a: np.ndarray) -> np.ndarray:
    a = np.clip(a.astype(np.int64), 0, 65535)
    return ((a * 255 + 32767) // 65535).astype(np.uint8)


def to_rgb_array(im: Image.Image) -> np.ndarray:
    """HxWx3 uint8 RGB pixels of a loaded PIL image of any mode.

    16-bit integer images are scaled (65535 -> 255), 32-bit ``I`` images above 255 are
    treated as 16-bit, float ``F`` images in [0, 1] are scaled to [0, 255] (others clipped),
    images with alpha or a transparent palette entry are composited on white.
    """
    mode = im.mode
    if mode == "RGB" and "transparency" not in im.info:
        arr = np.asarray(im)
    elif mode in _SIXTEEN_BIT_MODES:
        arr = _sixteen_to_eight(np.asarray(im))
    elif mode == "I":
        a = np.asarray(im)
        arr = _sixteen_to_eight(a) if a.size and a.max() > 255 else np.clip(a, 0, 255).astype(np.uint8)
    elif mode == "F":
        a = np.nan_to_num(np.asarray(im, dtype=np.float32), nan=0.0, posinf=255.0, neginf=0.0)
        if a.size and a.max() <= 1.0:
            a = a * 255.0
        arr = np.clip(np.rint(a), 0, 255).astype(np.uint8)
    elif mode in _ALPHA_MODES or "transparency" in im.info:
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        arr = np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))
    else:  # L, 1, P, CMYK, YCbCr, LAB, HSV, ...
        arr = np.asarray(im.convert("RGB"))
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _orientation(im: Image.Image) -> int:
    try:
        value = int(im.getexif().get(_EXIF_ORIENTATION, 1))
    except Exception:  # broken EXIF block: treat as upright
        return 1
    return value if 1 <= value <= 8 else 1


def _allow_pixels(max_pixels: int) -> None:
    """Let Pillow open images up to ``max_pixels`` (our own header check enforces it).

    Pillow refuses images over twice ``Image.MAX_IMAGE_PIXELS`` (about 179 MP) on its own,
    which would silently cap a larger ``faces.max_pixels``. The limit is only ever raised
    (never lowered), so concurrent decoders with different limits stay safe.
    """
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and max_pixels > limit:
        Image.MAX_IMAGE_PIXELS = int(max_pixels)


def read_image(data_or_path: bytes | bytearray | memoryview | str | os.PathLike,
               max_pixels: int = DEFAULT_MAX_PIXELS, *, min_side: int = 0) -> DecodedImage:
    """Decode an image file (path or bytes) to RGB; never raises for bad input.

    ``max_pixels`` rejects images whose header declares more pixels (decompression bombs)
    before any pixel is decoded. ``min_side > 0`` lets JPEGs decode at a reduced DCT scale
    (1/2, 1/4, 1/8) as long as the longer side stays at least ``min_side`` pixels; the
    returned ``scale_x``/``scale_y`` map array pixels back to full-resolution pixels.
    """
    data, err = _read_bytes(data_or_path)
    if err is not None:
        return err
    if not data:
        return _error("decode_error", "empty file (0 bytes)")
    _allow_pixels(max_pixels)
    with warnings.catch_warnings():
        # we enforce our own limit below; Pillow's warning would only spam the log
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:
            return _error("decode_error", f"not a recognised image format ({len(data)} bytes)")
        except Image.DecompressionBombError as exc:
            return _error("decode_error", f"image too large (decompression bomb guard): {exc}")
        except Exception as exc:  # malformed headers raise all sorts of errors
            return _error("decode_error", f"cannot open image: {type(exc).__name__}: {exc}")
        w, h = im.size
        if w <= 0 or h <= 0:
            return _error("decode_error", f"image has no pixels ({w}x{h})")
        if w * h > max_pixels:
            return _error("decode_error", f"image too large: {w}x{h} = {w * h} pixels exceeds "
                          f"max_pixels {max_pixels}", w, h)
        if im.format == "PNG":
            # PNG chunks carry CRCs but Pillow checks them only in verify(); a flipped bit in
            # IDAT would otherwise decode silently to wrong pixels
            try:
                im.verify()
            except Exception as exc:
                return _error("decode_error", f"truncated or corrupt image data: "
                              f"{type(exc).__name__}: {exc}", w, h)
            im = Image.open(io.BytesIO(data))
        orientation = _orientation(im)
        ow, oh = (h, w) if orientation in (5, 6, 7, 8) else (w, h)
        try:
            if min_side > 0 and im.format == "JPEG" and max(w, h) > min_side:
                r = min_side / max(w, h)
                im.draft(None, (math.ceil(w * r), math.ceil(h * r)))
            im.load()
        except Exception as exc:  # truncated stream, corrupt data, bad decoder state
            return _error("decode_error",
                          f"truncated or corrupt image data: {type(exc).__name__}: {exc}", ow, oh)
        message = ""
        if orientation != 1:
            try:
                im = ImageOps.exif_transpose(im)
                message = f"EXIF orientation {orientation} applied"
            except Exception as exc:
                message = f"EXIF orientation {orientation} ignored: {exc}"
                ow, oh = w, h
        try:
            arr = to_rgb_array(im)
        except Exception as exc:
            return _error("decode_error", f"cannot convert mode {im.mode} to RGB: {exc}", ow, oh)
    as_is = (im.format == "JPEG" and orientation == 1 and im.mode in ("RGB", "L")
             and arr.shape[:2] == (h, w))
    return DecodedImage(arr, "ok", message, ow, oh, arr.shape[1] / ow, arr.shape[0] / oh,
                        jpeg=data if as_is else None)


def decode_image(data_or_path: bytes | bytearray | memoryview | str | os.PathLike,
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[np.ndarray | None, str, str]:
    """Decode a path or bytes to ``(HxWx3 uint8 RGB | None, status, message)``, full resolution.

    Status is ``ok`` (array set) or ``decode_error``/``missing``/``unreadable`` (array None,
    message says why). See :func:`read_image` for the details.
    """
    res = read_image(data_or_path, max_pixels)
    return res.array, res.status, res.message
