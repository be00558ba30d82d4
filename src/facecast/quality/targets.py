"""The DAG side of the quality stage (rule ``quality_edc`` in workflow/rules/quality.smk):
which EDC rankings a config asks for, and why the section writes nothing when it does not.

Models, protocols and datasets follow :func:`facecast.fairness.targets.section_models` and
its siblings (``quality.models``, else ``evaluate.models``, else every embed model; the
fairness stage's protocols). Pure functions of the (validated) config; imported when the
Snakefile is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.columns import known_columns
from facecast.evaluate.targets import protocol_applies
from facecast.fairness.targets import (
    no_protocol_reason,
    section_datasets,
    section_enabled,
    section_models,
    section_protocols,
)
from facecast.quality.columns import select_columns

__all__ = ["QUALITY_DIR", "bias_enabled", "datasets", "enabled", "models", "protocols",
           "quality_columns", "report_kw", "skip_reason", "targets"]

#: where rule ``quality_edc`` writes
QUALITY_DIR = "results/{ds}/quality/{model}/{protocol}"


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the ``quality`` section is switched on (default on)."""
    return section_enabled(config, "quality")


def models(config: Mapping[str, Any]) -> list[str]:
    """``quality.models``, else ``evaluate.models``, else every embed model."""
    return section_models(config, "quality")


def protocols(config: Mapping[str, Any]) -> list[str]:
    """``quality.protocols``, else the fairness stage's protocols."""
    return section_protocols(config, "quality")


def datasets(config: Mapping[str, Any]) -> list[str]:
    """``quality.datasets``, else every dataset."""
    return section_datasets(config, "quality")


def quality_columns(config: Mapping[str, Any], ds: str) -> dict[str, str] | None:
    """Quality columns EDC ranks on ``ds`` (column -> direction; None when the attribute
    table's columns are not known before the run)."""
    known = known_columns(config).get(ds)
    if known is None:
        return None
    try:
        return select_columns(sorted(known), dict(config.get("quality") or {}))
    except KeyError:  # a pattern matching nothing: reported by the quality checks
        return None


def skip_reason(config: Mapping[str, Any], ds: str | None = None) -> str:
    """Why the enabled ``quality`` section writes nothing (on ``ds``, or on any dataset);
    '' when it runs. The same words go into the run's plan, with the key that turns the
    section on."""
    if not protocols(config):
        return no_protocol_reason("quality")
    names = [ds] if ds else datasets(config)
    found = [quality_columns(config, d) for d in names]
    if found and all(f is not None and not f for f in found):
        return ("no quality column in the attribute table (add native or pyiqa to "
                "attributes.scorers, or name columns in quality.columns)")
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs of the ``quality`` section for dataset ``ds``: each (model,
    protocol)'s EDC ranking."""
    if not enabled(config) or ds not in datasets(config) or skip_reason(config, ds):
        return []
    names = ["ranking.csv", *(["bias.csv"] if bias_enabled(config) else [])]
    return [f"results/{ds}/quality/{m}/{p}/{name}"
            for m in models(config) for p in protocols(config)
            if protocol_applies(config, ds, p) for name in names]


def bias_enabled(config: Mapping[str, Any]) -> bool:
    """Whether ``quality.bias`` (quality per protected group, rule quality_bias) runs:
    on by default, and only with protected groups to compare."""
    q = config.get("quality") or {}
    fair = config.get("fairness") or {}
    return bool((q.get("bias") or {}).get("enabled", True)) and bool(fair.get("protected"))


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model EDC output."""
    return {"caption": "../report/quality_edc.rst", "category": "Quality (EDC)",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}
