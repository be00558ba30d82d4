"""The DAG side of the identification stage (rule ``identification`` in
workflow/rules/quality.smk): the pool a config searches, the models and datasets, and why
the section writes nothing when it does not.

Models and datasets follow :func:`facecast.fairness.targets.section_models` and
:func:`~facecast.fairness.targets.section_datasets` (``identification.models``, else
``evaluate.models``, else every embed model). Pure functions of the (validated) config;
imported when the Snakefile is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.analysis.targets import is_bin_dataset
from facecast.fairness.targets import (
    section_datasets,
    section_enabled,
    section_models,
)

__all__ = ["IDENTIFICATION_DIR", "datasets", "enabled", "identification_pool", "models",
           "pool_subset", "report_kw", "skip_reason", "targets", "uses_gpu"]

#: where rule ``identification`` writes
IDENTIFICATION_DIR = "results/{ds}/identification/{model}"


def _section(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get("identification") or {})


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the ``identification`` section is switched on (default on)."""
    return section_enabled(config, "identification")


def models(config: Mapping[str, Any]) -> list[str]:
    """``identification.models``, else ``evaluate.models``, else every embed model."""
    return section_models(config, "identification")


def datasets(config: Mapping[str, Any]) -> list[str]:
    """``identification.datasets``, else every dataset."""
    return section_datasets(config, "identification")


def identification_pool(config: Mapping[str, Any]) -> str:
    """``identification.pool``, else the benchmark ``random``, else the first benchmark
    without filters, else the first benchmark ('' when there is none)."""
    pool = str(_section(config).get("pool") or "")
    benches = dict(config.get("benchmarks") or {})
    if pool or not benches:
        return pool
    if "random" in benches:
        return "random"
    plain = [b for b, v in benches.items() if not (v or {}).get("filters")]
    return (plain or list(benches))[0]


def pool_subset(config: Mapping[str, Any], ds: str) -> str:
    """The benchmark subset the searches of ``ds`` draw their gallery and probes from."""
    return f"results/{ds}/benchmarks/{identification_pool(config)}/subset.parquet"


def uses_gpu(config: Mapping[str, Any]) -> bool:
    """Whether identification jobs ask the scheduler for a GPU
    (``identification.device: cuda[:N]``)."""
    return str(_section(config).get("device", "auto")).startswith("cuda")


def skip_reason(config: Mapping[str, Any]) -> str:
    """Why the enabled ``identification`` section writes nothing; '' when it runs. The
    same words go into the run's plan, with the key that turns the section on."""
    if not identification_pool(config):
        return "no benchmark to take the pool from (add a benchmark or set identification.pool)"
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs of the ``identification`` section for dataset ``ds``: each model's
    CMC (none on an ``insightface_bin`` dataset: its identities are placeholders)."""
    if (not enabled(config) or ds not in datasets(config) or skip_reason(config)
            or is_bin_dataset(config, ds)):
        return []
    return [f"results/{ds}/identification/{m}/cmc.csv" for m in models(config)]


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model identification output."""
    return {"caption": "../report/identification.rst", "category": "Identification (1:N)",
            "subcategory": "{ds}", "labels": {"model": "{model}", "file": name}}
