"""Embedding backends: real loaders fed with weights the tests create in the real formats."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from facecast.embed.base import MissingWeightsError
from facecast.embed.facenet import FACENET_WEIGHTS, FacenetEmbedder, load_facenet
from facecast.embed.iresnet import IResNetEmbedder, build_iresnet, load_iresnet
from facecast.embed.onnx_model import OnnxEmbedder, input_geometry
from facecast.embed.registry import build_embedder


def _crops(n: int, size: int, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8))


def _randomise_bn(model: torch.nn.Module, seed: int = 0) -> None:
    """Non-trivial BatchNorm statistics so eval-mode outputs depend on every buffer."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)


@pytest.fixture(scope="module")
def iresnet_file(tmp_path_factory):
    torch.manual_seed(0)
    model = build_iresnet("r18").eval()
    _randomise_bn(model)
    path = tmp_path_factory.mktemp("insightface") / "backbone.pth"
    torch.save(model.state_dict(), path)
    return path, model


def test_iresnet_official_key_names(iresnet_file):
    _, model = iresnet_file
    keys = set(model.state_dict())
    for k in ["conv1.weight", "bn1.running_var", "prelu.weight", "layer1.0.bn1.weight",
              "layer1.0.conv1.weight", "layer1.0.bn2.bias", "layer1.0.prelu.weight",
              "layer1.0.conv2.weight", "layer1.0.bn3.running_mean",
              "layer1.0.downsample.0.weight", "layer1.0.downsample.1.weight",
              "layer4.1.conv2.weight", "bn2.weight", "fc.weight", "fc.bias",
              "features.weight", "features.running_var"]:
        assert k in keys, k
    assert model.fc.in_features == 512 * 7 * 7
    assert not any(k.startswith("layer1.1.downsample") for k in keys)
    # r100: 3/13/30/3 blocks
    r100 = {k.split(".")[0] + "." + k.split(".")[1] for k in build_iresnet("r100").state_dict()
            if k.startswith("layer")}
    assert {f"layer2.{i}" for i in range(13)} <= r100 and "layer3.29" in r100
    assert "layer3.30" not in r100


def test_iresnet_roundtrip_same_outputs(iresnet_file):
    path, model = iresnet_file
    emb = IResNetEmbedder("r18", weights=str(path), arch="r18")
    crops = _crops(3, 112)
    x = (crops.permute(0, 3, 1, 2).float() / 255 - 0.5) / 0.5
    with torch.no_grad():
        want = model(x).numpy()
    got = emb.embed(crops)
    assert got.shape == (3, 512)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    flip = IResNetEmbedder("r18f", weights=str(path), arch="r18", flip=True).embed(crops)
    with torch.no_grad():
        want_flip = want + model(torch.flip(x, dims=[3])).numpy()
    np.testing.assert_allclose(flip, want_flip, rtol=1e-4, atol=1e-4)
    prov = emb.provenance()
    assert prov["backend"] == "iresnet" and len(prov["weights_sha256"]) == 64


def test_iresnet_training_checkpoint_and_wrong_arch(iresnet_file, tmp_path):
    path, model = iresnet_file
    state = torch.load(path, weights_only=True)
    ckpt = tmp_path / "checkpoint.pt"
    torch.save({"state_dict_backbone": {f"module.{k}": v for k, v in state.items()}}, ckpt)
    loaded = load_iresnet(ckpt, "r18")
    for k, v in loaded.state_dict().items():
        assert torch.equal(v, state[k]), k
    with pytest.raises(ValueError, match="does not match iresnet arch 'r34'"):
        load_iresnet(path, "r34")


class _Payload:
    """An arbitrary Python object: pickling it into a weight file must not get it loaded."""


def test_iresnet_refuses_pickled_objects(tmp_path):
    bad = tmp_path / "backbone.pth"
    torch.save({"fc.weight": torch.zeros(1), "evil": _Payload()}, bad)
    with pytest.raises(Exception, match="(?i)weights_only|unsupported|global"):
        load_iresnet(bad, "r18")


def test_facenet_loads_from_torch_home(tmp_path, monkeypatch):
    from facenet_pytorch import InceptionResnetV1

    torch.manual_seed(1)
    ref = InceptionResnetV1(pretrained=None).eval()
    ref.logits = torch.nn.Linear(512, FACENET_WEIGHTS["vggface2"][1])
    _randomise_bn(ref, seed=1)
    ckpt_dir = tmp_path / "torch_home" / "checkpoints"
    ckpt_dir.mkdir(parents=True)
    torch.save(ref.state_dict(), ckpt_dir / "20180402-114759-vggface2.pt")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))

    emb = build_embedder("facenet", {"backend": "facenet"}, device="cpu")
    assert isinstance(emb, FacenetEmbedder) and emb.crop_column == "crop_facenet"
    assert emb.weights_path == str(ckpt_dir / "20180402-114759-vggface2.pt")
    crops = _crops(2, 160, seed=2)
    raw = emb.embed(crops)
    with torch.no_grad():  # facenet's own forward: standardise, then L2-normalised output
        want = ref((crops.permute(0, 3, 1, 2).float() - 127.5) / 128.0).numpy()
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), want,
                               rtol=1e-4, atol=1e-5)


def test_facenet_missing_weights_names_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty"))
    with pytest.raises(MissingWeightsError) as err:
        load_facenet("casia-webface", model_name="fn")
    msg = str(err.value)
    assert str(tmp_path / "empty" / "checkpoints" / "20180408-102900-casia-webface.pt") in msg
    assert "20180408-102900-casia-webface.pt" in msg and "weights" in msg


@pytest.mark.parametrize("backend,extra", [("iresnet", {"arch": "r18"}), ("onnx", {}),
                                           ("facenet", {}), ("dlib_resnet", {})])
def test_missing_weights_clear_error(tmp_path, backend, extra):
    missing = tmp_path / "nowhere" / "model.bin"
    with pytest.raises(MissingWeightsError, match=str(missing).replace(".", r"\.")):
        build_embedder("m", {"backend": backend, "weights": str(missing), **extra},
                       device="cpu")


def test_unknown_option_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['flip'\]"):
        build_embedder("d", {"backend": "dlib_resnet", "flip": True}, device="cpu")
    with pytest.raises(ValueError, match="unknown embedding backend"):
        build_embedder("x", {"backend": "nope"})


class _TinyNet(torch.nn.Module):
    def __init__(self, nhwc: bool) -> None:
        super().__init__()
        self.nhwc = nhwc
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2)
        self.fc = torch.nn.Linear(8, 16)

    def forward(self, x):
        if self.nhwc:
            x = x.permute(0, 3, 1, 2)
        x = F.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1)
        return self.fc(x)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # legacy exporter: no onnxscript
@pytest.mark.parametrize("nhwc,size,bgr", [(False, 112, False), (True, 96, True)])
def test_onnx_roundtrip_same_embeddings(tmp_path, nhwc, size, bgr):
    torch.manual_seed(3)
    net = _TinyNet(nhwc).eval()
    shape = (1, size, size, 3) if nhwc else (1, 3, size, size)
    path = tmp_path / "model.onnx"
    torch.onnx.export(net, (torch.zeros(shape),), str(path), input_names=["data"],
                      output_names=["emb"], dynamic_axes={"data": {0: "n"}, "emb": {0: "n"}},
                      dynamo=False)
    mean, std = [120.0, 110.0, 100.0], [60.0, 62.0, 64.0]
    emb = OnnxEmbedder("o", weights=str(path), mean=mean, std=std,
                       channel_order="bgr" if bgr else "rgb")
    assert (emb.layout, emb.height, emb.dim) == ("NHWC" if nhwc else "NCHW", size, 16)
    crops = _crops(4, 112, seed=4)
    got = emb.embed(crops)
    x = crops.permute(0, 3, 1, 2).float()
    if size != 112:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                          antialias=True)
    if bgr:
        x = x.flip(1)
    x = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    if nhwc:
        x = x.permute(0, 2, 3, 1)
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_onnx_input_geometry():
    assert input_geometry(["N", 3, 112, 112]) == ("NCHW", 112, 112)
    assert input_geometry([1, 128, 128, 3]) == ("NHWC", 128, 128)
    with pytest.raises(ValueError, match="dynamic height"):
        input_geometry(["N", 3, "h", "w"])
    with pytest.raises(ValueError, match="channel axis"):
        input_geometry([1, 5, 112, 112])
