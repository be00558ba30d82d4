"""Any TorchScript face-recognition model: a file written by ``torch.jit.save``.

Many deployment repositories ship their models in this form (``model.pt`` /
``model.torchscript``): a zip archive holding the model's compiled TorchScript code and its
tensors. It is loaded with ``torch.jit.load(path, map_location=device)``, which does **not**
unpickle arbitrary Python objects: the archive's pickles are read by TorchScript's own
restricted unpickler (tensors and TorchScript classes only, no Python imports), and the code
it holds is TorchScript, not Python. Loading still means running the model's code, so use
model files you trust. A file that is not a TorchScript archive (a ``torch.save`` state
dict or pickled module, a plain pickle, anything else) is refused before ``torch.jit.load``
sees it, with an error naming the file; it is never unpickled.

The model gets an NCHW float32 batch ``(N, 3, input_size, input_size)``, preprocessed as
the ``onnx`` backend does (:mod:`facecast.embed.pixels`: ``crop``, ``mean``, ``std``,
``channel_order``). ``input_size`` defaults to the crop's own size (112 for ``arcface``,
160 for ``facenet``), since a TorchScript file does not record it. The model's output (its
first element when it returns a tuple or list, as MagFace/AdaFace-style models return
``(features, norm)``), flattened per image, is the embedding. It runs in eval mode under
``torch.inference_mode``, with ``embed.amp`` autocast on CUDA.
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.embed.base import CROP_SIZES, Embedder, autocast, missing_weights
from facecast.embed.pixels import PixelSpec


def archive_kind(path: str | Path) -> str:
    """What a model file is, read from its zip directory only (nothing is unpickled):
    ``"torchscript"``, or a phrase saying what else it is."""
    if not zipfile.is_zipfile(path):
        return "not a zip archive (a legacy torch.save / pickle file or another format)"
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    tails = {n.split("/", 1)[1] for n in names if "/" in n}
    if "constants.pkl" in tails and any(t.startswith("code/") for t in tails):
        return "torchscript"
    if "data.pkl" in tails:
        return ("a torch.save checkpoint (a state dict or a pickled module), not a "
                "TorchScript archive")
    return "a zip archive without TorchScript code"


def load_torchscript(path: str | Path, model_name: str = "torchscript",
                     device: torch.device | str = "cpu") -> torch.jit.ScriptModule:
    """``torch.jit.load`` a TorchScript archive onto ``device`` in eval mode.

    A missing file raises :class:`~facecast.embed.base.MissingWeightsError`; a file that is
    not a TorchScript archive raises ``ValueError`` naming it (and is never unpickled).
    """
    p = Path(path)
    if not p.is_file():
        raise missing_weights(p, model_name, "Put the TorchScript model file (written by "
                              "torch.jit.save) there or set embed.models.<name>.weights.")
    kind = archive_kind(p)
    if kind != "torchscript":
        raise ValueError(
            f"embedding model '{model_name}': {p} is {kind}. Backend torchscript loads "
            "only files written by torch.jit.save(torch.jit.script(model) or "
            "torch.jit.trace(model, example), path); an insightface backbone.pth state "
            "dict is backend arcface_torch.")
    with warnings.catch_warnings():  # torch >= 2.9 deprecates TorchScript, not its files
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.load.*deprecated",
                                category=FutureWarning)
        try:
            model = torch.jit.load(str(p), map_location=device)
        except RuntimeError as err:
            raise ValueError(f"embedding model '{model_name}': torch.jit.load could not "
                             f"read the TorchScript archive {p}: {err}") from err
    return model.eval()


def first_tensor(out: Any, where: str) -> torch.Tensor:
    """The model output, or its first element when it is a tuple or list."""
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{where}: the model returned {type(out).__name__}, expected a "
                         "tensor (or a tuple/list whose first element is one)")
    return out


class TorchScriptEmbedder(Embedder):
    """Embeddings from a ``torch.jit.save`` file (options: crop, mean, std, channel_order,
    input_size)."""

    backend = "torchscript"
    supports_cuda = True

    def __init__(self, name: str, weights: str, crop: str = "arcface",
                 mean: float | list[float] = 127.5, std: float | list[float] = 127.5,
                 channel_order: str = "rgb", input_size: int | None = None,
                 device: torch.device | None = None, amp: str = "none") -> None:
        super().__init__(name, device, amp)
        self.pixels = PixelSpec("torchscript", crop, mean, std, channel_order)
        self.crop_column = self.pixels.crop_column
        self.input_size = int(input_size or CROP_SIZES[self.crop_column])
        if self.input_size < 1:
            raise ValueError(f"torchscript input_size must be positive, got {input_size!r}")
        self.model = load_torchscript(weights, name, self.device)
        self.weights_path = str(weights)
        probe = torch.zeros(1, 3, self.input_size, self.input_size, device=self.device)
        try:
            with torch.inference_mode():
                out = first_tensor(self.model(probe), str(weights))
        except (RuntimeError, ValueError) as err:
            raise ValueError(
                f"embedding model '{name}': {weights} does not run on a (1, 3, "
                f"{self.input_size}, {self.input_size}) input: {err}\n  Set "
                f"embed.models.{name}.input_size (or crop) to the size it was exported "
                "for.") from err
        if out.ndim < 1 or out.shape[0] != 1:
            raise ValueError(f"embedding model '{name}': {weights} returned shape "
                             f"{tuple(out.shape)} for one image; expected (1, D)")
        self.dim = int(out[0].numel())

    @torch.inference_mode()
    def embed_tensor(self, crops: torch.Tensor) -> torch.Tensor:
        """Raw float32 features ``(N, D)`` on the device."""
        x = self.pixels(crops, self.device, self.input_size)
        with autocast(self.device, self.amp):
            out = first_tensor(self.model(x), self.weights_path or self.name)
        return out.float().reshape(len(crops), -1)

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        feats = self.embed_tensor(crops)
        if feats.shape[1] != self.dim:
            raise ValueError(f"model {self.name}: {feats.shape[1]}-D output, {self.dim}-D "
                             "when probed")
        return feats.cpu().numpy().astype(np.float32, copy=False)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "input_size": self.input_size,
                **self.pixels.provenance()}
