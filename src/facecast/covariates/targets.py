"""The DAG side of the covariates stage: which covariate fits a config asks for
(workflow/rules/covariates.smk); its config checks are :mod:`facecast.covariates.checks`.

Models: ``covariates.models``, else ``evaluate.models``; protocols: ``covariates.protocols``
(required, a dense protocol suits best). Datasets: ``covariates.datasets``, else all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from facecast.config.util import name_list
from facecast.evaluate.targets import protocol_applies
from facecast.fairness.targets import protocols as fairness_protocols

OUT_DIR = "results/{ds}/covariates/{model}/{protocol}"


_names = name_list  # one definition: facecast.config.util.name_list


def section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``covariates`` section ({} when absent)."""
    return dict(config.get("covariates") or {})


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the covariates stage is switched on (default off)."""
    return bool(section(config).get("enabled", False))


def models(config: Mapping[str, Any]) -> list[str]:
    """``covariates.models``, else ``evaluate.models``, else every embed model."""
    return (_names(section(config).get("models"))
            or _names((config.get("evaluate") or {}).get("models"))
            or _names((config.get("embed") or {}).get("models")))


def protocols(config: Mapping[str, Any]) -> list[str]:
    """``covariates.protocols``, else the fairness stage's protocols (``fairness.protocols``,
    the dense, unbanded ones; else every evaluated protocol)."""
    return (_names(section(config).get("protocols"))
            or fairness_protocols(config))


def targets(config: Mapping[str, Any], ds: str, datasets: Sequence[str]) -> list[str]:
    """Default outputs for ``ds``: each (model, protocol) fit.json."""
    if not enabled(config):
        return []
    if not (_names(section(config).get("covariates"))
            or _names(section(config).get("pair_features"))):
        return []  # skipped: the plan says why (facecast.covariates.checks.fill_defaults)
    if ds not in (_names(section(config).get("datasets")) or list(datasets)):
        return []
    return [f"results/{ds}/covariates/{m}/{p}/fit.json"
            for m in models(config) for p in protocols(config)
            if protocol_applies(config, ds, p)]


def report_kw(name: str, caption: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a covariates output."""
    return {"caption": f"../report/{caption}.rst", "category": "Covariates",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}


