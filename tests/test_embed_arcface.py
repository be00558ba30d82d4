"""Backend ``arcface_torch``: every insightface arcface_torch / CAST backbone, loaded from a
``backbone.pth`` state dict the way users hold it.

Each arch is built, its BatchNorm statistics calibrated on real aligned faces (so the
features depend on the input: random BN statistics make some nets map every face to
nearly the same vector), saved with ``torch.save(model.state_dict())`` and loaded back
through the real loader (``build_embedder``); its features of real ArcFace crops (MTCNN +
ArcFace alignment of tests/data photos and skimage's astronaut) must equal the in-memory
model's forward on arcface_torch's preprocessing.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from PIL import Image
from skimage.data import astronaut

from facecast.embed.arcface.embedder import ArcfaceTorchEmbedder
from facecast.embed.arcface.weights import (
    ARCHS,
    ArchMismatchError,
    build_backbone,
    check_arch,
    expected_shapes,
    infer_arch,
    load_backbone,
    read_state_dict,
)
from facecast.embed.base import MissingWeightsError
from facecast.embed.registry import build_embedder
from facecast.faces.align import align_arcface
from facecast.faces.detect import FaceDetector

#: archs whose CPU forward costs about a second or more per face: two crops, not four
BIG = {"r34", "r50", "r100", "r200", "vit_s", "vit_b"}
COS_MIN = 0.9999

#: official state-dict entries per arch (name -> shape), from insightface's
#: recognition/arcface_torch/backbones, and the number of entries of each state dict
OFFICIAL_KEYS: dict[str, dict[str, tuple[int, ...]]] = {
    "r18": {"conv1.weight": (64, 3, 3, 3), "prelu.weight": (64,),
            "layer1.0.downsample.0.weight": (64, 64, 1, 1),
            "layer4.1.conv2.weight": (512, 512, 3, 3), "fc.weight": (512, 25088),
            "features.running_var": (512,)},
    "r34": {"layer3.5.bn3.running_mean": (256,), "layer4.2.prelu.weight": (512,)},
    "r50": {"layer3.13.conv2.weight": (256, 256, 3, 3), "bn2.weight": (512,)},
    "r100": {"layer2.12.conv1.weight": (128, 128, 3, 3), "layer3.29.bn1.weight": (256,),
             "fc.bias": (512,)},
    "r200": {"layer1.5.conv1.weight": (64, 64, 3, 3), "layer3.59.conv2.weight": (256, 256, 3, 3),
             "layer4.5.bn3.num_batches_tracked": ()},
    "mbf": {"layers.0.layers.0.weight": (128, 3, 3, 3), "layers.0.layers.1.running_var": (128,),
            "layers.0.layers.2.weight": (128,), "layers.1.layers.0.weight": (128, 2, 3, 3),
            "layers.2.layers.0.layers.0.weight": (128, 128, 1, 1),
            "layers.2.layers.1.layers.0.weight": (128, 1, 3, 3),
            "layers.3.layers.3.layers.2.layers.0.weight": (128, 128, 1, 1),
            "layers.4.layers.2.layers.0.weight": (256, 256, 1, 1),
            "layers.6.layers.0.layers.0.weight": (512, 256, 1, 1),
            "layers.7.layers.1.layers.2.layers.1.running_mean": (256,),
            "conv_sep.layers.0.weight": (512, 256, 1, 1), "conv_sep.layers.2.weight": (512,),
            "features.layers.0.layers.0.weight": (512, 1, 7, 7),
            "features.layers.2.weight": (512, 512), "features.layers.3.running_var": (512,)},
    "mbf_large": {"layers.0.layers.0.weight": (256, 3, 3, 3),
                  "layers.1.layers.1.layers.0.layers.0.weight": (128, 256, 1, 1),
                  "layers.5.layers.11.layers.2.layers.0.weight": (512, 256, 1, 1),
                  "layers.7.layers.3.layers.1.layers.0.weight": (256, 1, 3, 3),
                  "conv_sep.layers.0.weight": (512, 512, 1, 1)},
    "vit_t": {"patch_embed.proj.weight": (256, 3, 9, 9), "patch_embed.proj.bias": (256,),
              "pos_embed": (1, 144, 256), "mask_token": (1, 1, 256),
              "blocks.0.norm1.weight": (256,), "blocks.0.attn.qkv.weight": (768, 256),
              "blocks.0.attn.proj.bias": (256,), "blocks.11.mlp.fc1.weight": (1024, 256),
              "blocks.11.mlp.fc2.weight": (256, 1024), "norm.bias": (256,),
              "feature.0.weight": (256, 36864), "feature.1.running_var": (256,),
              "feature.2.weight": (512, 256), "feature.3.weight": (512,)},
    "vit_s": {"patch_embed.proj.weight": (512, 3, 9, 9), "blocks.11.attn.qkv.weight": (1536, 512),
              "feature.0.weight": (512, 73728)},
    "vit_b": {"pos_embed": (1, 144, 512), "blocks.23.norm2.weight": (512,),
              "blocks.23.mlp.fc1.weight": (2048, 512), "feature.0.weight": (512, 73728),
              "feature.2.weight": (512, 512), "feature.3.running_mean": (512,)},
}
N_KEYS = {"r18": 187, "r34": 331, "r50": 475, "r100": 925, "r200": 1807, "mbf": 333,
          "mbf_large": 606, "vit_t": 150, "vit_s": 150, "vit_b": 282}
#: keys no official state dict has (bias-free layers)
ABSENT = ["blocks.0.attn.qkv.bias", "feature.0.bias", "feature.2.bias",
          "features.layers.2.bias", "conv1.bias", "layers.0.layers.0.bias"]


# ------------------------------------------------------------------- real crops, models


def _small(im: Image.Image, side: int = 360) -> np.ndarray:
    im = im.convert("RGB")
    im.thumbnail((side, side), Image.Resampling.LANCZOS)
    return np.asarray(im)


@pytest.fixture(scope="module")
def crops(shared_fixtures) -> torch.Tensor:
    """Six real ArcFace crops, uint8 (N, 112, 112, 3): four portraits, the astronaut, and
    the astronaut's crop brightened (a second view of the same face)."""
    photos = [_small(Image.open(p)) for p in sorted(shared_fixtures.glob("faces/*/1.jpg"))]
    photos.append(_small(Image.fromarray(astronaut())))
    out = []
    for img, det in zip(photos, FaceDetector({"device": "cpu"}).detect(photos), strict=True):
        assert len(det) > 0
        best = int(np.argmax((det.boxes[:, 2] - det.boxes[:, 0])
                             * (det.boxes[:, 3] - det.boxes[:, 1])))
        out.append(align_arcface(img, det.landmarks[best]))
    out.append(np.clip(out[-1].astype(np.float32) * 1.2 + 10, 0, 255).astype(np.uint8))
    return torch.from_numpy(np.stack(out))


def reference_input(crops: torch.Tensor) -> torch.Tensor:
    """arcface_torch's evaluation preprocessing, written as its verification.py does."""
    return ((crops.permute(0, 3, 1, 2).float() / 255) - 0.5) / 0.5


def calibrate(model: torch.nn.Module, x: torch.Tensor, seed: int = 0) -> torch.nn.Module:
    """BatchNorm statistics from a training-mode forward on the faces ``x``; random BN
    affine parameters."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batch
            m.weight.data.uniform_(0.5, 1.5, generator=g)
            m.bias.data.normal_(0, 0.1, generator=g)
    model.train()
    with torch.no_grad():
        model(x)
    return model.eval()


def _n_crops(arch: str) -> int:
    return 2 if arch in BIG else 4


@pytest.fixture(scope="module", params=ARCHS)
def saved(request, crops, tmp_path_factory):
    """(arch, in-memory model, path of its backbone.pth) for each arch."""
    arch = request.param
    torch.manual_seed(0)
    model = calibrate(build_backbone(arch), reference_input(crops[:_n_crops(arch)]))
    path = tmp_path_factory.mktemp(f"arcface_{arch}") / "backbone.pth"
    torch.save(model.state_dict(), path)
    yield arch, model, path
    path.unlink()  # hundreds of MB for the big archs


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# ------------------------------------------------------------------------------ tests


def test_saved_state_dict_loads_and_gives_the_in_memory_features(saved, crops):
    arch, model, path = saved
    emb = build_embedder("m", {"backend": "arcface_torch", "arch": arch, "weights": str(path)},
                         device="cpu")
    assert isinstance(emb, ArcfaceTorchEmbedder) and emb.arch == arch and emb.dim == 512
    batch = crops[:_n_crops(arch)]
    got = emb.embed(batch)
    with torch.no_grad():
        want = model(reference_input(batch)).numpy()
    cos = _cosines(got, want)
    assert cos.min() >= COS_MIN, (arch, cos)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), np.linalg.norm(want, axis=1),
                               rtol=1e-4)
    # the features depend on the face: different people are far apart
    other = _cosines(want[:1].repeat(len(want) - 1, 0), want[1:])
    assert other.min() < 0.9, (arch, other)
    prov = emb.provenance()
    assert (prov["backend"], prov["arch"], prov["flip"]) == ("arcface_torch", arch, False)
    assert len(prov["weights_sha256"]) == 64
    # on CPU every arch runs TorchScript-frozen by default (embed.models.<m>.inference auto)
    assert prov["inference"] == emb.inference == "frozen", arch


def test_arch_auto_infers_every_arch(saved):
    arch, _, path = saved
    state = read_state_dict(path)
    assert len(state) == N_KEYS[arch]
    assert infer_arch(state) == arch
    # a wrong explicit arch names what the file is
    wrong = "vit_t" if arch != "vit_t" else "mbf"
    with pytest.raises(ArchMismatchError, match=rf"does not match \w+ arch '{wrong}': .*"
                                                rf"it fits arch '{arch}'"):
        check_arch(state, wrong, str(path))


@pytest.mark.parametrize("arch", ARCHS)
def test_official_key_names_and_shapes(arch):
    shapes = expected_shapes(arch)
    assert len(shapes) == N_KEYS[arch]
    for key, shape in OFFICIAL_KEYS[arch].items():
        assert shapes.get(key) == shape, (arch, key, shapes.get(key), shape)
    assert not set(ABSENT) & set(shapes)


def _small_model(arch: str, crops: torch.Tensor, num_features: int = 512, seed: int = 0):
    torch.manual_seed(seed)
    return calibrate(build_backbone(arch, num_features), reference_input(crops))


def test_flip_adds_the_mirrored_crops_features(crops, tmp_path):
    """(The iResNet flip-sum has its own test in test_embed_backends.py.)"""
    arch = "mbf"
    crops = crops[:4]
    model = _small_model(arch, crops)
    path = tmp_path / "backbone.pth"
    torch.save(model.state_dict(), path)
    emb = build_embedder("f", {"backend": "arcface_torch", "weights": str(path), "flip": True},
                         device="cpu")
    assert emb.arch == arch and emb.provenance()["flip"] is True
    x = reference_input(crops)
    with torch.no_grad():
        plain, mirrored = model(x).numpy(), model(torch.flip(x, dims=[3])).numpy()
    want = plain + mirrored
    got = emb.embed(crops)
    assert _cosines(got, want).min() >= COS_MIN
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    # the mirrored crop's features really differ from the crop's (so the sum is a test)
    assert _cosines(plain, mirrored).max() < 0.99


def test_iresnet_alias_is_the_same_backend(crops, tmp_path):
    model = _small_model("r18", crops[:2])
    path = tmp_path / "backbone.pth"
    torch.save(model.state_dict(), path)
    new = build_embedder("a", {"backend": "arcface_torch", "arch": "r18", "weights": str(path)},
                         device="cpu")
    old = build_embedder("b", {"backend": "iresnet", "arch": "r18", "weights": str(path)},
                         device="cpu")
    assert type(old) is type(new) is ArcfaceTorchEmbedder and old.arch == "r18"
    np.testing.assert_array_equal(old.embed(crops[:2]), new.embed(crops[:2]))
    from facecast.embed.iresnet import IResNetEmbedder, load_iresnet

    legacy = IResNetEmbedder("r18", weights=str(path), arch="r18")
    assert legacy.provenance()["backend"] == "iresnet"
    np.testing.assert_array_equal(legacy.embed(crops[:2]), new.embed(crops[:2]))
    with pytest.raises(ValueError, match="does not match iresnet arch 'r34'"):
        load_iresnet(path, "r34")


def test_mangled_state_dict_is_a_clear_error(crops, tmp_path):
    state = _small_model("mbf", crops[:4]).state_dict()
    del state["conv_sep.layers.1.running_mean"]
    state["features.layers.2.weights"] = state.pop("features.layers.2.weight")
    state["layers.0.layers.0.weight"] = state["layers.0.layers.0.weight"][:64]
    path = tmp_path / "backbone.pth"
    torch.save(state, path)
    with pytest.raises(ArchMismatchError) as err:
        build_embedder("m", {"backend": "arcface_torch", "weights": str(path)}, device="cpu")
    msg = str(err.value)
    assert str(path) in msg and "arch auto found no arcface_torch architecture" in msg
    assert "closest is 'mbf'" in msg
    assert "2 missing keys: conv_sep.layers.1.running_mean, features.layers.2.weight" in msg
    assert "1 unexpected keys: features.layers.2.weights" in msg
    assert "layers.0.layers.0.weight: file (64, 3, 3, 3) vs arch (128, 3, 3, 3)" in msg
    with pytest.raises(ArchMismatchError, match=r"does not match mobilefacenet arch 'mbf': "
                                                r"2 missing keys: .* no arcface_torch arch "
                                                r"fits it; the closest is 'mbf'"):
        load_backbone(path, "mbf")
    with pytest.raises(ValueError, match="unknown arcface_torch arch 'r101'"):
        load_backbone(path, "r101")


class _Payload:
    """An arbitrary Python object: pickled into a weight file, it must not get loaded."""


def test_checkpoints_other_embedding_sizes_and_refusals(crops, tmp_path):
    model = _small_model("mbf", crops[:4], num_features=128)
    ckpt = tmp_path / "checkpoint_gpu_0.pt"  # arcface_torch's resume checkpoint layout
    torch.save({"epoch": 3, "state_dict_backbone":
                {f"module.{k}": v for k, v in model.state_dict().items()}}, ckpt)
    emb = ArcfaceTorchEmbedder("c", weights=str(ckpt))
    assert (emb.arch, emb.dim) == ("mbf", 128)
    with torch.no_grad():
        want = model(reference_input(crops[:2])).numpy()
    assert _cosines(emb.embed(crops[:2]), want).min() >= COS_MIN
    with pytest.raises(MissingWeightsError, match="backbone.pth"):
        ArcfaceTorchEmbedder("x", weights=str(tmp_path / "nowhere" / "backbone.pth"))
    bad = tmp_path / "pickled.pth"
    torch.save({"conv1.weight": torch.zeros(1), "obj": _Payload()}, bad)
    with pytest.raises(Exception, match="(?i)weights_only|unsupported|global"):
        load_backbone(bad)


def test_config_check_knows_the_backend(tmp_path):
    from facecast.embed.checks import option_errors, weight_errors

    path = tmp_path / "backbone.pth"
    path.write_bytes(b"")
    ok = {"embed": {"models": {"v": {"backend": "arcface_torch", "arch": "vit_b",
                                     "flip": True, "weights": str(path)}}}}
    assert weight_errors(ok) == [] and option_errors(ok) == []
    none = {"embed": {"models": {"v": {"backend": "arcface_torch", "arch": "auto"}}}}
    assert weight_errors(none) == ["embed.models.v.weights: backend arcface_torch needs a "
                                   "weight file (an insightface arcface_torch backbone.pth); "
                                   "set embed.models.v.weights to its path"]
    other = {"embed": {"models": {"l": {"backend": "lbp", "arch": "r50"}}}}
    assert option_errors(other)[0].startswith("embed.models.l.arch: is an option of backend "
                                              "arcface_torch, not of lbp")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (fp16 path)")
def test_fp16_on_gpu_equals_the_in_memory_model(saved, crops):
    arch, model, path = saved
    dev = torch.device("cuda")
    emb = build_embedder("g", {"backend": "arcface_torch", "arch": arch, "weights": str(path)},
                         device="cuda", amp="fp16")
    ref = copy.deepcopy(model).to(dev).to(memory_format=torch.channels_last)
    x = reference_input(crops).to(dev).contiguous(memory_format=torch.channels_last)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        want = ref(x).float().cpu().numpy()
    got = emb.embed(crops)
    assert np.isfinite(got).all()
    cos = _cosines(got, want)
    assert cos.min() >= COS_MIN, (arch, cos)
    with torch.no_grad():  # and fp16 stays close to the fp32 CPU forward
        fp32 = model(reference_input(crops)).numpy()
    assert _cosines(got, fp32).min() >= 0.99, (arch, _cosines(got, fp32))
    del ref
    torch.cuda.empty_cache()
