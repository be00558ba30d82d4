"""The DAG side of the slices stage (rule ``slices`` in workflow/rules/slices.smk): which
searches a config asks for, and why the section writes nothing when it does not.

Models, protocols and datasets follow :func:`facecast.fairness.targets.section_models` and
its siblings (``slices.models``, else ``evaluate.models``, else every embed model; the
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
from facecast.slices import predicates

__all__ = ["SLICES_DIR", "datasets", "enabled", "models", "protocols", "report_kw",
           "skip_reason", "slice_columns", "targets"]

#: where rule ``slices`` writes
SLICES_DIR = "results/{ds}/slices/{model}/{protocol}"


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the ``slices`` section is switched on (default on)."""
    return section_enabled(config, "slices")


def models(config: Mapping[str, Any]) -> list[str]:
    """``slices.models``, else ``evaluate.models``, else every embed model."""
    return section_models(config, "slices")


def protocols(config: Mapping[str, Any]) -> list[str]:
    """``slices.protocols``, else the fairness stage's protocols."""
    return section_protocols(config, "slices")


def datasets(config: Mapping[str, Any]) -> list[str]:
    """``slices.datasets``, else every dataset."""
    return section_datasets(config, "slices")


def slice_columns(config: Mapping[str, Any], ds: str) -> list[str] | None:
    """Attribute columns the search reads on ``ds`` (None when the attribute table's
    columns are not known before the run, or a pattern matches nothing)."""
    known = known_columns(config).get(ds)
    if known is None:
        return None
    try:
        return predicates.slice_columns(sorted(known), dict(config.get("slices") or {}))
    except KeyError:  # reported by the slices checks
        return None


def skip_reason(config: Mapping[str, Any], ds: str | None = None) -> str:
    """Why the enabled ``slices`` section writes nothing (on ``ds``, or on any dataset);
    '' when it runs."""
    if not protocols(config):
        return no_protocol_reason("slices")
    names = [ds] if ds else datasets(config)
    found = [slice_columns(config, d) for d in names]
    if found and all(f is not None and not f for f in found):
        return ("no attribute column to slice on (slices.columns / slices.exclude leave "
                "none)")
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs of the ``slices`` section for dataset ``ds``: each (model,
    protocol)'s discovered benchmarks."""
    if not enabled(config) or ds not in datasets(config) or skip_reason(config, ds):
        return []
    return [f"results/{ds}/slices/{m}/{p}/discovered.yaml"
            for m in models(config) for p in protocols(config)
            if protocol_applies(config, ds, p)]


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model slices output."""
    return {"caption": "../report/slices.rst", "category": "Slices",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}
