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
