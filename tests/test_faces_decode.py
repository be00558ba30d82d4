"""Robust decoding: every odd or broken input gives RGB uint8 or a clear status."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import skimage.data
from PIL import Image

from facecast.faces.crops import decode_png, encode_png
from facecast.faces.decode import decode_image, read_image


def _face() -> np.ndarray:
    return np.asarray(Image.fromarray(skimage.data.astronaut()).resize((128, 128)))


def _save(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _ok(data) -> np.ndarray:
    arr, status, message = decode_image(data, 100_000_000)
    assert status == "ok", message
    assert arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] == 3
    assert arr.flags.c_contiguous
    return arr


def test_rgb_png_roundtrip_and_path_input(tmp_path):
    face = _face()
    p = tmp_path / "a.png"
    p.write_bytes(_save(Image.fromarray(face), "PNG"))
    assert np.array_equal(_ok(p), face)
    assert np.array_equal(_ok(str(p)), face)
    assert np.array_equal(_ok(p.read_bytes()), face)


def test_grayscale_and_bilevel():
    gray = np.asarray(Image.fromarray(_face()).convert("L"))
    arr = _ok(_save(Image.fromarray(gray), "JPEG", quality=95))
    assert np.array_equal(arr[..., 0], arr[..., 1]) and np.array_equal(arr[..., 1], arr[..., 2])
    assert np.abs(arr[..., 0].astype(int) - gray).mean() < 3
    arr = _ok(_save(Image.fromarray(gray).convert("1"), "PNG"))
    assert set(np.unique(arr)) <= {0, 255}


def test_rgba_composited_on_white():
    face = _face()
    rgba = np.dstack([face, np.full(face.shape[:2], 255, np.uint8)])
    rgba[:32, :, 3] = 0  # fully transparent band
    arr = _ok(_save(Image.fromarray(rgba, "RGBA"), "PNG"))
    assert (arr[:32] == 255).all()
    assert np.array_equal(arr[32:], face[32:])
    la = Image.fromarray(rgba, "RGBA").convert("LA")
    assert _ok(_save(la, "PNG")).shape == (128, 128, 3)


def test_cmyk_jpeg():
    face = _face()
    arr = _ok(_save(Image.fromarray(face).convert("CMYK"), "JPEG", quality=95))
    assert arr.shape == face.shape
    assert np.abs(arr.astype(int) - face).mean() < 8


def test_sixteen_bit_png_is_scaled_not_clipped():
    gray16 = (np.asarray(Image.fromarray(_face()).convert("L")).astype(np.uint16) * 257)
    data = _save(Image.fromarray(gray16), "PNG")
    assert Image.open(io.BytesIO(data)).mode.startswith("I")
    arr = _ok(data)
    assert np.array_equal(arr[..., 0], np.asarray(Image.fromarray(_face()).convert("L")))
    # 16-bit RGB PNG (Pillow cannot write one: build the chunks by hand)
    arr = _ok(_png16_rgb(_face().astype(np.uint16) * 257))
    assert np.abs(arr.astype(int) - _face()).max() <= 1


def _png16_rgb(rgb16: np.ndarray) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    h, w, _ = rgb16.shape
    raw = b"".join(b"\x00" + rgb16[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_float_and_int32_modes():
    f = Image.fromarray(np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64), "F")
    arr = _ok(_save(f, "TIFF"))
    assert arr.min() == 0 and arr.max() == 255


def test_palette_with_and_without_transparency():
    pal = Image.fromarray(_face()).quantize(colors=64)
    arr = _ok(_save(pal, "PNG"))
    assert np.abs(arr.astype(int) - _face()).mean() < 12
    pal.info["transparency"] = 0
    arr = _ok(_save(pal, "PNG", transparency=0))
    assert arr.shape == (128, 128, 3)
    gif = _ok(_save(Image.fromarray(_face()).convert("P"), "GIF"))
    assert gif.shape == (128, 128, 3)


@pytest.mark.parametrize("orientation,undo", [
    (3, Image.Transpose.ROTATE_180), (6, Image.Transpose.ROTATE_90),
    (8, Image.Transpose.ROTATE_270), (2, Image.Transpose.FLIP_LEFT_RIGHT)])
def test_exif_orientation_applied(orientation, undo):
    face = Image.fromarray(np.asarray(Image.fromarray(skimage.data.astronaut()).resize((160, 96))))
    stored = face.transpose(undo)  # what the camera wrote; the tag says how to show it
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = _save(stored, "JPEG", quality=95, exif=exif.tobytes())
    res = read_image(data)
    assert res.status == "ok"
    assert (res.width, res.height) == (160, 96)
    assert res.array.shape == (96, 160, 3)
    assert np.abs(res.array.astype(int) - np.asarray(face)).mean() < 6
    assert "EXIF orientation" in res.message


@pytest.mark.parametrize("case,expect", [
    ("zero_byte", "empty file"), ("text", "not a recognised image"),
    ("truncated", "truncated or corrupt"), ("corrupt_png", "truncated or corrupt"),
    ("garbage_header", "")])
def test_broken_files_give_decode_error(case, expect, tmp_path):
    good_jpg = _save(Image.fromarray(_face()), "JPEG", quality=90)
    good_png = bytearray(_save(Image.fromarray(_face()), "PNG"))
    good_png[len(good_png) // 2] ^= 0xFF  # flip a byte inside IDAT: CRC/zlib error
    data = {"zero_byte": b"", "text": b"id,identity\n1,alice\n",
            "truncated": good_jpg[: len(good_jpg) // 2], "corrupt_png": bytes(good_png),
            "garbage_header": b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4}[case]
    p = tmp_path / "x.jpg"
    p.write_bytes(data)
    arr, status, message = decode_image(p, 100_000_000)
    assert arr is None and status == "decode_error"
    assert expect in message and message


def test_missing_and_unreadable(tmp_path):
    arr, status, message = decode_image(tmp_path / "nope.jpg", 100)
    assert (arr, status) == (None, "missing") and "nope.jpg" in message
    arr, status, message = decode_image(tmp_path, 100)  # a directory
    assert (arr, status) == (None, "unreadable")


def test_pixel_limit_rejects_before_decoding():
    data = _save(Image.fromarray(_face()), "PNG")
    res = read_image(data, max_pixels=128 * 128 - 1)
    assert res.status == "decode_error" and "exceeds max_pixels" in res.message
    assert (res.width, res.height) == (128, 128)
    assert read_image(data, max_pixels=128 * 128).status == "ok"
    # a real bomb: 120 Mpx bilevel PNG of a few kB; rejected from the header alone
    bomb = _save(Image.new("1", (12_000, 10_000)), "PNG")
    assert len(bomb) < 200_000
    res = read_image(bomb)  # default limit 100 Mpx
    assert res.status == "decode_error" and "too large" in res.message


def test_jpeg_reduced_decoding_reports_scale():
    big = np.asarray(Image.fromarray(skimage.data.astronaut()).resize((1024, 1024)))
    data = _save(Image.fromarray(big), "JPEG", quality=90)
    res = read_image(data, min_side=300)
    assert res.status == "ok" and (res.width, res.height) == (1024, 1024)
    assert res.array.shape == (512, 512, 3) and res.scale_x == res.scale_y == 0.5
    assert read_image(data).array.shape == (1024, 1024, 3)


def test_png_crops_roundtrip_losslessly_and_deterministically():
    face = _face()
    a, b = encode_png(face), encode_png(face.copy())
    assert a == b and a[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(decode_png(a), face)
    assert np.array_equal(decode_png(encode_png(face, compress_level=9)), face)
    with pytest.raises(ValueError):
        encode_png(face.astype(np.float32))
    with pytest.raises(ValueError):
        decode_png(_save(Image.fromarray(face), "JPEG"))
