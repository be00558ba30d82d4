"""dlib's face-recognition ResNet as ``examples/dnn_face_recognition_ex.cpp`` defines it
(``anet_type``), and the checks a weight file's layers must pass before a network is built.

The network, input first: ``input_rgb_image_sized<150>``; the stem ``con<32,7,7,2,2>``,
``affine``, ``relu``, ``max_pool<3,3,2,2>``; the residual levels ``alevel4 .. alevel0``
(:data:`RESNET_BLOCKS`): ``ares<N>`` = ``relu(add_prev1(block<N, stride 1>))`` and
``ares_down<N>`` = ``relu(add_prev2(avg_pool<2,2,2,2>(skip1), block<N, stride 2>))``, where
``block<N, stride>`` = ``affine(con<N,3,3,1,1>(relu(affine(con<N,3,3,stride,stride>))))``;
then ``avg_pool_everything`` (``avg_pool<0,0,1,1>``), ``fc_no_bias<128>`` and
``loss_metric``. Convolutions and pools take dlib's default padding (``layers.h``): half
the kernel at stride 1, else 0 (:func:`dlib_padding`).

dlib's own ``deserialize`` refuses a file whose filter count, kernel, stride or padding
differ from these template arguments, or whose input size is not 150; so does facecast
(:func:`check_layer`, layer by layer as the file is read, the error naming the layer and
the value). :func:`check_network` also bounds the parameters and the activations a
forward pass computes per image (:data:`MAX_PARAMETERS`, :data:`MAX_ACTIVATIONS`) before
any module is built.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["DlibModelError", "Layer", "RESNET_BLOCKS", "MAX_PARAMETERS", "MAX_ACTIVATIONS",
           "ares_kinds", "anet_layer_kinds", "anet_geometry", "dlib_padding", "check_layer",
           "layer_shapes", "parameter_count", "check_network"]

#: the most parameters a file may hold (dlib's network: 5,614,592 with the affines'
#: gamma and beta; a ~3x margin)
MAX_PARAMETERS = 16_000_000
#: the most values all layers' outputs together may hold per image (dlib's network:
#: 2,581,676 = 9.8 MiB of float32; a ~3x margin). A stem padded by 5000 alone would
#: output 32 x 5072 x 5072 = 8.2e8 values (3.1 GiB).
MAX_ACTIVATIONS = 8_000_000


class DlibModelError(ValueError):
    """The file is not (or not all of) a dlib face-recognition ResNet; names the file."""


@dataclass
class Layer:
    """One layer of the network as read from the file: its kind and its values."""

    kind: str
    values: dict[str, Any] = field(default_factory=dict)


def ares_kinds(down: bool) -> list[str]:
    """Layer kinds of ``ares`` / ``ares_down`` from its input to its output."""
    block = ["tag1", "con", "affine", "relu", "con", "affine"]
    if down:  # add_prev2<avg_pool<2,2,2,2,skip1<tag2<block<N,affine,2,tag1<SUBNET>>>>>>
        return block + ["tag2", "skip1", "avg_pool", "add_prev", "relu"]
    return block + ["add_prev", "relu"]  # relu<add_prev1<block<N,affine,1,tag1<SUBNET>>>>


#: (filters, downsampling) of every residual block, input first: alevel4 .. alevel0
RESNET_BLOCKS: tuple[tuple[int, bool], ...] = (
    *[(32, False)] * 3,
    (64, True), *[(64, False)] * 3,
    (128, True), *[(128, False)] * 2,
    (256, True), *[(256, False)] * 2,
    (256, True),
)
#: the input chip's side, the stem's filters, the descriptor's size
INPUT_SIZE, STEM_FILTERS, DESCRIPTOR = 150, 32, 128


def anet_layer_kinds() -> list[str]:
    """Kinds of ``anet_type``'s layers from the input to the loss (tags and skips included)."""
    kinds = ["input", "con", "affine", "relu", "max_pool"]
    for _, down in RESNET_BLOCKS:
        kinds += ares_kinds(down)
    return kinds + ["avg_pool", "fc", "loss"]


def dlib_padding(kernel: int, stride: int) -> int:
    """dlib's default padding of ``con_`` and the pooling layers: ``kernel / 2`` at stride
    1, else 0."""
    return kernel // 2 if stride == 1 else 0


def _con(filters: int, channels: int, kernel: int, stride: int) -> dict[str, Any]:
    pad = dlib_padding(kernel, stride)
    return {"filters": filters, "channels": channels, "kernel": (kernel, kernel),
            "stride": (stride, stride), "padding": (pad, pad)}


def _pool(size: int, stride: int) -> dict[str, Any]:
    pad = dlib_padding(size, stride)
    return {"size": (size, size), "stride": (stride, stride), "padding": (pad, pad)}


def _block_geometry(b: int, filters: int, down: bool, channels: int
                    ) -> list[tuple[str, dict[str, Any]]]:
    """Names and expected values of one residual block's layers (input first)."""
    head = f"residual block {b} ({'ares_down' if down else 'ares'}<{filters}>)"
    out: list[tuple[str, dict[str, Any]]] = [(f"tag1 of {head}", {})]
    for k, (cin, stride) in enumerate(((channels, 2 if down else 1), (filters, 1)), 1):
        out += [(f"con {k} of {head}", _con(filters, cin, 3, stride)),
                (f"affine {k} of {head}", {"channels": filters})]
        if k == 1:
            out.append((f"relu of {head}", {}))
    if down:
        out += [(f"tag2 of {head}", {}), (f"skip1 of {head}", {}),
                (f"avg_pool of {head}", _pool(2, 2))]
    return out + [(f"add_prev of {head}", {}), (f"relu after {head}", {})]


def anet_geometry() -> list[tuple[str, dict[str, Any]]]:
    """Per layer of :func:`anet_layer_kinds` (same order): a name for messages and the
    values dlib's network has (``filters``, ``channels``, ``kernel``, ``stride``,
    ``padding`` of a convolution; ``channels`` of an affine; ``size``, ``stride``,
    ``padding`` of a pool; ``inputs``, ``outputs`` of the fc; the input ``size``)."""
    out: list[tuple[str, dict[str, Any]]] = [
        ("input_rgb_image_sized", {"size": (INPUT_SIZE, INPUT_SIZE)}),
        ("stem con", _con(STEM_FILTERS, 3, 7, 2)), ("stem affine", {"channels": 32}),
        ("stem relu", {}), ("stem max_pool", _pool(3, 2))]
    channels = STEM_FILTERS
    for b, (filters, down) in enumerate(RESNET_BLOCKS, 1):
        out += _block_geometry(b, filters, down, channels)
        channels = filters
    return out + [("avg_pool_everything", {"size": (0, 0), "stride": (1, 1),
                                           "padding": (0, 0)}),
                  (f"fc_no_bias<{DESCRIPTOR}>", {"inputs": channels, "outputs": DESCRIPTOR}),
                  ("loss_metric", {})]


def _observed(layer: Layer) -> dict[str, Any]:
    """The geometry a layer read from a file has, in :func:`anet_geometry`'s keys."""
    v = layer.values
    if layer.kind == "con":
        f, c, kh, kw = v["weight"].shape
        return {"filters": f, "channels": c, "kernel": (kh, kw),
                "stride": tuple(v["stride"]), "padding": tuple(v["padding"])}
    if layer.kind == "affine":
        return {"channels": len(v["gamma"])}
    if layer.kind == "fc":
        n_in, n_out = v["weight"].shape
        return {"inputs": n_in, "outputs": n_out}
    if layer.kind == "input":
        return {"size": tuple(v["size"])}
    return {k: tuple(v[k]) for k in ("size", "stride", "padding") if k in v}


def check_layer(layer: Layer, index: int, source: str) -> None:
    """Raise :class:`DlibModelError` (naming ``source``, the layer and the value) unless
    ``layer``, the ``index``-th of the network (input = 0), has dlib's geometry."""
    geometry = anet_geometry()
    kinds = anet_layer_kinds()
    if index >= len(kinds) or layer.kind != kinds[index]:
        want = kinds[index] if index < len(kinds) else "nothing"
        raise DlibModelError(f"{source}: layer {index} is {layer.kind}, dlib's "
                             f"face-recognition ResNet has {want} there")
    name, want = geometry[index]
    got = _observed(layer)
    for key, value in want.items():
        if got.get(key) != value:
            raise DlibModelError(
                f"{source}: layer {index} ({name}): {key} {got.get(key)}, where dlib's "
                f"face-recognition ResNet (dnn_face_recognition_ex.cpp) has {value}")
    mean = layer.values.get("mean")
    if mean is not None and not all(math.isfinite(m) for m in mean):
        raise DlibModelError(f"{source}: layer {index} ({name}): input mean {mean} is not "
                             "finite")


def _out(size: int, kernel: int, stride: int, pad: int) -> int:
    """dlib's output size of a convolution or pool: ``1 + (size + 2 pad - kernel) / stride``."""
    return 1 + (size + 2 * pad - kernel) // stride


def layer_shapes(layers: Sequence[Layer]) -> list[tuple[int, int, int]]:
    """The output ``(channels, rows, columns)`` of every layer for one image, by dlib's
    size rules from the layers' own values (tags keep their input, ``skip1`` returns to
    ``tag1``'s, ``add_prev`` zero-pads both sides to the larger shape)."""
    shape = (3, *map(int, layers[0].values["size"]))
    saved: dict[str, tuple[int, int, int]] = {}
    out = [shape]
    for lay in layers[1:]:
        v, (c, h, w) = lay.values, shape
        if lay.kind == "tag1":
            saved = {"tag1": shape}
        elif lay.kind.startswith("tag"):
            saved[lay.kind] = shape
        elif lay.kind.startswith("skip"):
            shape = saved["tag" + lay.kind[4:]]
        elif lay.kind == "con":
            f, _, kh, kw = v["weight"].shape
            (sy, sx), (py, px) = v["stride"], v["padding"]
            shape = (f, _out(h, kh, sy, py), _out(w, kw, sx, px))
        elif lay.kind in ("max_pool", "avg_pool"):
            (ky, kx), (sy, sx), (py, px) = v["size"], v["stride"], v["padding"]
            shape = (c, _out(h, ky or h, sy, py), _out(w, kx or w, sx, px))
        elif lay.kind == "add_prev":
            other = saved.get("tag2", saved.get("tag1", shape))
            shape = tuple(max(a, b) for a, b in zip(shape, other, strict=True))
        elif lay.kind == "fc":
            shape = (int(v["weight"].shape[1]), 1, 1)
        out.append(shape)  # type: ignore[arg-type]
    return out


def parameter_count(layers: Sequence[Layer]) -> int:
    """Values of every weight, bias, gamma and beta in ``layers``."""
    return sum(int(x.size) for lay in layers for x in lay.values.values()
               if isinstance(x, np.ndarray))


def check_network(layers: Sequence[Layer], source: str, *,
                  max_parameters: int = MAX_PARAMETERS,
                  max_activations: int = MAX_ACTIVATIONS) -> None:
    """Before a network is built: every layer has dlib's geometry (:func:`check_layer`),
    no layer's output is empty, at most ``max_parameters`` parameters and, summed over
    every layer's output, at most ``max_activations`` values per image; otherwise a
    :class:`DlibModelError` naming ``source``, the layer and the value."""
    kinds = anet_layer_kinds()
    if len(layers) != len(kinds):
        raise DlibModelError(f"{source}: {len(layers)} layers, dlib's face-recognition "
                             f"ResNet has {len(kinds)}")
    for i, lay in enumerate(layers):
        check_layer(lay, i, source)
    _check_size(layers, source, max_parameters, max_activations)


def _check_size(layers: Sequence[Layer], source: str, max_parameters: int,
                max_activations: int) -> None:
    """The bounds of :func:`check_network` on the layers' own values."""
    n_params = parameter_count(layers)
    if n_params > max_parameters:
        raise DlibModelError(f"{source}: {n_params} parameters, more than the "
                             f"{max_parameters} facecast allows a dlib ResNet file")
    total, names = 0, anet_geometry()
    for i, (c, h, w) in enumerate(layer_shapes(layers)):
        name = names[i][0] if i < len(names) else layers[i].kind
        if min(c, h, w) < 1:
            raise DlibModelError(f"{source}: layer {i} ({name}): output {c}x{h}x{w} is "
                                 "empty")
        total += c * h * w
        if total > max_activations:
            raise DlibModelError(
                f"{source}: layer {i} ({name}): output {c}x{h}x{w}; the layers up to it "
                f"hold {total} values ({4 * total / 2**20:.1f} MiB of float32) per image, "
                f"more than the {max_activations} facecast allows")
