"""dlib's face-recognition ResNet (``dlib_face_recognition_resnet_model_v1.dat``) in torch.

Reads the file dlib's ``serialize(net, out)`` writes for the network of dlib's
``examples/dnn_face_recognition_ex.cpp`` (``anet_type``: ``loss_metric`` over
``fc_no_bias<128>``, ``avg_pool_everything``, residual levels ``alevel0..4`` and a 7x7
stride-2 stem on ``input_rgb_image_sized<150>``) with plain byte parsing and numpy, and
builds the same forward pass as a torch module (:class:`DlibResNet`).

The file format (dlib/serialize.h, float_details.h, dnn/core.h, layers.h, input.h,
tensor.h, loss.h):

* integers: one control byte (low 4 bits: byte count, 0x80: negative), then that many
  little-endian bytes; ``bool``: the character ``'1'`` or ``'0'``; strings: length, bytes;
* ``float``/``double``: dlib's portable form, an integer mantissa then an integer exponent
  (value = mantissa * 2**exponent; exponents 32000/32001/32002 mean inf/-inf/nan);
* tensors: version 2 = n, k, nr, nc then little-endian float32 (version 1: portable floats);
  ``alias_tensor``: version 1 and its four dimensions;
* a network nests: the loss layer (version, its details, then the network); each layer
  writes its version and its sub-network *before* its own details, so the file holds every
  wrapper's version from the output down to the input, then the input layer, then the
  layers' details from the input up. ``tag``/``skip`` layers write only a version.

Forward semantics mirrored from dlib's CPU code: ``con_`` is a cross-correlation with
dlib's default padding (``nr/2`` at stride 1, else 0), output size
``1 + (size + 2*pad - kernel) // stride`` (also for pooling); ``affine_`` (batch norm folded
at training's end) is ``gamma[c] * x + beta[c]``; ``add_prev_`` of tensors of different
shapes zero-pads both to the larger size in every dimension (``tt::add``); the input is
``(pixel - mean) / 256`` per RGB channel; ``loss_metric_`` outputs the ``fc`` output as is
(no normalisation). Each ``affine_`` here directly follows a ``con_``, so
:func:`build_resnet` folds it into the convolution's weights and bias.

Every layer's geometry (filters, channels, kernel, stride, padding, pool sizes, the input
size, the fc's shape) is checked against dlib's network as soon as the layer is read, and
the parameters and per-image activations are bounded before anything is built
(:mod:`facecast.embed.dlib_arch`): a file dlib's own ``deserialize`` would refuse is
refused with the layer and the value named.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from facecast.embed.dlib_arch import (
    RESNET_BLOCKS,
    DlibModelError,
    Layer,
    anet_layer_kinds,
    ares_kinds,
    check_layer,
    check_network,
)

__all__ = ["DlibModelError", "Layer", "DlibResNet", "DlibResBlock", "RESNET_BLOCKS",
           "anet_layer_kinds", "read_dlib_resnet", "build_resnet", "load_dlib_resnet"]

#: float_details exponents that stand for inf, -inf and nan
_FLOAT_SPECIAL = {32000: float("inf"), 32001: float("-inf"), 32002: float("nan")}


# ---------------------------------------------------------------------------------------
# dlib's serialisation


class _Reader:
    """Sequential reader of dlib's serialisation primitives over one file's bytes."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.pos = 0
        self.path = path
        self.where = ""  # the layer being read, for messages

    def fail(self, what: str) -> DlibModelError:
        at = f", {self.where}" if self.where else ""
        return DlibModelError(f"{self.path}: not a dlib face-recognition ResNet file "
                              f"(byte {self.pos} of {len(self.data)}{at}): {what}")

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.fail(f"file ends inside {what} (truncated?)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self, what: str = "an integer") -> int:
        ctrl = self.take(1, what)[0]
        size = ctrl & 0x0F
        if size > 8 or ctrl & 0x70:
            raise self.fail(f"bad integer control byte 0x{ctrl:02x} in {what}")
        value = int.from_bytes(self.take(size, what), "little")
        return -value if ctrl & 0x80 else value

    def boolean(self, what: str = "a bool") -> bool:
        ch = self.take(1, what)
        if ch not in (b"0", b"1"):
            raise self.fail(f"bad bool {ch!r} in {what}")
        return ch == b"1"

    def string(self, what: str = "a string") -> str:
        n = self.int(what)
        if n < 0 or n > 1 << 16:
            raise self.fail(f"bad string length {n} in {what}")
        return self.take(n, what).decode("latin-1")

    def float(self, what: str = "a float") -> float:
        mantissa = self.int(what)
        exponent = self.int(what)
        if exponent in _FLOAT_SPECIAL:
            return _FLOAT_SPECIAL[exponent]
        return float(np.ldexp(float(mantissa), exponent))

    def version(self, allowed: tuple[int, ...], what: str) -> int:
        v = self.int(what)
        if v not in allowed:
            raise self.fail(f"unexpected version {v} of {what} (expected {allowed})")
        return v

    def tag(self, expected: str | tuple[str, ...], what: str) -> str:
        expected = (expected,) if isinstance(expected, str) else expected
        got = self.string(what)
        if got not in expected:
            raise self.fail(f"expected {' or '.join(expected)} for {what}, found {got!r}")
        return got

    def tensor(self, what: str = "a tensor") -> np.ndarray:
        v = self.version((1, 2), what)
        shape = tuple(self.int(what) for _ in range(4))
        if any(s < 0 for s in shape):
            raise self.fail(f"negative tensor shape {shape} in {what}")
        size = math.prod(shape)
        if size > len(self.data) - self.pos:  # every value takes at least one byte
            raise self.fail(f"tensor of shape {shape} is larger than the rest of the file "
                            f"in {what} (truncated?)")
        if v == 2:
            raw = self.take(4 * size, what)
            return np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(shape)
        return np.array([self.float(what) for _ in range(size)], np.float32).reshape(shape)

    def alias(self, what: str) -> tuple[int, int, int, int]:
        self.version((1,), what)
        return tuple(self.int(what) for _ in range(4))  # type: ignore[return-value]


def _split_params(r: _Reader, params: np.ndarray, shapes: list[tuple[int, ...]],
                  what: str) -> list[np.ndarray]:
    """Cut a layer's flat ``params`` tensor into consecutive pieces of ``shapes``."""
    flat = params.reshape(-1)
    sizes = [math.prod(s) for s in shapes]
    if sum(sizes) != flat.size:
        raise r.fail(f"{what}: {flat.size} parameters, expected {sum(sizes)} for {shapes}")
    out, start = [], 0
    for shape, n in zip(shapes, sizes, strict=True):
        out.append(flat[start:start + n].reshape(shape))
        start += n
    return out


def _read_con(r: _Reader) -> Layer:
    r.tag("con_4", "a con_ layer")
    params = r.tensor("con_ parameters")
    n_filters, nr, nc = r.int(), r.int(), r.int()
    stride = (r.int(), r.int())
    padding = (r.int(), r.int())
    filt, bias = r.alias("con_ filters"), r.alias("con_ biases")
    for _ in range(4):
        r.float("con_ learning-rate multipliers")
    if filt[0] != n_filters or filt[2:] != (nr, nc) or bias[1] != n_filters:
        raise r.fail(f"con_ filters {filt} disagree with {n_filters} filters {nr}x{nc}")
    w, b = _split_params(r, params, [filt, (n_filters,)], "con_")
    return Layer("con", {"weight": w, "bias": b, "stride": stride, "padding": padding})


def _read_affine(r: _Reader) -> Layer:
    r.tag("affine_", "an affine_ layer")
    params = r.tensor("affine_ parameters")
    gamma, beta = r.alias("affine_ gamma"), r.alias("affine_ beta")
    mode = r.int("affine_ mode")
    if mode != 0 or gamma != beta or gamma[2:] != (1, 1):
        raise r.fail(f"affine_ is not per-channel (mode {mode}, gamma {gamma})")
    g, b = _split_params(r, params, [(gamma[1],), (gamma[1],)], "affine_")
    return Layer("affine", {"gamma": g, "beta": b})


def _read_pool(r: _Reader, kind: str) -> Layer:
    r.tag(f"{kind}_2", f"a {kind}_ layer")
    size = (r.int(), r.int())
    stride = (r.int(), r.int())
    padding = (r.int(), r.int())
    return Layer(kind, {"size": size, "stride": stride, "padding": padding})


def _read_fc(r: _Reader) -> Layer:
    r.tag("fc_2", "an fc_ layer")
    n_out, n_in = r.int(), r.int()
    params = r.tensor("fc_ parameters")
    weights = r.alias("fc_ weights")
    r.alias("fc_ biases")
    has_bias = r.int("fc_ bias mode") == 0
    for _ in range(4):
        r.float("fc_ learning-rate multipliers")
    if weights[:2] != (n_in, n_out):
        raise r.fail(f"fc_ weights {weights} disagree with {n_in} inputs, {n_out} outputs")
    shapes = [(n_in, n_out)] + ([(n_out,)] if has_bias else [])
    parts = _split_params(r, params, shapes, "fc_")
    return Layer("fc", {"weight": parts[0], "bias": parts[1] if has_bias else None})


def _read_details(r: _Reader, kind: str) -> Layer:
    if kind == "con":
        return _read_con(r)
    if kind == "affine":
        return _read_affine(r)
    if kind in ("max_pool", "avg_pool"):
        return _read_pool(r, kind)
    if kind == "fc":
        return _read_fc(r)
    r.tag(f"{kind}_", f"a {kind}_ layer")  # relu_, add_prev_: no values
    return Layer(kind)


def _read_input(r: _Reader) -> Layer:
    r.tag("input_rgb_image_sized", "the input layer")
    mean = [r.float("input mean") for _ in range(3)]
    size = (r.int("input rows"), r.int("input columns"))
    return Layer("input", {"mean": mean, "size": size})


def _read_loss(r: _Reader) -> Layer:
    r.version((1,), "the loss layer")
    r.tag("loss_metric_2", "the loss layer")
    return Layer("loss", {"margin": r.float(), "distance_threshold": r.float()})


def _read_layer_tail(r: _Reader, version: int, first: bool) -> None:
    """What ``add_layer`` writes after its details: 3 bools, 3 tensors (+ a count)."""
    for _ in range(3):
        r.boolean("a layer's state flags")
    for _ in range(2 if version == 1 else 3):
        r.tensor("a layer's cached tensors")
    if first and version >= 3:
        r.int("the sample expansion factor")


def read_dlib_resnet(path: str | os.PathLike) -> list[Layer]:
    """The layers of a ``dlib_face_recognition_resnet_model_v1.dat`` file, input first.

    Tags and skips are kept (kind ``tag1``, ``skip1``, ...) so the list is the network as
    written. Raises :class:`DlibModelError` naming the file if it is truncated, corrupt or
    holds another network.
    """
    path = Path(path)
    r = _Reader(path.read_bytes(), os.fspath(path))
    kinds = anet_layer_kinds()
    loss = _read_loss(r)
    body = kinds[1:-1]  # from the first con to the fc
    versions: dict[int, int] = {}
    for i in range(len(body) - 1, -1, -1):  # wrappers, outermost first
        kind = body[i]
        if kind.startswith(("tag", "skip")):
            r.version((1,), f"a {kind[:-1]} layer")
        else:
            versions[i] = r.version((2, 3) if i == 0 else (1, 2), f"the {kind} layer {i}")
    r.where = "layer 0 (input)"
    layers = [_read_input(r)]
    check_layer(layers[0], 0, r.path)
    for i, kind in enumerate(body):
        if kind.startswith(("tag", "skip")):
            layers.append(Layer(kind))
            continue
        r.where = f"layer {i + 1} ({kind})"
        layers.append(_read_details(r, kind))
        check_layer(layers[-1], i + 1, r.path)  # dlib's geometry, before reading on
        _read_layer_tail(r, versions[i], first=i == 0)
    r.where = ""
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} bytes left after the network")
    layers.append(loss)
    check_network(layers, r.path)
    return layers


# ---------------------------------------------------------------------------------------
# the torch module


def _padded_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dlib's ``tt::add(out, a, b)``: a sum over the larger shape, each input zero-padded
    at the end of every dimension (channels, rows, columns) where it is smaller."""
    if a.shape == b.shape:
        return a + b
    c, h, w = (max(a.shape[i], b.shape[i]) for i in (1, 2, 3))
    a = F.pad(a, (0, w - a.shape[3], 0, h - a.shape[2], 0, c - a.shape[1]))
    b = F.pad(b, (0, w - b.shape[3], 0, h - b.shape[2], 0, c - b.shape[1]))
    return a + b


class DlibResBlock(nn.Module):
    """``ares`` (identity shortcut) or ``ares_down`` (2x2 average-pooled, zero-padded
    shortcut): ``relu(shortcut + affine(con(relu(affine(con(x))))))``, affines folded."""

    def __init__(self, conv1: nn.Conv2d, conv2: nn.Conv2d, down: bool) -> None:
        super().__init__()
        self.conv1 = conv1
        self.conv2 = conv2
        self.down = down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(F.relu(self.conv1(x)))
        if self.down:
            return F.relu(_padded_add(F.avg_pool2d(x, 2, 2), y))
        return F.relu(x + y)


class DlibResNet(nn.Module):
    """dlib's face-recognition ResNet: float RGB chips ``(N, 3, 150, 150)`` on the 0..255
    scale in, the raw 128-D descriptors ``(N, 128)`` out (what ``compute_face_descriptor``
    returns for 150x150 chips without jitter)."""

    def __init__(self, mean: list[float], stem: nn.Conv2d, pool: tuple[int, int],
                 blocks: list[DlibResBlock], fc: nn.Linear, input_size: int = 150) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1))
        self.stem = stem
        self.pool_size, self.pool_stride = pool
        self.blocks = nn.Sequential(*blocks)
        self.fc = fc
        self.input_size = input_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - self.mean) / 256.0
        x = F.relu(self.stem(x))
        x = F.max_pool2d(x, self.pool_size, self.pool_stride)
        x = self.blocks(x)
        return self.fc(x.mean(dim=(2, 3)))


def _conv(con: Layer, affine: Layer) -> nn.Conv2d:
    """``con_`` followed by ``affine_`` as one convolution (affine folded, in float64)."""
    w = con.values["weight"].astype(np.float64)
    gamma = affine.values["gamma"].astype(np.float64)
    conv = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2:], stride=con.values["stride"],
                     padding=con.values["padding"], bias=True)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(w * gamma[:, None, None, None]))
        conv.bias.copy_(torch.from_numpy(con.values["bias"] * gamma + affine.values["beta"]))
    return conv


def build_resnet(layers: list[Layer], source: str = "dlib ResNet layers") -> DlibResNet:
    """The torch module of the layers :func:`read_dlib_resnet` returns (eval mode), after
    :func:`facecast.embed.dlib_arch.check_network` (dlib's geometry, the size bounds):
    nothing is allocated for a network that is not dlib's."""
    check_network(layers, source)
    inp, stem, stem_affine, _, max_pool = layers[:5]
    pos, blocks = 5, []
    for _, down in RESNET_BLOCKS:
        part = layers[pos:pos + len(ares_kinds(down))]
        pos += len(part)
        cons = [lay for lay in part if lay.kind == "con"]
        affines = [lay for lay in part if lay.kind == "affine"]
        blocks.append(DlibResBlock(_conv(cons[0], affines[0]), _conv(cons[1], affines[1]),
                                   down))
    fc_w = layers[-2].values["weight"]
    fc = nn.Linear(fc_w.shape[0], fc_w.shape[1], bias=layers[-2].values["bias"] is not None)
    with torch.no_grad():
        fc.weight.copy_(torch.from_numpy(np.ascontiguousarray(fc_w.T)))
        if fc.bias is not None:
            fc.bias.copy_(torch.from_numpy(layers[-2].values["bias"]))
    size = max_pool.values["size"][0], max_pool.values["stride"][0]
    return DlibResNet(inp.values["mean"], _conv(stem, stem_affine), size, blocks, fc,
                      int(inp.values["size"][0])).eval()


def load_dlib_resnet(path: str | os.PathLike) -> DlibResNet:
    """:class:`DlibResNet` of a ``dlib_face_recognition_resnet_model_v1.dat`` file."""
    return build_resnet(read_dlib_resnet(path))
