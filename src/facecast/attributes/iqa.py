"""Optional no-reference image quality metrics through pyiqa (``facecast[iqa]``).

pyiqa is licensed PolyForm Noncommercial 1.0.0, so it is an opt-in extra; the native
measures stay the default. ``piqe`` and ``entropy`` need no files. The others read
weights from pyiqa's cache, ``$TORCH_HOME/hub/pyiqa/<file>`` (pyiqa downloads them there
when online), and some need a backbone as well (``REQUIRED_FILES``). Everything is
checked before a shard starts: a missing file is one clear error naming every missing
path, and downloads are blocked (hub set offline, pyiqa's downloader replaced by an
error) so nothing hangs on network retries.

Note: pyiqa's own loaders call ``torch.load(weights_only=False)`` on files in its cache;
facecast never passes user-supplied paths to them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from facecast.attributes.age_gender import ModelFilesMissing
from facecast.attributes.heads import torch_home

# Files each metric needs, relative to $TORCH_HOME ("hub/pyiqa/...", "hub/checkpoints/...")
# or to the Hugging Face cache ("hf:<repo>", timm backbones). Read from pyiqa 0.1.16's
# archs/*_arch.py and default_model_configs.py.
REQUIRED_FILES: dict[str, list[str]] = {
    "piqe": [],
    "entropy": [],
    "brisque": ["hub/pyiqa/brisque_svm_weights.pth"],
    "brisque_matlab": ["hub/pyiqa/brisque_matlab.mat"],
    "niqe": ["hub/pyiqa/niqe_modelparameters.mat"],
    "niqe_matlab": ["hub/pyiqa/niqe_matlab_params.mat"],
    "ilniqe": ["hub/pyiqa/ILNIQE_templateModel.mat"],
    "nima": ["hub/pyiqa/NIMA_InceptionV2_ava-b0c77c00.pth",
             "hf:timm/inception_resnet_v2.tf_in1k"],
    "nima-koniq": ["hub/pyiqa/NIMA_koniq-250367ae.pth", "hf:timm/inception_resnet_v2.tf_in1k"],
    "nima-spaq": ["hub/pyiqa/NIMA-spaq-46a7fcb7.pth", "hf:timm/inception_resnet_v2.tf_in1k"],
    "nima-vgg16-ava": ["hub/pyiqa/NIMA_VGG16_ava-dc4e8265.pth", "hf:timm/vgg16.tv_in1k"],
    "paq2piq": ["hub/pyiqa/P2P_RoIPoolModel-fit.10.bs.120-ca69882e.pth",
                "hub/checkpoints/resnet18-f37072fd.pth"],
    "musiq": ["hub/pyiqa/musiq_koniq_ckpt-e95806b9.pth"],
    "musiq-koniq": ["hub/pyiqa/musiq_koniq_ckpt-e95806b9.pth"],
    "musiq-ava": ["hub/pyiqa/musiq_ava_ckpt-e8d3f067.pth"],
    "musiq-spaq": ["hub/pyiqa/musiq_spaq_ckpt-358bb6af.pth"],
    "musiq-paq2piq": ["hub/pyiqa/musiq_paq2piq_ckpt-364c0c84.pth"],
}
# Python packages a metric needs beyond pyiqa's import set.
EXTRA_PACKAGES = {"nima": ["timm"], "nima-koniq": ["timm"], "nima-spaq": ["timm"],
                  "nima-vgg16-ava": ["timm"]}

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def column_name(metric: str) -> str:
    """Attribute column of a pyiqa metric: ``iqa_<metric>`` with '-' -> '_'."""
    return "iqa_" + metric.replace("-", "_")


def _hf_cached(repo: str) -> bool:
    from huggingface_hub.constants import HF_HUB_CACHE

    folder = Path(HF_HUB_CACHE) / ("models--" + repo.replace("/", "--")) / "snapshots"
    return folder.is_dir() and any(folder.iterdir())


def missing_files(metrics: list[str]) -> list[str]:
    """Paths (with the metric that needs each) missing for ``metrics``."""
    import importlib.util

    home = torch_home()
    out = []
    for m in metrics:
        for pkg in EXTRA_PACKAGES.get(m, []):
            if importlib.util.find_spec(pkg) is None:
                out.append(f"{m}: python package '{pkg}' (pip install {pkg})")
        for rel in REQUIRED_FILES.get(m, []):
            if rel.startswith("hf:"):
                if not _hf_cached(rel[3:]):
                    out.append(f"{m}: Hugging Face model {rel[3:]} in the HF cache "
                               "(HF_HOME/hub)")
            elif not (home / rel).is_file():
                out.append(f"{m}: {home / rel}")
    return out


@contextlib.contextmanager
def no_downloads() -> Iterator[None]:
    """Within the block, any pyiqa/torch.hub download raises at once instead of retrying."""
    import pyiqa.utils.download_util as dl

    def refuse(url, dst, *args, **kwargs):
        raise ModelFilesMissing(f"pyiqa needs {dst} (from {url}); facecast does not "
                                "download: put the file there and rerun")

    saved = (dl.download_url_to_file, torch.hub.download_url_to_file)
    dl.download_url_to_file = refuse
    torch.hub.download_url_to_file = refuse
    try:
        yield
    finally:
        dl.download_url_to_file, torch.hub.download_url_to_file = saved


def check_metrics(metrics: list[str]) -> None:
    """Raise one clear error if a metric is unknown to pyiqa or any file it needs is missing."""
    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)
    try:
        import pyiqa
    except ImportError as exc:
        raise ImportError(
            "attributes.pyiqa.metrics needs the optional 'iqa' extra: pip install --no-deps "
            "pyiqa==0.1.16 opencv-python-headless huggingface_hub (pyiqa is PolyForm "
            f"Noncommercial 1.0.0): {exc}") from exc
    known = set(pyiqa.list_models(metric_mode="NR"))
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise ValueError(f"unknown no-reference pyiqa metrics {unknown}; "
                         "see pyiqa.list_models(metric_mode='NR')")
    missing = missing_files(metrics)
    if missing:
        raise ModelFilesMissing(
            "pyiqa weights missing (offline; pyiqa's cache is $TORCH_HOME/hub/pyiqa, "
            "torchvision backbones $TORCH_HOME/hub/checkpoints):\n  " + "\n  ".join(missing))


class IQAScorer:
    """The configured pyiqa metrics, created once, run batched on RGB crops."""

    def __init__(self, metrics: list[str], device: str = "cpu") -> None:
        check_metrics(metrics)
        import pyiqa

        self.metrics = list(metrics)
        self.device = device
        with no_downloads():
            self.models = {m: pyiqa.create_metric(m, device=torch.device(device), as_loss=False)
                           for m in self.metrics}

    def provenance(self) -> dict[str, object]:
        import pyiqa

        return {"pyiqa_version": pyiqa.__version__, "pyiqa_metrics": self.metrics,
                "pyiqa_lower_better": {m: bool(f.lower_better) for m, f in self.models.items()}}

    @torch.inference_mode()
    def predict(self, crops: np.ndarray, batch_size: int = 32) -> dict[str, np.ndarray]:
        """``iqa_<metric>`` (N,) per metric for (N, H, W, 3) uint8 crops."""
        out = {}
        x = torch.from_numpy(np.array(crops, copy=True)).permute(0, 3, 1, 2).float() / 255.0
        for m, f in self.models.items():
            vals = [f(x[i:i + batch_size].to(self.device)).reshape(-1).double().cpu()
                    for i in range(0, len(x), batch_size)]
            out[column_name(m)] = torch.cat(vals).numpy() if vals else np.zeros(0)
        return out
