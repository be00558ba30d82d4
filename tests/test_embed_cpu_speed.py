"""CPU speed paths of the arcface_torch backend: the ``inference`` option (eager, fused,
frozen) and ``embed.cpu_micro_batch`` (micro-batches run by the job's threads).

Each must give the features of the literal eager forward (cosine >= 0.9999 on real face
crops), say which mode ran, fall back when a rewritten model cannot be built or differs,
and not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import facecast.embed.arcface.inference as inference
from facecast.embed.arcface.weights import build_backbone
from facecast.embed.registry import build_embedder
from facecast.embed.stage import embed_crops
from facecast.faces.crops import encode_png

COS_MIN = 0.9999


@pytest.fixture(scope="module")
def crops(shared_fixtures) -> torch.Tensor:
    """Eight real face crops, uint8 (N, 112, 112, 3): the centre squares of the test
    portraits and their mirror images."""
    out = []
    for p in sorted(shared_fixtures.glob("faces/*/1.jpg")):
        with Image.open(p) as im:
            im = im.convert("RGB")
            side = min(im.size)
            left, top = (im.width - side) // 2, (im.height - side) // 2
            out.append(np.asarray(im.crop((left, top, left + side, top + side)).resize(
                (112, 112), Image.Resampling.BILINEAR)))
    out += [a[:, ::-1].copy() for a in out]
    return torch.from_numpy(np.stack(out))


@pytest.fixture(scope="module")
def mbf(crops, tmp_path_factory):
    """(eval model with calibrated BatchNorm, path of its backbone.pth)."""
    torch.manual_seed(0)
    model = build_backbone("mbf")
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
            m.weight.data.uniform_(0.5, 1.5, generator=g)
            m.bias.data.normal_(0, 0.1, generator=g)
    model.train()
    with torch.no_grad():
        model(_scaled(crops))
    model.eval()
    path = tmp_path_factory.mktemp("mbf") / "backbone.pth"
    torch.save(model.state_dict(), path)
    return model, path


def _scaled(crops: torch.Tensor) -> torch.Tensor:
    return (crops.permute(0, 3, 1, 2).float() / 255 - 0.5) / 0.5


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _embedder(path, mode: str):
    return build_embedder("m", {"backend": "arcface_torch", "weights": str(path),
                                "inference": mode}, device="cpu")


@pytest.mark.parametrize("mode,runs", [("auto", "frozen"), ("frozen", "frozen"),
                                       ("fused", "fused"), ("eager", "eager")])
def test_every_inference_mode_gives_the_eager_features(mbf, crops, mode, runs):
    model, path = mbf
    emb = _embedder(path, mode)
    assert emb.inference == runs and emb.provenance()["inference"] == runs
    with torch.no_grad():
        want = model(_scaled(crops)).numpy()
    got = emb.embed(crops)
    assert _cosines(got, want).min() >= COS_MIN
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), np.linalg.norm(want, axis=1),
                               rtol=1e-4)
    if runs == "eager":
        np.testing.assert_array_equal(got, want)  # the literal forward


def test_fold_batchnorm_leaves_no_batchnorm2d_and_keeps_the_model(mbf):
    model, _ = mbf
    folded = inference.fold_batchnorm(model)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())  # a copy


def test_a_mode_that_cannot_be_built_falls_back(mbf, monkeypatch, caplog):
    _, path = mbf

    def broken(model):
        raise RuntimeError("tracing refused")

    monkeypatch.setattr(inference, "freeze_model", broken)
    emb = _embedder(path, "frozen")
    assert emb.inference == "fused"
    assert "inference frozen could not be built (RuntimeError: tracing refused)" in caplog.text


def test_a_rewritten_model_that_differs_is_not_used(mbf, monkeypatch, caplog):
    _, path = mbf
    wrong = build_backbone("mbf").eval()  # other (random) weights: other features
    monkeypatch.setattr(inference, "freeze_model", lambda model: wrong)
    monkeypatch.setattr(inference, "fold_batchnorm", lambda model: wrong)
    emb = _embedder(path, "frozen")
    assert emb.inference == "eager"
    assert "differ from the eager model" in caplog.text


def test_unknown_mode_is_refused(mbf):
    with pytest.raises(ValueError, match="inference must be one of auto, eager, fused, "
                                         "frozen, half, got 'fast'"):
        _embedder(mbf[1], "fast")


def test_micro_batches_match_the_whole_batch_and_not_the_threads(mbf, crops):
    _, path = mbf
    emb = _embedder(path, "eager")
    pngs = [encode_png(a) for a in crops.numpy()] + [b"not a png"]
    rows = np.arange(len(pngs))
    threads_before = torch.get_num_threads()
    whole, ok0, _ = embed_crops(emb, pngs, rows, batch_size=6, threads=2, micro_batch=0)
    one, ok1, _ = embed_crops(emb, pngs, rows, batch_size=6, threads=1, micro_batch=2)
    two, ok2, err = embed_crops(emb, pngs, rows, batch_size=6, threads=2, micro_batch=2)
    assert torch.get_num_threads() == threads_before  # restored
    assert ok0.tolist() == ok1.tolist() == ok2.tolist() == [True] * len(crops) + [False]
    assert err[-1].startswith("crop does not decode")
    np.testing.assert_array_equal(one, two)  # same micro-batches, any thread count
    assert _cosines(two[:-1], whole[:-1]).min() >= COS_MIN
    # every face's features, in row order (a micro-batch is not shuffled)
    direct = emb.embed(crops)
    assert _cosines(two[:-1], direct).min() >= COS_MIN


def test_micro_batches_of_backends_that_are_not_thread_safe_run_in_one_thread(mbf, crops):
    from facecast.embed.stage import micro_batch_runner

    emb = _embedder(mbf[1], "eager")
    emb.thread_safe = False
    threads = torch.get_num_threads()
    with micro_batch_runner(emb, 2, 2) as run:
        assert torch.get_num_threads() == threads  # no pool: intra-op threads kept
        got = run(crops[:3])
    # fixed forward shape (issue 34.3): the odd crop is padded to a micro-batch of 2
    np.testing.assert_array_equal(got[2], emb.embed(torch.stack([crops[2], crops[2]]))[0])
    emb.per_crop = True  # a backend computing crop by crop is never padded
    with micro_batch_runner(emb, 2, 2) as run:
        assert run == emb.embed
