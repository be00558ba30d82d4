"""Backend ``torchscript``: real models written with ``torch.jit.save``, fed real face photos.

Every file is created here in the real format (``torch.jit.script`` / ``torch.jit.trace`` +
``torch.jit.save``); the features through ``build_embedder`` must equal the in-memory
module's on crops preprocessed by hand (an independent formula, not the backend's helper).
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from skimage.data import astronaut

from facecast.embed.base import CROP_SIZES, MissingWeightsError
from facecast.embed.checks import option_errors, weight_errors
from facecast.embed.iresnet import IResNetEmbedder, build_iresnet
from facecast.embed.registry import build_embedder
from facecast.embed.torchscript_model import TorchScriptEmbedder, archive_kind

FACES = Path(__file__).parent / "data" / "faces"

# torch >= 2.9 deprecates writing TorchScript; the files users already have are what we load
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.*deprecated:FutureWarning")


def _square(im: np.ndarray) -> np.ndarray:
    h, w = im.shape[:2]
    s = min(h, w)
    return im[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]


def _real_crops(size: int) -> torch.Tensor:
    """Four vendored portraits and the astronaut's face, square, ``size`` px, uint8 RGB."""
    images = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(FACES.glob("*/1.jpg"))]
    images.append(astronaut()[20:200, 140:320])
    out = [np.asarray(Image.fromarray(_square(im)).resize((size, size), Image.BILINEAR))
           for im in images]
    return torch.from_numpy(np.stack(out))


def _by_hand(crops: torch.Tensor, size: int, mean, std, bgr: bool) -> torch.Tensor:
    x = crops.permute(0, 3, 1, 2).float()
    if x.shape[-1] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                          antialias=True)
    if bgr:
        x = x[:, [2, 1, 0]]
    m = torch.tensor(mean, dtype=torch.float32).reshape(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).reshape(-1, 1, 1)
    return (x - m) / s


class _ConvNet(torch.nn.Module):
    """A small conv net whose output depends on every channel differently."""

    def __init__(self, dim: int = 24) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, stride=2)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2)
        self.fc = torch.nn.Linear(16 * 4 * 4, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv1(x)))
        x = F.adaptive_avg_pool2d(F.relu(self.conv2(x)), 4)
        return self.fc(x.flatten(1))


class _TupleNet(torch.nn.Module):
    """Returns ``(features, norm)`` like MagFace / AdaFace exports."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _ConvNet(12)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.net(x)
        return f, torch.linalg.vector_norm(f, dim=1, keepdim=True)


@pytest.fixture(scope="module")
def convnet_file(tmp_path_factory):
    torch.manual_seed(5)
    net = _ConvNet().eval()
    net.bn.running_mean.uniform_(-0.2, 0.2)
    net.bn.running_var.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("ts") / "convnet.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    return path, net


CASES = [  # (crop, channel_order, mean, std, input_size)
    ("arcface", "rgb", 127.5, 127.5, None),
    ("arcface", "bgr", [120.0, 110.0, 100.0], [60.0, 62.0, 64.0], None),
    ("facenet", "rgb", [131.0, 103.0, 91.0], [70.0, 61.0, 58.0], 128),
]


@pytest.mark.parametrize("crop,order,mean,std,size", CASES)
def test_scripted_convnet_same_features_as_module(convnet_file, crop, order, mean, std, size):
    path, net = convnet_file
    cfg = {"backend": "torchscript", "weights": str(path), "crop": crop,
           "channel_order": order, "mean": mean, "std": std}
    if size:
        cfg["input_size"] = size
    emb = build_embedder("ts", cfg, device="cpu")
    assert isinstance(emb, TorchScriptEmbedder)
    want_size = size or {"arcface": 112, "facenet": 160}[crop]
    assert (emb.dim, emb.crop_column, emb.input_size) == (24, f"crop_{crop}", want_size)
    crops = _real_crops(CROP_SIZES[emb.crop_column])
    got = emb.embed(crops)
    mean3 = np.broadcast_to(np.asarray(mean, np.float32), 3).tolist()
    std3 = np.broadcast_to(np.asarray(std, np.float32), 3).tolist()
    with torch.no_grad():
        want = net(_by_hand(crops, want_size, mean3, std3, order == "bgr")).numpy()
    assert got.shape == (5, 24) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the options matter: the other channel order gives other features
    other = build_embedder("ts2", {**cfg, "channel_order": "rgb" if order == "bgr" else "bgr"},
                           device="cpu").embed(crops)
    assert np.abs(other - got).max() > 1e-3
    prov = emb.provenance()
    assert prov["backend"] == "torchscript" and len(prov["weights_sha256"]) == 64
    assert prov["mean"] == mean3 and prov["std"] == std3
    assert prov["channel_order"] == order and prov["input_size"] == want_size


def test_traced_iresnet18_matches_module_and_iresnet_backend(tmp_path):
    torch.manual_seed(0)
    model = build_iresnet("r18").eval()
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    # trace, as arcface exports do (torch.jit.script of IResNet trips on its fp32-head
    # autocast block, whose device argument is not a constant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(model, torch.zeros(1, 3, 112, 112), check_trace=False)
    ts_path = tmp_path / "r18.torchscript"
    torch.jit.save(traced, str(ts_path))
    emb = build_embedder("r18ts", {"backend": "torchscript", "weights": str(ts_path)},
                         device="cpu", amp="none")
    crops = _real_crops(112)[:3]
    got = emb.embed(crops)
    with torch.no_grad():
        want = model(_by_hand(crops, 112, [127.5] * 3, [127.5] * 3, False)).numpy()
    assert got.shape == (3, 512)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the same weights as a backbone.pth through the project's own iresnet backend
    pth = tmp_path / "backbone.pth"
    torch.save(model.state_dict(), pth)
    ref = IResNetEmbedder("r18", weights=str(pth), arch="r18").embed(crops)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_tuple_output_uses_first_element(tmp_path):
    torch.manual_seed(2)
    net = _TupleNet().eval()
    path = tmp_path / "magface_like.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    emb = build_embedder("t", {"backend": "torchscript", "weights": str(path)}, device="cpu")
    crops = _real_crops(112)
    with torch.no_grad():
        want = net(_by_hand(crops, 112, [127.5] * 3, [127.5] * 3, False))[0].numpy()
    assert emb.dim == 12
    np.testing.assert_allclose(emb.embed(crops), want, rtol=1e-4, atol=1e-5)


class _Boom:
    """Unpickling this would create ``marker``: proves the refused files are never unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_non_torchscript_files_are_refused_unread(tmp_path):
    marker = tmp_path / "unpickled"
    state = tmp_path / "state_dict.pth"
    torch.save({**_ConvNet().state_dict(), "boom": _Boom(marker)}, state)
    module = tmp_path / "module.pt"
    torch.save(_ConvNet(), module)
    plain = tmp_path / "model.pkl"
    plain.write_bytes(pickle.dumps(_Boom(marker)))
    text = tmp_path / "model.onnx"
    text.write_text("not a model")
    for path, what in [(state, "torch.save checkpoint"), (module, "torch.save checkpoint"),
                       (plain, "not a zip archive"), (text, "not a zip archive")]:
        with pytest.raises(ValueError, match=what) as err:
            build_embedder("bad", {"backend": "torchscript", "weights": str(path)},
                           device="cpu")
        assert str(path) in str(err.value) and what in str(err.value)
        assert "torch.jit.save" in str(err.value)
    assert not marker.exists()
    assert archive_kind(state).startswith("a torch.save checkpoint")


def test_missing_file_and_wrong_input_size(convnet_file, tmp_path):
    missing = tmp_path / "nowhere" / "model.pt"
    with pytest.raises(MissingWeightsError, match=str(missing).replace(".", r"\.")):
        build_embedder("m", {"backend": "torchscript", "weights": str(missing)}, device="cpu")
    torch.manual_seed(0)
    fixed = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 112 * 112, 8)).eval()
    path = tmp_path / "fixed112.pt"
    torch.jit.save(torch.jit.script(fixed), str(path))
    with pytest.raises(ValueError, match=r"embed\.models\.f\.input_size"):
        build_embedder("f", {"backend": "torchscript", "weights": str(path), "crop": "facenet"},
                       device="cpu")
    ok = build_embedder("f", {"backend": "torchscript", "weights": str(path), "crop": "facenet",
                              "input_size": 112}, device="cpu")
    assert ok.dim == 8 and ok.embed(_real_crops(160)).shape == (5, 8)
    with pytest.raises(ValueError, match="channel_order must be rgb or bgr"):
        build_embedder("c", {"backend": "torchscript", "weights": str(convnet_file[0]),
                             "channel_order": "rbg"}, device="cpu")


def test_config_checks_know_torchscript(convnet_file, tmp_path):
    cfg = {"embed": {"models": {
        "a": {"backend": "torchscript"},
        "b": {"backend": "torchscript", "weights": str(tmp_path / "gone.pt")},
        "c": {"backend": "torchscript", "weights": str(convnet_file[0]), "input_size": 96,
              "mean": [1, 2, 3], "std": 2.0, "channel_order": "bgr", "crop": "facenet"},
        "d": {"backend": "onnx", "weights": "x.onnx", "input_size": 96},
    }}}
    errors = weight_errors(cfg)
    assert any(e.startswith("embed.models.a.weights: backend torchscript needs") and
               "torch.jit.save" in e for e in errors)
    assert any(e.startswith("embed.models.b.weights: weight file") for e in errors)
    assert not any(e.startswith("embed.models.c.") for e in errors)
    opts = option_errors(cfg)
    assert opts == [e for e in opts if e.startswith("embed.models.d.input_size")] and opts
    assert "torchscript" in opts[0]
