"""Any ONNX face-recognition model through onnxruntime.

The input size and layout (NCHW or NHWC) are read from the model's first input; a crop of
another size is resized to it. Pixels are mapped ``(x - mean) / std`` per channel (0..255
scale; the insightface default is mean 127.5, std 127.5), in ``rgb`` or ``bgr`` order.
The first output, flattened per image, is the embedding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.embed.base import Embedder, missing_weights
from facecast.embed.pixels import PixelSpec


def input_geometry(shape: list[Any]) -> tuple[str, int, int]:
    """(layout, height, width) from an ONNX input shape such as ``[N, 3, 112, 112]``."""
    if len(shape) != 4:
        raise ValueError(f"expected a 4-D image input, got shape {shape}")
    dims = [d if isinstance(d, int) and d > 0 else None for d in shape]
    if dims[1] == 3:
        layout, h, w = "NCHW", dims[2], dims[3]
    elif dims[3] == 3:
        layout, h, w = "NHWC", dims[1], dims[2]
    else:
        raise ValueError(f"cannot tell the channel axis of input shape {shape}")
    if h is None or w is None:
        raise ValueError(f"the model input has dynamic height/width {shape}; export it with "
                         "a fixed image size")
    return layout, int(h), int(w)


class OnnxEmbedder(Embedder):
    """Embeddings from an ONNX model (options: crop, mean, std, channel_order)."""

    backend = "onnx"
    supports_cuda = True

    def __init__(self, name: str, weights: str, crop: str = "arcface",
                 mean: float | list[float] = 127.5, std: float | list[float] = 127.5,
                 channel_order: str = "rgb", device: torch.device | None = None,
                 amp: str = "none", threads: int | None = None) -> None:
        super().__init__(name, device, amp)
        self.pixels = PixelSpec("onnx", crop, mean, std, channel_order)
        import onnxruntime as ort

        path = Path(weights)
        if not path.is_file():
            raise missing_weights(path, name, "Put the ONNX model file there or set "
                                  "embed.models.<name>.weights to it.")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        providers = ["CPUExecutionProvider"]
        if self.device.type == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self.session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.layout, self.height, self.width = input_geometry(list(inp.shape))
        if self.height != self.width:
            raise ValueError(f"{path}: non-square input {self.height}x{self.width}")
        self.crop_column = self.pixels.crop_column
        self.weights_path = str(path)
        out_shape = self.session.get_outputs()[0].shape
        tail = [d for d in out_shape[1:] if isinstance(d, int)]
        self.dim = int(np.prod(tail)) if tail and len(tail) == len(out_shape) - 1 else 0
        if not self.dim:  # dynamic output shape: probe once
            probe = np.zeros((1, 3, self.height, self.width) if self.layout == "NCHW"
                             else (1, self.height, self.width, 3), np.float32)
            self.dim = int(self.session.run(None, {self.input_name: probe})[0].reshape(1, -1)
                           .shape[1])

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        x = self.pixels(crops, torch.device("cpu"), self.height)
        if self.layout == "NHWC":
            x = x.permute(0, 2, 3, 1)
        out = self.session.run(None, {self.input_name: np.ascontiguousarray(x.numpy())})[0]
        return np.asarray(out, dtype=np.float32).reshape(len(crops), -1)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "layout": self.layout, "input_size": self.height,
                **self.pixels.provenance(),
                "providers": list(self.session.get_providers())}
