"""The DAG side of the faces stage (workflow/rules/faces.smk): one job per manifest shard.

Pure functions of the (validated) config; imported when the Snakefile is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.datasets.targets import image_root
from facecast.io.shard_index import FACES_INDEX

__all__ = ["FACES_SHARD", "default_targets", "image_root", "uses_gpu"]

#: one faces shard per manifest shard
FACES_SHARD = "results/{ds}/faces/{shard}.parquet"


def uses_gpu(config: Mapping[str, Any]) -> bool:
    """Whether faces jobs ask the scheduler for a GPU (``faces.device: cuda[:N]``)."""
    return str((config.get("faces") or {}).get("device", "auto")).startswith("cuda")


def default_targets(ds: str) -> list[str]:
    """What `rule all` builds of the faces stage: the index standing for every shard."""
    return [FACES_INDEX.format(ds=ds)]
