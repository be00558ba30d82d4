"""Building any arcface_torch backbone, reading a ``backbone.pth`` and inferring its arch.

A state dict names its architecture: the key set tells the family (``layer1.0.conv1`` is an
iResNet, ``conv_sep`` a MobileFaceNet, ``patch_embed`` a ViT) and the keys and shapes tell
the depth and width. :func:`infer_arch` compares the file with the keys and shapes of every
arch (built on the ``meta`` device: no memory, no init cost) and returns the one that fits
exactly; a file that fits none is a :class:`ArchMismatchError` listing the missing,
unexpected and mis-shaped keys against the closest arch.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from facecast.embed.arcface.iresnet import IRESNET_LAYERS, build_iresnet
from facecast.embed.arcface.mobilefacenet import MBF_CONFIGS, build_mobilefacenet
from facecast.embed.arcface.vit import VIT_CONFIGS, FaceViT, build_vit
from facecast.embed.base import missing_weights

#: every arch, by family (arcface_torch's get_model names)
FAMILIES: dict[str, tuple[str, ...]] = {
    "iresnet": tuple(IRESNET_LAYERS),
    "mobilefacenet": tuple(MBF_CONFIGS),
    "vit": tuple(VIT_CONFIGS),
}
ARCHS: tuple[str, ...] = tuple(a for archs in FAMILIES.values() for a in archs)
FAMILY = {a: fam for fam, archs in FAMILIES.items() for a in archs}
_BUILDERS: dict[str, Callable[[str, int], nn.Module]] = {
    "iresnet": build_iresnet, "mobilefacenet": build_mobilefacenet, "vit": build_vit}
#: a key only that family's state dicts have (tried first by arch inference)
MARKERS = {"iresnet": "layer1.0.conv1.weight", "mobilefacenet": "conv_sep.layers.0.weight",
           "vit": "patch_embed.proj.weight"}
#: the last BatchNorm of each family's head: its size is the embedding size
HEAD_KEYS = ("features.weight", "features.layers.3.weight", "feature.3.weight")
#: where to find the weights of the released models
WEIGHTS_HOW = ("Put an insightface arcface_torch backbone.pth there (e.g. "
               "ms1mv3_arcface_r100_fp16/backbone.pth from the insightface model zoo, or a "
               "model of CAST's models/) or set embed.models.<name>.weights.")
LISTED = 8  # keys named per kind in an error message


def build_backbone(arch: str, num_features: int = 512) -> nn.Module:
    """A randomly initialised backbone ``arch`` (any of :data:`ARCHS`)."""
    if arch not in FAMILY:
        raise ValueError(f"unknown arcface_torch arch {arch!r}; choose from {', '.join(ARCHS)} "
                         "or auto")
    return _BUILDERS[FAMILY[arch]](arch, num_features)


@functools.cache
def expected_shapes(arch: str, num_features: int = 512) -> dict[str, tuple[int, ...]]:
    """State-dict key -> tensor shape of ``arch`` (built on the meta device)."""
    with torch.device("meta"):
        model = build_backbone(arch, num_features)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def read_state_dict(path: str | os.PathLike, model_name: str = "arcface_torch",
                    map_location: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The backbone state dict in ``path`` (tensors only: ``weights_only=True``).

    Accepts a bare state dict (``torch.save(backbone.state_dict(), "backbone.pth")``, what
    arcface_torch and CAST save) or a training checkpoint holding one under
    ``state_dict_backbone``/``state_dict``/``model``; ``module.`` (DistributedDataParallel)
    and ``_orig_mod.`` (torch.compile) prefixes are dropped. Other keys stay as they are.
    """
    p = Path(path)
    if not p.is_file():
        raise missing_weights(p, model_name, WEIGHTS_HOW)
    obj: Any = torch.load(p, map_location=map_location, weights_only=True)
    if isinstance(obj, Mapping):
        for key in ("state_dict_backbone", "state_dict", "model"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(torch.is_tensor(v) for v in obj.values()):
        raise ValueError(f"{p}: an arcface_torch backbone file must hold a state dict "
                         "(parameter name -> tensor)")
    out = {}
    for k, v in obj.items():
        for prefix in ("module.", "_orig_mod."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        out[k] = v
    return out


def num_features_of(state: Mapping[str, torch.Tensor]) -> int:
    """Embedding size stored in the head of ``state`` (512 when no head key is there)."""
    for key in HEAD_KEYS:
        if key in state and state[key].ndim == 1:
            return int(state[key].shape[0])
    return 512


@dataclass
class Fit:
    """How a state dict differs from the keys and shapes of one arch."""

    arch: str
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)  # "key: file (..) vs arch (..)"

    @property
    def errors(self) -> int:
        return len(self.missing) + len(self.unexpected) + len(self.mismatched)

    def describe(self) -> str:
        parts = []
        for what, keys in (("missing keys", self.missing), ("unexpected keys", self.unexpected),
                           ("shape mismatches", self.mismatched)):
            if keys:
                more = f" and {len(keys) - LISTED} more" if len(keys) > LISTED else ""
                parts.append(f"{len(keys)} {what}: {', '.join(keys[:LISTED])}{more}")
        return "; ".join(parts) or "fits"


def fit(state: Mapping[str, torch.Tensor], arch: str) -> Fit:
    """Compare ``state`` with ``arch`` (``num_batches_tracked`` buffers may be absent)."""
    want = expected_shapes(arch, num_features_of(state))
    result = Fit(arch)
    result.missing = [k for k in want if k not in state
                      and not k.endswith("num_batches_tracked")]
    result.unexpected = [k for k in state if k not in want]
    result.mismatched = [f"{k}: file {tuple(state[k].shape)} vs arch {want[k]}"
                         for k in want if k in state and tuple(state[k].shape) != want[k]]
    return result


def rank_archs(state: Mapping[str, torch.Tensor]) -> list[Fit]:
    """Every arch's :class:`Fit` to ``state``, best first (ties keep :data:`ARCHS` order)."""
    return sorted((fit(state, a) for a in ARCHS), key=lambda f: f.errors)


class ArchMismatchError(ValueError):
    """A state dict that does not fit the requested arch (or, for ``auto``, any arch)."""


def infer_arch(state: Mapping[str, torch.Tensor], source: str = "state dict") -> str:
    """The arch whose keys and shapes ``state`` has exactly (``arch: auto``)."""
    likely = [a for a in ARCHS if MARKERS[FAMILY[a]] in state]
    for arch in likely:
        if fit(state, arch).errors == 0:
            return arch
    best = rank_archs(state)[0]
    raise ArchMismatchError(
        f"{source}: arch auto found no arcface_torch architecture ({', '.join(ARCHS)}) whose "
        f"keys and shapes it has; the closest is {best.arch!r} ({FAMILY[best.arch]}), "
        f"against which it has {best.describe()}")


def check_arch(state: Mapping[str, torch.Tensor], arch: str, source: str = "state dict") -> None:
    """Raise :class:`ArchMismatchError` (missing/unexpected keys and the arch that fits
    best) unless ``state`` fits ``arch`` exactly."""
    if arch not in FAMILY:
        build_backbone(arch)  # the unknown-arch error
    this = fit(state, arch)
    if this.errors == 0:
        return
    best = rank_archs(state)[0]
    if best.errors == 0:
        hint = f"it fits arch {best.arch!r} ({FAMILY[best.arch]}): set arch: {best.arch} or auto"
    else:
        hint = (f"no arcface_torch arch fits it; the closest is {best.arch!r} "
                f"({FAMILY[best.arch]}, {best.errors} differences)")
    raise ArchMismatchError(f"{source} does not match {FAMILY[arch]} arch {arch!r}: "
                            f"{this.describe()}. {hint}")


def vit_dims(state: Mapping[str, torch.Tensor]) -> tuple[int, int] | None:
    """(embed_dim, depth) of a face-ViT state dict, None for other families. The number of
    attention heads is NOT in a state dict: no tensor's shape depends on it."""
    proj = state.get(MARKERS["vit"])
    if proj is None:
        return None
    depth = sum(1 for k in state if k.startswith("blocks.") and k.endswith(".norm1.weight"))
    return int(proj.shape[0]), depth


def _custom_vit(state: Mapping[str, torch.Tensor], heads: int | None, source: str
                ) -> tuple[nn.Module, str]:
    """A face ViT of the state dict's own dims with ``heads`` heads (named by the user:
    never guessed)."""
    dims = vit_dims(state)
    if dims is None:
        raise ArchMismatchError(f"{source}: heads applies to ViT backbones only, and this "
                                "state dict is no arcface_torch ViT")
    dim, depth = dims
    if heads is None:
        raise ArchMismatchError(
            f"{source}: a ViT of embed_dim {dim} and depth {depth} matches no arcface_torch "
            f"ViT ({', '.join(VIT_CONFIGS)}); its number of attention heads is not stored "
            "in a state dict, so facecast will not guess it: set "
            "embed.models.<name>.heads (the num_heads it was trained with)")
    if heads < 1 or dim % heads:
        raise ArchMismatchError(f"{source}: heads {heads} must divide embed_dim {dim}")
    model = FaceViT(dim, depth, int(heads), num_features=num_features_of(state))
    return model, f"vit(embed_dim={dim},depth={depth},heads={heads})"


def load_backbone(path: str | os.PathLike, arch: str = "auto", model_name: str = "arcface_torch",
                  map_location: str | torch.device = "cpu", heads: int | None = None
                  ) -> tuple[nn.Module, str]:
    """Load a ``backbone.pth`` into its arch (``auto``: inferred); returns (model in eval
    mode, arch). The keys load unchanged with ``load_state_dict(strict=True)``.

    ``heads`` (ViT only): the attention heads of a ViT that is not one of arcface_torch's
    (its dims are read from the file); a ViT whose dims match no zoo arch stops with an
    error naming ``heads`` instead of loading with a guess.
    """
    state = read_state_dict(path, model_name, map_location)
    source = str(path)
    zoo_vit = arch == "auto" and any(fit(state, a).errors == 0 for a in VIT_CONFIGS)
    if vit_dims(state) is not None and arch == "auto" and (heads is not None or not zoo_vit):
        model, arch = _custom_vit(state, heads, source)
    elif heads is not None and not (arch in VIT_CONFIGS or zoo_vit):
        raise ArchMismatchError(f"{source}: heads applies to ViT backbones only")
    else:
        if arch == "auto":
            arch = infer_arch(state, source)
        else:
            check_arch(state, arch, source)
        model = (FaceViT(*VIT_CONFIGS[arch][:2], int(heads),
                         num_features=num_features_of(state))
                 if heads is not None and arch in VIT_CONFIGS
                 else build_backbone(arch, num_features_of(state)))
    for k, v in model.state_dict().items():  # files of old torch versions lack these buffers
        if k.endswith("num_batches_tracked") and k not in state:
            state[k] = torch.zeros_like(v)
    model.load_state_dict(state, strict=True)
    return model.eval(), arch
