"""dlib chips on the embedder's device (issue 40.4): the CPU path stays bit-identical to the
chips of the code before 40.4, and the device resampler (run here with ``device=cpu``) equals
the CPU path exactly.

``tests/data/dlib_chips_v1.json`` holds the sha256 of every chip that
:func:`arcface_to_dlib_chips` cut, at commit 57cecf6 (before the device path existed), from
the inputs :func:`chip_inputs` builds: the ArcFace crops of 26 real photos
(``tests/data/faces``, ``tests/data/yale``, skimage's astronaut, matplotlib's grace_hopper),
cut with the MTCNN landmarks stored in the record (so no detector runs here), and hostile
crops (seeded noise, all-0, all-255, a 0/255 checkerboard whose bilinear mixes land on
.5, stripes, and 160/224 px crops that need another sampling grid). The record also holds
each input's sha256: a changed input (a new JPEG decoder, a changed ``align_arcface``) fails
with its own message instead of passing for the wrong reason.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TEST_DATA
from matplotlib import cbook
from PIL import Image
from skimage.data import astronaut

from facecast.embed.dlib_chips import _exact, chip_plan, device_chips, fma32
from facecast.embed.dlib_resnet import DlibEmbedder, arcface_to_dlib_chips, chip_sampling_grid
from facecast.faces.align import align_arcface
from facecast.faces.decode import read_image

RECORD = TEST_DATA / "dlib_chips_v1.json"
SEED = 40


def _photo(name: str) -> np.ndarray:
    if name == "astronaut":
        return astronaut()
    if name == "grace_hopper":
        with cbook.get_sample_data("grace_hopper.jpg") as fh:
            return np.asarray(Image.open(fh).convert("RGB"))
    return read_image(TEST_DATA / name).array


def photo_names() -> list[str]:
    """The 26 real photos, as the record names them."""
    paths = sorted(TEST_DATA.glob("faces/*/*")) + sorted(TEST_DATA.glob("yale/*/*"))
    return [str(p.relative_to(TEST_DATA)) for p in paths] + ["astronaut", "grace_hopper"]


def hostile_crops() -> dict[str, np.ndarray]:
    """Seeded crops that probe the resampler's edges: rounding, clamping, other sizes."""
    rng = np.random.default_rng(SEED)
    out = {f"noise112_{i}": rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)
           for i in range(6)}
    out["zeros112"] = np.zeros((112, 112, 3), np.uint8)
    out["full112"] = np.full((112, 112, 3), 255, np.uint8)
    yy, xx = np.mgrid[0:112, 0:112]
    out["checker112"] = np.repeat((((yy + xx) % 2) * 255).astype(np.uint8)[..., None], 3, 2)
    stripes = np.where(xx % 3 == 0, 255, np.where(xx % 3 == 1, 1, 128)).astype(np.uint8)
    out["stripes112"] = np.stack([stripes, stripes.T, 255 - stripes], -1)
    for size in (160, 224):
        for i in range(2):
            out[f"noise{size}_{i}"] = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    return out


def photo_crops(landmarks: dict[str, list[list[float]]]) -> dict[str, np.ndarray]:
    """ArcFace 112 px crops of the real photos at the recorded landmarks."""
    return {name: align_arcface(_photo(name), np.asarray(landmarks[name], np.float64))
            for name in photo_names()}


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def chip_inputs(record: dict) -> dict[str, np.ndarray]:
    """Every input the record covers, by name (photo crops, then hostile crops)."""
    return {**photo_crops(record["landmarks"]), **hostile_crops()}


def by_size(crops: dict[str, np.ndarray]) -> dict[int, list[str]]:
    """Input names grouped by crop size (one batch per size)."""
    groups: dict[int, list[str]] = {}
    for name, crop in crops.items():
        groups.setdefault(crop.shape[0], []).append(name)
    return groups


def record_today(path: Path) -> None:
    """Write the record (run once, with the chip code of commit 57cecf6; never overwrites)."""
    from facecast.faces.detect import FaceDetector, select_face

    assert not path.exists(), f"{path} exists: the record is of the pre-40.4 code"
    names = photo_names()
    images = [_photo(n) for n in names]
    landmarks = {}
    for name, img, det in zip(names, images, FaceDetector({"device": "cpu"}).detect(images),
                              strict=True):
        k = select_face(det, "largest", img.shape[1], img.shape[0])
        landmarks[name] = np.round(det.landmarks[k].astype(np.float64), 2).tolist()
    record = {"commit": "57cecf6", "function": "arcface_to_dlib_chips",
              "landmarks": landmarks}
    crops = chip_inputs(record)
    chips = {}
    for group in by_size(crops).values():
        batch = arcface_to_dlib_chips(torch.from_numpy(np.stack([crops[n] for n in group])))
        chips.update({n: sha(c) for n, c in zip(group, batch, strict=True)})
    record["input_sha256"] = {n: sha(c) for n, c in crops.items()}
    record["chip_sha256"] = chips
    path.write_text(json.dumps(record, indent=1) + "\n")


# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text())


@pytest.fixture(scope="module")
def inputs(record) -> dict[str, np.ndarray]:
    crops = chip_inputs(record)
    moved = [n for n, c in crops.items() if sha(c) != record["input_sha256"][n]]
    # a changed decoder or aligner changes the inputs, not the chip code: say so
    assert not moved, f"inputs differ from the record's (decoder/aligner changed): {moved}"
    assert len(crops) == len(record["chip_sha256"]) == 26 + 14
    return crops


def _chips(crops: dict[str, np.ndarray], cut) -> dict[str, np.ndarray]:
    """``cut(batch, size)`` over each size's batch, by input name."""
    out = {}
    for size, group in by_size(crops).items():
        batch = cut(torch.from_numpy(np.stack([crops[n] for n in group])), size)
        out.update(zip(group, np.asarray(batch), strict=True))
    return out


def test_cpu_chips_bit_identical_to_before_40_4(record, inputs):
    chips = _chips(inputs, lambda b, size: arcface_to_dlib_chips(b, chip_sampling_grid(size)))
    changed = [n for n, c in chips.items() if sha(c) != record["chip_sha256"][n]]
    assert not changed, changed
    assert all(c.shape == (150, 150, 3) and c.dtype == np.uint8 for c in chips.values())


def test_device_resampler_on_cpu_equals_cpu_path(record, inputs):
    cpu = _chips(inputs, lambda b, size: arcface_to_dlib_chips(b, chip_sampling_grid(size)))
    dev = _chips(inputs, lambda b, size: device_chips(b, chip_plan(chip_sampling_grid(size),
                                                                   size)))
    for name in inputs:
        np.testing.assert_array_equal(dev[name], cpu[name], err_msg=name)
        assert sha(dev[name]) == record["chip_sha256"][name], name


def _grid_sample_float(crops: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    x = crops.permute(0, 3, 1, 2).float()
    out = torch.nn.functional.grid_sample(x, grid.expand(len(x), -1, -1, -1), mode="bilinear",
                                          padding_mode="border", align_corners=False)
    return out.permute(0, 2, 3, 1).reshape(len(x), -1, 3)


def test_fused_formula_is_the_cpu_kernels_and_a_plain_port_is_not():
    """The documented arithmetic reproduces the CPU kernel's float32 output exactly; the
    plain float32 sum (two roundings per term) does not, and on 24 noise crops it moves
    uint8 chip values (about one value in 400,000): what :func:`device_chips` repairs."""
    crops = torch.from_numpy(np.random.default_rng(SEED).integers(0, 256, (24, 112, 112, 3),
                                                                  dtype=np.uint8))
    grid = chip_sampling_grid(112)
    plan = chip_plan(grid, 112)
    ref = _grid_sample_float(crops, grid)
    values = crops.reshape(len(crops), -1, 3).index_select(1, plan.index.reshape(-1))
    values = values.float().view(len(crops), 4, -1, 3).permute(1, 0, 2, 3)
    terms = values * plan.weight[:, None]
    fused = _exact(values.reshape(4, -1),
                   plan.weight[:, None].expand(values.shape).reshape(4, -1)).view(ref.shape)
    assert torch.equal(fused, ref)
    plain = ((terms[0] + terms[1]) + terms[2]) + terms[3]
    assert (plain != ref).sum() > 1000
    cpu = arcface_to_dlib_chips(crops, grid)
    naive = plain.round().clamp(0, 255).to(torch.uint8).view(cpu.shape).numpy()
    assert (naive != cpu).sum() >= 2
    np.testing.assert_array_equal(device_chips(crops, plan).numpy(), cpu)


def test_fma32_rounds_once():
    # 1 + 2^-23 + 2^-24 - 2^-56: just below the float32 tie between 1 + 2^-23 and
    # 1 + 2^-22; float64 rounds it onto the tie, and float32 then to even (1 + 2^-22)
    a = torch.tensor([1 + 2.0 ** -16, 3.0, 1 + 2.0 ** -16], dtype=torch.float32)
    b = torch.tensor([2.0 ** -24 * (1 - 2.0 ** -16), 0.25, -(2.0 ** -24) * (1 - 2.0 ** -16)],
                     dtype=torch.float32)
    c = torch.tensor([1 + 2.0 ** -23, 7.0, -(1 + 2.0 ** -23)], dtype=torch.float32)
    want = torch.tensor([1 + 2.0 ** -23, 7.75, -(1 + 2.0 ** -23)], dtype=torch.float32)
    assert torch.equal(fma32(a, b, c), want)
    double_rounded = (a.double() * b.double() + c.double()).float()
    assert double_rounded[0] == 1 + 2.0 ** -22  # what the guard is for


def test_embed_on_device_path_equals_cpu_path(inputs):
    """The embedder's device path (run on the CPU) gives the CPU path's descriptors exactly:
    same chips, same forward; so normalised embeddings differ by 0."""
    photos = torch.from_numpy(np.stack([inputs[n] for n in photo_names()[::3]]))
    emb = DlibEmbedder("dlib", engine="torch", device=torch.device("cpu"))
    assert not emb.resample_on_device  # the CPU keeps the CPU path
    cpu = emb.embed(photos)
    emb.resample_on_device = True
    np.testing.assert_array_equal(emb.embed(photos), cpu)
    big = torch.from_numpy(np.stack([inputs["noise224_0"], inputs["noise224_1"]]))
    dev = emb.embed(big)
    emb.resample_on_device = False
    np.testing.assert_array_equal(dev, emb.embed(big))
    assert emb.embed(photos[:0]).shape == (0, 128)
    emb.resample_on_device = True
    assert emb.embed(photos[:0]).shape == (0, 128)
    with pytest.raises(ValueError, match="uint8 crops"):
        device_chips(photos.float(), chip_plan(chip_sampling_grid(112), 112))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (device chips)")
def test_cuda_chips_equal_cpu_chips(record, inputs):
    """On a GPU: chips cut on CUDA hash like the pre-40.4 CPU chips; ``embed`` cuts them
    there and gives what the network gives on the CPU path's chips."""
    cuda = torch.device("cuda")
    for size, group in by_size(inputs).items():
        batch = torch.from_numpy(np.stack([inputs[n] for n in group])).to(cuda)
        plan = chip_plan(chip_sampling_grid(size), size).to(cuda)
        chips = device_chips(batch, plan).cpu().numpy()
        assert [sha(c) for c in chips] == [record["chip_sha256"][n] for n in group], size
    emb = DlibEmbedder("dlib", engine="torch", device=cuda)
    assert emb.resample_on_device
    photos = np.stack([inputs[n] for n in photo_names()])
    cpu_chips = arcface_to_dlib_chips(torch.from_numpy(photos))
    np.testing.assert_allclose(emb.embed(torch.from_numpy(photos)),
                               emb.embed_chips(cpu_chips), rtol=0, atol=1e-6)
