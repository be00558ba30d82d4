"""A face ViT's head count is not in its state dict (issue 30.5): a ViT whose dims match no
arcface_torch arch loads only with ``heads`` named, built from the file's own dims."""

from __future__ import annotations

import pytest
import torch

from facecast.embed.arcface.vit import FaceViT, build_vit
from facecast.embed.arcface.weights import ArchMismatchError, load_backbone, vit_dims


def _save(model: torch.nn.Module, path) -> None:
    torch.manual_seed(0)
    for name, p in model.named_parameters():  # sharp attention, so the heads matter
        torch.nn.init.normal_(p, std=0.5 if "qkv" in name else 0.05)
    torch.save(model.state_dict(), path)


def test_custom_vit_needs_heads_and_then_equals_the_saved_model(tmp_path):
    torch.manual_seed(1)
    model = FaceViT(64, 2, 4, num_features=32).eval()
    _save(model, tmp_path / "backbone.pth")
    state = torch.load(tmp_path / "backbone.pth", weights_only=True)
    assert vit_dims(state) == (64, 2)
    with pytest.raises(ArchMismatchError, match=r"heads.*not stored.*embed\.models\.<name>\.heads"):
        load_backbone(tmp_path / "backbone.pth")
    loaded, arch = load_backbone(tmp_path / "backbone.pth", heads=4)
    assert arch == "vit(embed_dim=64,depth=2,heads=4)"
    x = torch.rand(3, 3, 112, 112)
    with torch.inference_mode():
        assert torch.allclose(loaded(x), model.eval()(x), atol=1e-5)
        other, _ = load_backbone(tmp_path / "backbone.pth", heads=2)
        tokens = torch.randn(2, 144, 64)  # the heads matter: the same weights attend otherwise
        same = loaded.blocks[0].attn(tokens)
        assert torch.allclose(same, model.blocks[0].attn(tokens), atol=1e-5)
        assert (other.blocks[0].attn(tokens) - same).abs().max() > 1e-2
    with pytest.raises(ArchMismatchError, match="must divide"):
        load_backbone(tmp_path / "backbone.pth", heads=3)


def test_zoo_vit_loads_with_its_eight_heads_and_heads_apply_to_vits_only(tmp_path):
    _save(build_vit("vit_t", 64), tmp_path / "vit_t.pth")
    _, arch = load_backbone(tmp_path / "vit_t.pth")
    assert arch == "vit_t"
    model, arch = load_backbone(tmp_path / "vit_t.pth", arch="vit_t", heads=4)
    assert arch == "vit_t" and model.blocks[0].attn.heads == 4
    from facecast.embed.arcface.mobilefacenet import build_mobilefacenet

    _save(build_mobilefacenet("mbf", 64), tmp_path / "mbf.pth")
    with pytest.raises(ArchMismatchError, match="ViT backbones only"):
        load_backbone(tmp_path / "mbf.pth", heads=8)
