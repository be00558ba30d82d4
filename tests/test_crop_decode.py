"""The one crop decoder (facecast.faces.crops.decode_crop, OpenCV): its pixels equal
Pillow's decode of the same bytes (what every consumer got before), bad bytes give a
deterministic error row, and the embed loader names the decoder it used."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from skimage.data import astronaut

from facecast.attributes.inputs import faces_from_frame
from facecast.embed.data import CropBatches, decoder_names
from facecast.faces.crops import (
    crop_format,
    decode_crop,
    decode_error_text,
    decode_png,
    encode_png,
    encode_png_fast,
)

DATA = Path(__file__).parent / "data"


def _pillow(data: bytes) -> np.ndarray:
    """What facecast decoded crops with before: Pillow's ``convert("RGB")``."""
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def _jpeg(arr: np.ndarray, quality: int = 95) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _crops(n: int = 6, size: int = 112, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    img = astronaut()
    out = []
    for _ in range(n):
        y, x = rng.integers(0, img.shape[0] - size, 2)
        noisy = img[y:y + size, x:x + size] + rng.normal(0, 6, (size, size, 3))
        out.append(np.clip(noisy, 0, 255).astype(np.uint8))
    return out


def _photos(n: int = 12) -> list[np.ndarray]:
    """Real photos of tests/data, resized to 112 px (the JPEG sources' crop size)."""
    paths = sorted(DATA.rglob("*.jpg"))[::7][:n]
    out = []
    for p in paths:
        with Image.open(p) as im:
            out.append(np.asarray(im.convert("RGB").resize((112, 112), Image.BILINEAR)))
    return out


def test_png_pixels_equal_pillow_for_our_encoders_and_modes():
    rng = np.random.default_rng(1)
    grey = rng.integers(0, 256, (112, 112), dtype=np.uint8)
    rgba = rng.integers(0, 256, (112, 112, 4), dtype=np.uint8)
    blobs = [encode_png(grey), encode_png(rgba)]
    for arr in _crops():
        blobs += [encode_png(arr), encode_png(arr, 9), encode_png_fast(arr, 0),
                  encode_png_fast(arr, 1), encode_png_fast(arr, 3)]
    for b in blobs:
        got = decode_png(b)
        assert got.dtype == np.uint8 and got.flags.c_contiguous
        assert np.array_equal(got, _pillow(b))
    assert np.array_equal(decode_png(encode_png_fast(_crops()[0])), _crops()[0])  # lossless


def test_jpeg_pixels_equal_pillow_on_real_photos():
    photos = _photos()
    assert len(photos) >= 10
    grey = np.asarray(Image.fromarray(photos[0]).convert("L"))
    blobs = [_jpeg(p) for p in photos] + [_jpeg(photos[1], 75)]
    buf = io.BytesIO()
    Image.fromarray(grey).save(buf, format="JPEG", quality=95)
    blobs.append(buf.getvalue())
    for b in blobs:
        assert crop_format(b) == "jpeg"
        assert np.array_equal(decode_crop(b), _pillow(b))


def test_truncated_or_corrupt_crops_raise_deterministic_errors():
    arr = _crops(1)[0]
    for blob in (encode_png_fast(arr), _jpeg(arr)):
        for n in (60, len(blob) // 2, len(blob) - 1):
            msgs = set()
            for _ in range(2):
                with pytest.raises(ValueError, match="truncated") as exc:
                    decode_crop(blob[:n])
                msgs.add(decode_error_text(exc.value))
            assert msgs == {str(exc.value)}
    png = bytearray(encode_png_fast(arr))
    png[len(png) // 2] ^= 0x10  # a flipped bit in IDAT: Pillow decoded it silently
    with pytest.raises(ValueError, match="corrupt PNG"):
        decode_crop(bytes(png))
    with pytest.raises(ValueError, match="expected PNG bytes, got JPEG"):
        decode_png(_jpeg(arr))
    with pytest.raises(ValueError, match="9 bytes of no known image format"):
        decode_crop(b"not a png")


def test_crop_batches_flag_bad_rows_and_keep_the_rest():
    good = _crops(3)
    blobs = [encode_png_fast(good[0]), encode_png(good[1])[:-30], _jpeg(good[2]),
             encode_png_fast(_crops(1, 96)[0]), b"junk"]
    ds = CropBatches(blobs, np.arange(5), batch_size=8, size=112)
    crops, rows, ok, errors = ds[0]
    assert ok.tolist() == [True, False, True, False, False]
    assert np.array_equal(crops[0].numpy(), good[0])
    assert np.array_equal(crops[2].numpy(), _pillow(blobs[2]))
    assert not crops[1].any() and errors[0] == "" and errors[2] == ""
    assert errors[1].startswith("crop does not decode: truncated or corrupt PNG")
    assert errors[3] == "crop does not decode: crop is 96x96, expected 112x112"
    assert ds[0][3] == errors  # deterministic


def test_decoder_names_state_what_decodes():
    blobs = [encode_png_fast(_crops(1)[0]), _jpeg(_crops(1)[0]), None, b"x"]
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert decoder_names(blobs, np.array([0])) == "opencv-png"
    assert decoder_names(blobs, np.arange(4)) == "opencv-jpeg+opencv-png"
    assert decoder_names(blobs, np.arange(4), gpu_jpeg=True, device=cpu) == (
        "opencv-jpeg+opencv-png")
    assert decoder_names(blobs, np.arange(4), gpu_jpeg=True, device=cuda) == (
        "nvjpeg+opencv-png")
    assert decoder_names(blobs, np.arange(4), gpu_jpeg=False, device=cuda) == (
        "opencv-jpeg+opencv-png")
    assert decoder_names(blobs, np.array([2, 3])) == "none"


def test_attribute_inputs_decode_with_the_shared_decoder():
    arrs = _crops(3)
    blobs = [encode_png_fast(arrs[0]), _jpeg(arrs[1]), encode_png(arrs[2])[:50], None]
    df = pd.DataFrame({"image_id": list("abcd"), "status": ["ok"] * 4,
                       "crop_arcface": blobs})
    fb = faces_from_frame(df, "arcface")
    assert fb.has_crop.tolist() == [True, True, False, False]
    assert np.array_equal(fb.crops[0], arrs[0])
    assert np.array_equal(fb.crops[1], _pillow(blobs[1]))
    assert fb.crop_error[2].startswith("crop_arcface does not decode: truncated or corrupt PNG")


def _exif_rotated_jpeg(arr: np.ndarray) -> bytes:
    im = Image.fromarray(arr)
    exif = im.getexif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=95, exif=exif.tobytes())
    return buf.getvalue()


def test_keep_jpeg_stores_the_source_bytes_with_the_same_pixels():
    from facecast.faces.aligned import aligned_row
    from facecast.faces.config import FacesConfig
    from facecast.faces.decode import read_image

    photos = _photos(4)
    on = FacesConfig(detector="none", keep_jpeg=True)
    off = FacesConfig(detector="none")
    for arr in photos:
        src = _jpeg(arr)
        dec = read_image(src)
        kept, png = aligned_row("a", dec, on), aligned_row("a", dec, off)
        assert kept["crop_arcface"] == src and crop_format(png["crop_arcface"]) == "png"
        # consumers get exactly the pixels the PNG path stored (Pillow's decode of the JPEG)
        assert np.array_equal(decode_crop(kept["crop_arcface"]), decode_png(png["crop_arcface"]))
        assert crop_format(kept["crop_facenet"]) == "png"  # a resampled crop stays PNG
    big = np.asarray(Image.fromarray(photos[0]).resize((160, 160)))
    fn = FacesConfig(detector="none", aligned_as="facenet160", keep_jpeg=True)
    row = aligned_row("b", read_image(_jpeg(big)), fn)
    assert row["crop_facenet"] == _jpeg(big) and crop_format(row["crop_arcface"]) == "png"
    # not the decoded pixels as they are: rotated by EXIF, or a PNG source -> a PNG crop
    for src in (_exif_rotated_jpeg(photos[1]), encode_png(photos[1])):
        dec = read_image(src)
        assert dec.jpeg is None
        assert crop_format(aligned_row("c", dec, on)["crop_arcface"]) == "png"
    dec = read_image(_jpeg(photos[2]))
    dec.array = dec.array.copy()
    dec.array[0, 0] ^= 1  # what the faces stage decoded differs: never pass the bytes through
    assert crop_format(aligned_row("d", dec, on)["crop_arcface"]) == "png"


def test_bin_export_bytes_do_not_depend_on_the_stored_format():
    from facecast.analysis.bins import encode_image

    src = _jpeg(_photos(1)[0])
    png = encode_png(_pillow(src))
    for enc in ("png", "jpg"):
        assert encode_image(src, enc) == encode_image(png, enc)
    assert encode_image(png, "png") == png


def test_batched_jpeg_path_keeps_order_and_flags_bad_rows():
    """CropBatches' nvJPEG path (``torchvision.io.decode_jpeg`` on a list), run here with
    torchvision's CPU decoder: a failing batch falls back image by image, PNG rows stay on
    OpenCV, sizes are checked, and the pixels are the CPU decoder's."""
    arrs = _photos(3)
    small = np.asarray(Image.fromarray(arrs[2]).resize((96, 96)))
    no_image = b"\xff\xd8\xff\xe0" + b"\x00" * 200 + b"\xff\xd9"  # ends right, holds nothing
    blobs = [encode_png_fast(arrs[0]), _jpeg(arrs[1]), no_image, _jpeg(small),
             _jpeg(arrs[2]), _jpeg(arrs[2])[:300]]
    ds = CropBatches(blobs, np.arange(6), batch_size=8, size=112,
                     nvjpeg_device=torch.device("cpu"))
    crops, rows, ok, errors = ds[0]
    assert ok.tolist() == [True, True, False, False, True, False]
    assert rows.tolist() == list(range(6))
    assert np.array_equal(crops[0].numpy(), arrs[0])
    for i in (1, 4):
        assert np.array_equal(crops[i].numpy(), _pillow(blobs[i])) and errors[i] == ""
    assert errors[2].startswith("crop does not decode (nvjpeg): ")
    assert errors[3] == "crop does not decode: crop is 96x96, expected 112x112"
    # a truncated JPEG never reaches nvJPEG (which may fill it with grey): the shared check
    assert errors[5] == ("crop does not decode: truncated JPEG data: no end-of-image marker "
                         "(300 bytes)")
    assert not crops[2].any() and not crops[3].any() and not crops[5].any()


def test_a_crop_that_does_not_decode_is_named_not_fatal(tmp_path):
    """A corrupt crop in the faces shards: the .bin export's crop spill records the image's
    reason (so the export's error names it) instead of dying on a bare decode error, and
    the hard-pairs tiles skip it (the grey tile) while the good crop still becomes a tile."""
    from facecast.analysis.bin_writer import CropSpill
    from facecast.analysis.bins import encode_image, missing_crops
    from facecast.analysis.exports import ExportError
    from facecast.fairness.hardpairs import load_tiles

    good = _photos(1)[0]
    faces = tmp_path / "faces.parquet"
    pd.DataFrame({"image_id": ["good", "bad"], "status": ["ok", "ok"],
                  "crop_arcface": [encode_png_fast(good), _jpeg(good)[:300]]}).to_parquet(faces)
    with CropSpill(tmp_path) as spill:
        spill.fill([faces], ["good", "bad"], lambda b: encode_image(b, "jpg"))
        assert "good" in spill and "bad" not in spill
        assert spill.status["bad"] == ("crop does not decode: truncated JPEG data: no "
                                       "end-of-image marker (300 bytes)")
        rows = pd.DataFrame({"image_a": ["good"], "image_b": ["bad"]})
        with pytest.raises(ExportError, match=r"bad \(crop does not decode: truncated JPEG"):
            missing_crops(rows, spill, "x")
    tiles = load_tiles(["good", "bad"], [faces])
    assert list(tiles) == ["good"] and tiles["good"].size[0] > 0


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_decode_crop_ignores_exif_orientation(orientation):
    """A stored crop's pixels are its stored pixels: `decode_crop` ignores an EXIF
    orientation tag (the faces stage already applied it when it made the crop), as Pillow's
    decode of the bytes does; rotating again would turn every consumer's face sideways."""
    arr = astronaut()[100:140, 150:214]  # 40 x 64: a rotation changes the shape
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=95, exif=exif.tobytes())
    data = buf.getvalue()
    got = decode_crop(data)
    assert got.shape == (40, 64, 3)
    assert np.array_equal(got, _pillow(data))  # stored orientation, Pillow's pixels
    assert np.abs(got.astype(int) - arr).mean() < 3  # the JPEG of `arr`, not rotated
