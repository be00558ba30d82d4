"""dlib_resnet's torch engine (issue 31.3): dlib's weight file read by facecast.embed.dlib_dnn.

The chips are the pipeline's own: MTCNN landmarks -> ArcFace crop (faces stage) -> dlib
chip (:func:`arcface_to_dlib_chips`), for the four portraits of tests/data/faces, the 20
Yale photos of tests/data/yale, skimage's astronaut and matplotlib's grace_hopper. dlib's
``compute_face_descriptor`` on the same uint8 chips is the reference.
"""

from __future__ import annotations

from pathlib import Path

import dlib
import numpy as np
import pytest
import torch
from conftest import REPO, TEST_DATA, tiny_demo_config
from matplotlib import cbook
from PIL import Image
from skimage.data import astronaut

from facecast.config.schema import ConfigError, validate_config
from facecast.embed.checks import dlib_engine_errors
from facecast.embed.dlib_arch import check_network, layer_shapes, parameter_count
from facecast.embed.dlib_dnn import DlibModelError, build_resnet, read_dlib_resnet
from facecast.embed.dlib_resnet import DlibEmbedder, arcface_to_dlib_chips, default_dlib_weights
from facecast.embed.registry import build_embedder
from facecast.embed.targets import job_threads, uses_cuda
from facecast.evaluate.metrics import default_folds, kfold_accuracy
from facecast.faces.align import align_arcface
from facecast.faces.decode import read_image
from facecast.faces.detect import FaceDetector, select_face

TOLERANCE = 1e-4  # max |difference| per descriptor coordinate, torch engine vs dlib
MAX_SIDE = 360


def _small(img: np.ndarray) -> np.ndarray:
    im = Image.fromarray(img).convert("RGB")
    im.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    return np.asarray(im)


def _photos() -> tuple[list[str], list[np.ndarray]]:
    paths = sorted(TEST_DATA.glob("faces/*/*")) + sorted(TEST_DATA.glob("yale/*/*"))
    names = [str(p.relative_to(TEST_DATA)) for p in paths]
    images = [_small(read_image(p).array) for p in paths]
    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        images += [_small(astronaut()), _small(np.asarray(Image.open(fh)))]
    return names + ["astronaut", "grace_hopper"], images


@pytest.fixture(scope="module")
def weights() -> Path:
    path = default_dlib_weights()
    assert path is not None and path.is_file()
    return path


@pytest.fixture(scope="module")
def faces(weights):
    """Crops, chips and dlib's own descriptors of every photo's largest face."""
    names, images = _photos()
    found, crops = [], []
    for name, img, det in zip(names, images, FaceDetector({"device": "cpu"}).detect(images),
                              strict=True):
        k = select_face(det, "largest", img.shape[1], img.shape[0])
        if k is not None:
            found.append(name)
            crops.append(align_arcface(img, det.landmarks[k]))
    crops = np.stack(crops)
    chips = arcface_to_dlib_chips(torch.from_numpy(crops))
    ref = dlib.face_recognition_model_v1(str(weights))
    dlib_vecs = np.array([np.asarray(v) for v in ref.compute_face_descriptor(list(chips))],
                         np.float32)
    return {"names": found, "n_photos": len(names), "crops": crops, "chips": chips,
            "dlib": dlib_vecs}


@pytest.fixture(scope="module")
def torch_engine() -> DlibEmbedder:
    return DlibEmbedder("dlib", engine="torch", device=torch.device("cpu"))


def test_torch_engine_equals_dlib_on_real_photos(faces, torch_engine):
    # MTCNN finds a face in every photo (a missing one would shrink the comparison)
    assert len(faces["names"]) == faces["n_photos"] >= 26, faces["names"]
    ours = torch_engine.embed_chips(faces["chips"])
    assert ours.shape == faces["dlib"].shape == (len(faces["names"]), 128)
    assert ours.dtype == np.float32
    diff = np.abs(ours - faces["dlib"])
    assert diff.max() <= TOLERANCE, (diff.max(), faces["names"][int(diff.max(1).argmax())])
    # the raw network output, not normalised (as compute_face_descriptor returns it)
    norms = np.linalg.norm(faces["dlib"], axis=1)
    assert np.all(np.abs(norms - 1) > 0.05)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), norms, rtol=1e-5)
    # the embed() path (crop -> chip -> network) gives the same; batches do not matter
    np.testing.assert_array_equal(torch_engine.embed(torch.from_numpy(faces["crops"])), ours)
    singles = np.concatenate([torch_engine.embed_chips(c[None]) for c in faces["chips"][:6]])
    assert np.abs(singles - ours[:6]).max() <= 1e-5


def test_both_engines_same_yale_10_fold_accuracy(faces, torch_engine):
    yale = [i for i, n in enumerate(faces["names"]) if n.startswith("yale/")]
    assert len(yale) == 20
    ids = np.array([faces["names"][i].split("/")[1] for i in yale])
    i, j = np.triu_indices(len(yale), k=1)
    labels = (ids[i] == ids[j]).astype(int)
    folds = default_folds(len(labels))
    accs = {}
    for engine, vecs in (("torch", torch_engine.embed_chips(faces["chips"][yale])),
                         ("dlib", faces["dlib"][yale])):
        unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        scores = (unit[i] * unit[j]).sum(1)
        accs[engine] = kfold_accuracy(scores, labels, folds).accuracies
    np.testing.assert_array_equal(accs["torch"], accs["dlib"])
    assert accs["torch"].mean() > 0.9, accs  # real photos: the comparison means something


def test_dlib_engine_is_dlibs_own_forward(faces):
    emb = DlibEmbedder("d", engine="dlib")
    assert emb.device.type == "cpu" and not emb.supports_cuda and not emb.thread_safe
    got = emb.embed(torch.from_numpy(faces["crops"][:3]))
    np.testing.assert_array_equal(got, faces["dlib"][:3])
    assert emb.provenance()["engine"] == "dlib"


def test_torch_engine_provenance_and_registry(torch_engine):
    prov = torch_engine.provenance()
    assert prov["engine"] == "torch" and prov["backend"] == "dlib_resnet"
    assert prov["embedding_dim"] == 128 and prov["weights_sha256"]
    assert torch_engine.thread_safe and torch_engine.supports_cuda
    emb = build_embedder("d", {"backend": "dlib_resnet", "engine": "dlib"}, device="cpu")
    assert emb.engine == "dlib"


def test_reader_reads_dlibs_network(weights):
    layers = read_dlib_resnet(weights)
    kinds = [lay.kind for lay in layers]
    assert kinds.count("con") == 29 and kinds.count("affine") == 29
    assert kinds.count("add_prev") == 14 and kinds.count("avg_pool") == 5
    assert layers[0].values["size"] == (150, 150)
    np.testing.assert_allclose(layers[0].values["mean"], [122.782, 117.001, 104.298],
                               atol=1e-4)
    assert layers[-2].values["weight"].shape == (256, 128) and layers[-2].values["bias"] is None
    with torch.inference_mode():
        assert build_resnet(layers)(torch.zeros(2, 3, 150, 150)).shape == (2, 128)


@pytest.mark.parametrize("damage", ["truncated", "renamed_layer", "junk", "empty"])
def test_reader_names_a_broken_file(tmp_path, weights, damage):
    data = weights.read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "renamed_layer":
        data = data.replace(b"affine_", b"affinx_", 1)
    elif damage == "junk":
        data = np.random.default_rng(0).integers(0, 256, 4096, np.uint8).tobytes()
    else:
        data = b""
    bad = tmp_path / f"{damage}.dat"
    bad.write_bytes(data)
    with pytest.raises(DlibModelError, match=str(bad)) as err:
        read_dlib_resnet(bad)
    if damage == "truncated":
        assert "truncated" in str(err.value)
    if damage == "renamed_layer":
        assert "affinx_" in str(err.value)
    with pytest.raises(DlibModelError, match=str(bad)):
        DlibEmbedder("d", weights=str(bad))


def test_jitter_needs_dlibs_engine():
    with pytest.raises(ValueError, match="num_jitters: 2 needs engine: dlib"):
        DlibEmbedder("d", num_jitters=2)
    with pytest.raises(ValueError, match="engine: must be one of torch, dlib"):
        DlibEmbedder("d", engine="onnx")
    assert DlibEmbedder("d", engine="dlib", num_jitters=1).num_jitters == 1
    cfg = {"embed": {"models": {"a": {"backend": "dlib_resnet", "num_jitters": 2},
                                "b": {"backend": "dlib_resnet", "num_jitters": 2,
                                      "engine": "dlib"},
                                "c": {"backend": "dlib_resnet", "engine": "torch"}}}}
    errs = dlib_engine_errors(cfg)
    assert len(errs) == 1 and errs[0].startswith("embed.models.a.num_jitters: 2 needs engine")


def test_engine_in_schema_and_job_resources():
    schema = str(REPO / "workflow/schemas/config.schema.yaml")
    for engine in ("torch", "dlib", "fast"):
        cfg = tiny_demo_config()
        cfg["embed"]["models"] = {"d": {"backend": "dlib_resnet", "engine": engine}}
        if engine == "fast":
            with pytest.raises(ConfigError, match=r"embed\.models\.d\.engine"):
                validate_config(cfg, schema)
        else:
            validate_config(cfg, schema)
    # torch engine: an ordinary torch job (threads, GPU); dlib's engine: one core, CPU
    assert job_threads({"backend": "dlib_resnet"}, {"threads": 4}) == 4
    assert job_threads({"backend": "dlib_resnet", "engine": "dlib"}, {"threads": 4}) == 1
    assert uses_cuda({"backend": "dlib_resnet"}, "cuda")
    assert not uses_cuda({"backend": "dlib_resnet", "engine": "dlib"}, "cuda")
    assert not uses_cuda({"backend": "dlib_resnet"}, "cpu")


# ---------------------------------------------------------------------------------------
# dlib's geometry (issue 39.4): the real file with one field changed must be refused,
# naming the layer and the value, before anything is allocated


def _int_at(data: bytes, pos: int) -> tuple[int, int]:
    """dlib's serialised integer at ``pos`` (control byte: low 4 bits the byte count, 0x80
    negative; then little-endian bytes) and the position after it."""
    ctrl = data[pos]
    value = int.from_bytes(data[pos + 1:pos + 1 + (ctrl & 0x0F)], "little")
    return (-value if ctrl & 0x80 else value), pos + 1 + (ctrl & 0x0F)


def _dlib_int(value: int) -> bytes:
    """``value`` serialised as dlib does (fewest bytes)."""
    raw = abs(value).to_bytes((abs(value).bit_length() + 7) // 8, "little")
    return bytes([len(raw) | (0x80 if value < 0 else 0)]) + raw


def _fields(data: bytes, tag: bytes, nth: int) -> list[tuple[int, int]]:
    """Byte spans of the integer fields that follow the ``nth`` layer tagged ``tag``:
    ``con_4``: filters, nr, nc, stride y/x, padding y/x, then the filter alias's version
    and 4 dimensions (the parameter tensor before them skipped); ``max_pool_2`` /
    ``avg_pool_2``: size y/x, stride y/x, padding y/x; ``fc_2``: outputs, inputs, then
    (the parameter tensor skipped) the weight alias's version and 4 dimensions;
    ``input_rgb_image_sized``: rows and columns (the three mean floats skipped)."""
    pos = -1
    for _ in range(nth + 1):
        pos = data.index(bytes([1, len(tag)]) + tag, pos + 1)
    pos += 2 + len(tag)
    spans: list[tuple[int, int]] = []

    def take(n: int, keep: bool = True) -> list[int]:
        nonlocal pos
        values = []
        for _ in range(n):
            start = pos
            value, pos = _int_at(data, pos)
            values.append(value)
            if keep:
                spans.append((start, pos))
        return values

    def skip_tensor() -> None:
        nonlocal pos
        dims = take(5, keep=False)[1:]  # version 2, then n, k, nr, nc; float32 values
        pos += 4 * int(np.prod(dims))

    if tag == b"con_4":
        skip_tensor()
        take(7 + 5)
    elif tag == b"fc_2":
        take(2)
        skip_tensor()
        take(5)
    elif tag == b"input_rgb_image_sized":
        take(6, keep=False)  # three floats: a mantissa and an exponent each
        take(2)
    else:
        take(6)
    return spans


def _rewrite(data: bytes, changes: dict[tuple[int, int], int]) -> bytes:
    """``data`` with the integers at the given spans replaced (lengths may change)."""
    out, last = [], 0
    for (start, end), value in sorted(changes.items()):
        out += [data[last:start], _dlib_int(value)]
        last = end
    return b"".join(out + [data[last:]])


#: (layer tag, which one, {field index: new value}, what the error must say)
CORRUPTIONS = {
    "stem_padding_5000": (b"con_4", 0, {5: 5000, 6: 5000},
                          r"layer 1 \(stem con\): padding \(5000, 5000\), where dlib's"),
    "block_stride": (b"con_4", 1, {3: 2, 4: 2},
                     r"layer 6 \(con 1 of residual block 1 \(ares<32>\)\): stride \(2, 2\)"),
    "filter_1x9": (b"con_4", 2, {1: 1, 2: 9, 10: 1, 11: 9},
                   r"layer 9 \(con 2 of residual block 1 \(ares<32>\)\): kernel \(1, 9\)"),
    "max_pool_size": (b"max_pool_2", 0, {0: 5, 1: 5},
                      r"layer 4 \(stem max_pool\): size \(5, 5\)"),
    "avg_pool_stride": (b"avg_pool_2", 0, {2: 1, 3: 1},
                        r"avg_pool of residual block 4 \(ares_down<64>\)\): stride \(1, 1\)"),
    "input_5000": (b"input_rgb_image_sized", 0, {0: 5000, 1: 5000},
                   r"layer 0 \(input_rgb_image_sized\): size \(5000, 5000\)"),
    "fc_512_in": (b"fc_2", 0, {0: 64, 1: 512, 3: 512, 4: 64},
                  r"\(fc_no_bias<128>\): inputs 512, where dlib's .* has 256"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_reader_refuses_a_layer_with_other_geometry(tmp_path, weights, case):
    tag, nth, change, message = CORRUPTIONS[case]
    data = weights.read_bytes()
    spans = _fields(data, tag, nth)
    bad = tmp_path / f"{case}.dat"
    bad.write_bytes(_rewrite(data, {spans[k]: v for k, v in change.items()}))
    with pytest.raises(DlibModelError, match=message) as err:
        read_dlib_resnet(bad)
    assert str(bad) in str(err.value)


def test_field_walker_reads_the_real_files_geometry(weights):
    """The spans the corruptions rewrite hold what the reader reads (a walker that found
    the wrong bytes would make the test above pass for the wrong reason)."""
    data = weights.read_bytes()
    layers = read_dlib_resnet(weights)
    val = [_int_at(data, a)[0] for a, _ in _fields(data, b"con_4", 2)]
    assert val[:7] == [32, 3, 3, 1, 1, 1, 1] and val[7:] == [1, 32, 32, 3, 3]
    stem = [_int_at(data, a)[0] for a, _ in _fields(data, b"con_4", 0)]
    assert stem[:7] == [32, 7, 7, 2, 2, 0, 0] == [32, *layers[1].values["weight"].shape[2:],
                                                  *layers[1].values["stride"],
                                                  *layers[1].values["padding"]]
    assert [_int_at(data, a)[0] for a, _ in _fields(data, b"max_pool_2", 0)] == [3, 3, 2, 2,
                                                                                 0, 0]
    assert [_int_at(data, a)[0] for a, _ in _fields(data, b"input_rgb_image_sized", 0)] == [
        150, 150]
    assert [_int_at(data, a)[0] for a, _ in _fields(data, b"fc_2", 0)] == [
        128, 256, 1, 256, 128, 1, 1]


def test_size_bounds_name_the_layer_before_anything_is_built(weights):
    layers = read_dlib_resnet(weights)
    assert parameter_count(layers) == 5_614_592
    shapes = layer_shapes(layers)
    assert sum(c * h * w for c, h, w in shapes) == 2_581_676 and shapes[-2] == (128, 1, 1)
    check_network(layers, "real")  # dlib's own network passes both bounds
    with pytest.raises(DlibModelError, match=r"5614592 parameters, more than the 5000000"):
        check_network(layers, "x", max_parameters=5_000_000)
    # 67,500 input values + 3 x 165,888 at the stem = 565,164; the max_pool's 39,200 pass
    with pytest.raises(DlibModelError, match=r"layer 4 \(stem max_pool\): output 32x35x35; "
                                             r"the layers up to it hold 604364 values"):
        check_network(layers, "x", max_activations=600_000)
    # the file: the bound alone would have stopped it (3.1 GiB at the stem)
    layers[1].values["padding"] = (5000, 5000)
    assert layer_shapes(layers)[1] == (32, 5072, 5072)
    with pytest.raises(DlibModelError, match=r"layer 1 \(stem con\): padding"):
        build_resnet(layers)
