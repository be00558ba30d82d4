"""MTCNN detection on real photos, face choice, batching, and the weights loader."""

from __future__ import annotations

import numpy as np
import pytest
import skimage.data
import torch
from matplotlib import cbook
from PIL import Image

from facecast.faces.config import FacesConfig
from facecast.faces.decode import read_image
from facecast.faces.detect import (
    MTCNN_FILES,
    Detections,
    FaceDetector,
    load_mtcnn_nets,
    select_face,
)
from facecast.faces.stage import torch_threads

PEOPLE = ["angelina_jolie", "kate_siegel", "paul_rudd", "shea_whigham"]


@pytest.fixture(scope="module", autouse=True)
def _single_thread_torch():
    """MTCNN's many small ops run fastest single-threaded (as the stage runs them on CPU)."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return FaceDetector({"device": "cpu"})


def _load(path) -> np.ndarray:
    # reduced JPEG decoding keeps the fixture photos (up to 2048 px) cheap to load
    res = read_image(path, min_side=800)
    assert res.status == "ok", res.message
    return res.array


@pytest.fixture(scope="module")
def photos(shared_fixtures) -> dict[str, np.ndarray]:
    out = {p: _load(shared_fixtures / "faces" / p / "1.jpg") for p in PEOPLE}
    out["grace_hopper"] = _load(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    out["astronaut"] = skimage.data.astronaut()
    return out


def _check_geometry(box: np.ndarray, lm: np.ndarray) -> None:
    (lex, ley), (rex, rey), (nx, ny), (lmx, lmy), (rmx, rmy) = lm
    assert lex < rex and lmx < rmx, "left eye/mouth corner must be left of the right one"
    assert max(ley, rey) < ny < min(lmy, rmy), "eyes above nose above mouth"
    assert lex < nx < rex
    x1, y1, x2, y2 = box
    assert x1 < x2 and y1 < y2
    assert (lm[:, 0] > x1).all() and (lm[:, 0] < x2).all()
    assert (lm[:, 1] > y1).all() and (lm[:, 1] < y2).all()
    eye_dist = rex - lex
    assert 0.2 * (x2 - x1) < eye_dist < 0.8 * (x2 - x1)


def test_one_face_per_portrait_with_sensible_landmarks(detector, photos):
    names = list(photos)
    dets = detector.detect([photos[n] for n in names])  # mixed sizes in one call
    for name, det in zip(names, dets, strict=True):
        assert len(det) == 1, f"{name}: {len(det)} faces"
        assert det.scores[0] > 0.95
        assert det.boxes.shape == (1, 4) and det.landmarks.shape == (1, 5, 2)
        _check_geometry(det.boxes[0], det.landmarks[0])
        h, w = photos[name].shape[:2]
        # full-image coordinates even though large photos are shrunk for detection
        assert det.boxes[0, 2] <= w * 1.1 and det.boxes[0, 3] <= h * 1.1
    # astronaut: Eileen Collins' face is at about x 180-270, y 60-170 of the 512 px image
    box = dets[names.index("astronaut")].boxes[0]
    assert 150 < box[0] < 210 and 240 < box[2] < 300 and 30 < box[1] < 100 and 140 < box[3] < 210


def test_several_faces_in_group_photo(detector, shared_fixtures):
    img = _load(shared_fixtures / "multiface.jpg")
    det = detector.detect([img])[0]
    assert len(det) >= 4
    assert np.all(np.diff(det.scores) <= 0), "faces ordered best first"
    for box, lm in zip(det.boxes, det.landmarks, strict=True):
        _check_geometry(box, lm)
    boxes = det.boxes
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    d = np.linalg.norm(centres[:, None] - centres[None], axis=-1) + np.eye(len(boxes)) * 1e9
    assert d.min() > 20, "distinct faces, not duplicates of one"
    chosen = {p: select_face(det, p, img.shape[1], img.shape[0])
              for p in ("largest", "central", "score")}
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    assert chosen["largest"] == int(np.argmax(area))
    assert chosen["score"] == 0


def test_no_face_in_plain_image_and_tiny_image(detector):
    gradient = np.tile(np.linspace(0, 255, 200, dtype=np.uint8)[None, :, None], (150, 1, 3))
    tiny = np.zeros((10, 10, 3), np.uint8)  # smaller than min_face_size: pyramid is empty
    dets = detector.detect([gradient, tiny])
    assert [len(d) for d in dets] == [0, 0] and not any(d.error for d in dets)
    assert detector.detect([]) == []


def test_batched_equals_one_by_one(detector, photos):
    a = np.asarray(Image.fromarray(photos["astronaut"]).resize((256, 256)))
    b = np.ascontiguousarray(a[:, ::-1])
    together = detector.detect([a, b])
    alone = [detector.detect([a])[0], detector.detect([b])[0]]
    for t, s in zip(together, alone, strict=True):
        assert len(t) == len(s) == 1
        assert np.allclose(t.boxes, s.boxes, atol=0.5)
        assert np.allclose(t.landmarks, s.landmarks, atol=0.5)
    # mirror image: the face box mirrors too
    assert abs((255 - together[1].boxes[0, 2]) - together[0].boxes[0, 0]) < 4


def test_padded_buckets_give_the_same_faces():
    det = FaceDetector({"device": "cpu"})
    img = np.ascontiguousarray(skimage.data.astronaut()[:500, :470])
    plain = det.detect([img])[0]
    det.bucket = 64  # what CUDA does with 32: pad mixed sizes into shared shapes
    padded = det.detect([img, np.zeros((450, 430, 3), np.uint8)])
    assert len(padded[0]) == len(plain) == 1 and len(padded[1]) == 0
    # padding changes MTCNN's image pyramid (it is built from the padded size), so boxes move
    # by a pixel or two on this ~90 px face; landmarks likewise
    assert np.allclose(padded[0].boxes, plain.boxes, atol=3.0)
    assert np.allclose(padded[0].landmarks, plain.landmarks, atol=3.0)


def test_large_images_are_shrunk_and_mapped_back(detector, photos):
    a = photos["astronaut"]
    big = np.asarray(Image.fromarray(a).resize((1536, 1536), Image.Resampling.BICUBIC))
    d_small, d_big = detector.detect([a])[0], detector.detect([big])[0]
    assert len(d_big) == 1
    assert np.allclose((d_big.boxes[0] + 0.5) / 3 - 0.5, d_small.boxes[0], atol=4)
    assert np.allclose((d_big.landmarks[0] + 0.5) / 3 - 0.5, d_small.landmarks[0], atol=3)


def test_select_face_policies():
    det = Detections(
        boxes=np.array([[0, 0, 50, 50], [80, 80, 120, 120], [150, 0, 200, 40]], np.float32),
        scores=np.array([0.90, 0.80, 0.99], np.float32),
        landmarks=np.zeros((3, 5, 2), np.float32))
    assert select_face(det, "largest", 200, 200) == 0
    assert select_face(det, "central", 200, 200) == 1
    assert select_face(det, "score", 200, 200) == 2
    assert select_face(Detections(), "largest", 10, 10) is None
    with pytest.raises(ValueError):
        select_face(det, "biggest", 200, 200)


def test_weights_loader_roundtrip_and_missing_file(tmp_path):
    from facenet_pytorch.models.mtcnn import ONet, PNet, RNet

    torch.manual_seed(0)
    saved = {"pnet": PNet(pretrained=False), "rnet": RNet(pretrained=False),
             "onet": ONet(pretrained=False)}
    for name, net in saved.items():
        torch.save(net.state_dict(), tmp_path / MTCNN_FILES[name])
    nets, info = load_mtcnn_nets(tmp_path)
    for name, net in saved.items():
        for (k, v), (k2, v2) in zip(net.state_dict().items(), nets[name].state_dict().items(),
                                    strict=True):
            assert k == k2 and torch.equal(v, v2)
        assert len(info[name]["sha256"]) == 64
    det = FaceDetector({"device": "cpu", "weights_dir": str(tmp_path)})
    assert det.settings()["weights"]["pnet"]["path"].startswith(str(tmp_path))
    assert len(det.detect([skimage.data.astronaut()])) == 1  # runs with random weights
    (tmp_path / "onet.pt").unlink()
    with pytest.raises(FileNotFoundError, match="onet.pt"):
        load_mtcnn_nets(tmp_path)


def test_bundled_weights_provenance(detector):
    s = detector.settings()
    assert s["detector"] == "mtcnn" and s["implementation"].startswith("facenet-pytorch")
    assert set(s["weights"]) == {"pnet", "rnet", "onet"}
    assert s["thresholds"] == [0.6, 0.7, 0.7]


def test_config_validation():
    assert FacesConfig.from_mapping(None) == FacesConfig()
    for bad in ({"select": "biggest"}, {"crops": ["arcface", "dlib"]}, {"thresholds": [0.5]},
                {"fallback": "blur"}, {"device": "tpu"}, {"no_such_key": 1}):
        with pytest.raises(ValueError):
            FacesConfig.from_mapping(bad)
