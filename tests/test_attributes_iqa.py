"""Optional pyiqa scorer (extra facecast[iqa]): piqe on real photos, fast clear errors."""

from __future__ import annotations

import time

import numpy as np
import pyiqa
import pytest

from facecast.attributes.age_gender import ModelFilesMissing
from facecast.attributes.inputs import faces_table
from facecast.attributes.stage import score_shard
from facecast.io.parquet_io import write_parquet


@pytest.fixture(scope="module")
def aligned():
    """The astronaut and Grace Hopper aligned to the ArcFace template (fixed landmarks)."""
    import matplotlib.cbook as cbook
    from PIL import Image
    from skimage import data

    from facecast.attributes.align import ARCFACE_TEMPLATE_112, warp_batch

    hopper = np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg")).convert("RGB"))
    lms = np.array([[[205.5, 117.7], [249.6, 107.5], [232.8, 136.6], [215.6, 163.1],
                     [253.3, 155.6]],
                    [[219.0, 233.0], [300.0, 231.0], [262.0, 280.0], [228.0, 314.0],
                     [295.0, 313.0]]])
    crops = np.concatenate([warp_batch(im[None], lm[None], ARCFACE_TEMPLATE_112, 112)
                            for im, lm in zip([data.astronaut(), hopper], lms, strict=True)])
    return ["astronaut", "grace_hopper"], crops, lms


def test_pyiqa_piqe_and_entropy_on_a_real_photo(tmp_path, aligned):
    names, crops, lms = aligned
    faces = write_parquet(faces_table(names, list(crops), lms,
                                      np.array([[0, 0, 100, 100]] * 2, float)),
                          tmp_path / "faces.parquet")
    cfg = {"pyiqa": {"metrics": ["piqe", "entropy"]}, "device": "cpu"}
    t = score_shard("pyiqa", faces, tmp_path / "iqa.parquet", cfg)
    assert t["iqa_piqe"].between(0, 100).all()
    assert t["iqa_entropy"].between(4, 8).all()  # real photos: rich histograms
    noise = np.random.default_rng(0).integers(0, 256, (1, 112, 112, 3), dtype=np.uint8)
    from facecast.attributes.iqa import IQAScorer

    s = IQAScorer(["piqe"])
    assert s.predict(noise)["iqa_piqe"][0] > s.predict(crops[:1])["iqa_piqe"][0]


def test_pyiqa_missing_weights_fail_fast_and_clearly(tmp_path, monkeypatch):
    from facecast.attributes.iqa import IQAScorer, missing_files

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    start = time.perf_counter()
    with pytest.raises(ModelFilesMissing) as err:
        IQAScorer(["brisque", "paq2piq"])
    assert time.perf_counter() - start < 5
    msg = str(err.value)
    assert str(tmp_path / "torch" / "hub" / "pyiqa" / "brisque_svm_weights.pth") in msg
    assert "P2P_RoIPoolModel-fit.10.bs.120-ca69882e.pth" in msg
    assert "resnet18-f37072fd.pth" in msg
    # once the file is there the check passes for it
    f = tmp_path / "torch" / "hub" / "pyiqa" / "brisque_svm_weights.pth"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    assert missing_files(["brisque"]) == []
    with pytest.raises(ValueError, match="unknown"):
        IQAScorer(["no_such_metric"])


def test_pyiqa_downloads_are_refused(tmp_path, monkeypatch):
    """A metric facecast has no file table for still cannot hang on a download."""
    from facecast.attributes.iqa import no_downloads

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    start = time.perf_counter()
    with no_downloads(), pytest.raises(ModelFilesMissing, match="niqe_modelparameters.mat"):
        pyiqa.create_metric("niqe", device="cpu")
    assert time.perf_counter() - start < 5
