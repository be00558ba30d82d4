"""The DAG side of the mitigation stage (rule ``mitigation`` in
workflow/rules/mitigation.smk): which methods, models, protocols and inputs a config asks
for. Pure functions of the config; imported when the Snakefile is parsed.

Models, protocols and datasets follow :func:`facecast.fairness.targets.section_models`
and its siblings (``mitigation.models``, else ``evaluate.models``, else every embed model;
``mitigation.protocols``, else the fairness stage's protocols). The section is off unless
``mitigation.enabled`` is true.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import name_list
from facecast.evaluate.targets import eval_models, protocol_applies
from facecast.fairness.targets import (
    fairness_groups,
    no_protocol_reason,
    section_datasets,
    section_models,
    section_protocols,
)
from facecast.io.shard_index import EMBED_INDEX

__all__ = ["FUSION_METHODS", "GROUP_METHODS", "METHODS", "MITIGATION_DIR",
           "PROBABILITY_METHODS", "calibration", "calibration_source", "dropped_methods",
           "enabled", "fairness_section", "fusion_models", "method_files", "methods",
           "models", "partners", "protocols",
           "report_kw", "rule_inputs", "skip_reason", "targets"]

#: where rule ``mitigation`` writes
MITIGATION_DIR = "results/{ds}/mitigation/{model}/{protocol}"
#: every method, in table order (``raw`` first: every row compares with it)
METHODS = ("raw", "znorm", "tnorm", "ztnorm", "snorm", "asnorm", "fsn", "faircal",
           "oracle_cal", "group_thresholds", "fusion", "fusion_lr")
#: methods whose score is a calibrated probability
PROBABILITY_METHODS = ("faircal", "oracle_cal", "fusion_lr")
#: methods that need the fairness stage's protected groups
GROUP_METHODS = ("oracle_cal", "group_thresholds")
#: methods that need two or more evaluated models
FUSION_METHODS = ("fusion", "fusion_lr")


def _section(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get("mitigation") or {})


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether ``mitigation.enabled`` is true (default off: the stage splits the data and
    needs enough identities on both sides; the demo turns it on)."""
    return bool(_section(config).get("enabled", False))


def models(config: Mapping[str, Any]) -> list[str]:
    """``mitigation.models``, else ``evaluate.models``, else every embed model."""
    return section_models(config, "mitigation")


def protocols(config: Mapping[str, Any]) -> list[str]:
    """``mitigation.protocols``, else the fairness stage's protocols."""
    return section_protocols(config, "mitigation")


def fusion_models(config: Mapping[str, Any]) -> list[str]:
    """The models a fusion combines: every evaluated model, sorted by name."""
    return sorted(eval_models(config))


def dropped_methods(config: Mapping[str, Any]) -> dict[str, str]:
    """Requested methods the config cannot run, each with why."""
    asked = name_list(_section(config).get("methods")) or list(METHODS)
    out = {}
    if not fairness_groups(config).get("protected"):
        out.update({m: "needs the fairness stage's protected groups (fairness.protected)"
                    for m in GROUP_METHODS if m in asked})
    if len(fusion_models(config)) < 2:
        out.update({m: "needs two or more evaluated models (evaluate.models)"
                    for m in FUSION_METHODS if m in asked})
    return out


def methods(config: Mapping[str, Any]) -> list[str]:
    """The methods of every table: ``mitigation.methods`` (all by default) that the
    config can run, in :data:`METHODS` order, ``raw`` always first."""
    asked = set(name_list(_section(config).get("methods")) or METHODS) | {"raw"}
    drop = dropped_methods(config)
    return [m for m in METHODS if m in asked and m not in drop]


def fairness_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fairness section the table takes its groups from ({} when fairness is off)."""
    return fairness_groups(config)


def calibration(config: Mapping[str, Any]) -> dict[str, Any]:
    """``mitigation.calibration`` with its defaults (fraction 0.5, no source)."""
    return {"fraction": 0.5, "benchmark": "", "dataset": "",
            **dict(_section(config).get("calibration") or {})}


def calibration_source(config: Mapping[str, Any], ds: str, protocol: str
                       ) -> tuple[str, str] | None:
    """``(dataset, benchmark)`` whose scored pairs calibrate ``protocol`` on ``ds``; None
    for the identity fraction split."""
    cal = calibration(config)
    if not cal["benchmark"] and not cal["dataset"]:
        return None
    return str(cal["dataset"] or ds), str(cal["benchmark"] or protocol)


def _scores(ds: str, model: str, protocol: str) -> str:
    return f"results/{ds}/eval/{model}/{protocol}.parquet"


def partners(config: Mapping[str, Any], model: str) -> list[str]:
    """The other models a fusion of ``model`` reads (none without a fusion method)."""
    if not any(m in FUSION_METHODS for m in methods(config)):
        return []
    return [m for m in fusion_models(config) if m != model]


def rule_inputs(config: Mapping[str, Any], ds: str, model: str, protocol: str
                ) -> dict[str, Any]:
    """Inputs of rule ``mitigation``: the scores, the embed index, the attribute table
    (with groups), the fusion partners' scores (``partners``, in :func:`partners` order),
    and the calibration source's (``cal_*``) when one is set."""
    groups = bool(fairness_groups(config).get("protected"))
    fused = partners(config, model)
    out: dict[str, Any] = {"scores": _scores(ds, model, protocol),
                           "embeddings": EMBED_INDEX.format(ds=ds, model=model),
                           "partners": [_scores(ds, m, protocol) for m in fused]}
    if groups:
        out["attributes"] = f"results/{ds}/attributes.parquet"
    src = calibration_source(config, ds, protocol)
    if src:
        cds, bench = src
        out["cal_scores"] = _scores(cds, model, bench)
        out["cal_embeddings"] = EMBED_INDEX.format(ds=cds, model=model)
        out["cal_partners"] = [_scores(cds, m, bench) for m in fused]
        if groups:
            out["cal_attributes"] = f"results/{cds}/attributes.parquet"
    return out


def method_files(config: Mapping[str, Any]) -> list[str]:
    """``<method>/pairs.parquet`` of every method (rule outputs, relative)."""
    return [f"{m}/pairs.parquet" for m in methods(config)]


def skip_reason(config: Mapping[str, Any]) -> str:
    """Why the enabled section writes nothing; '' when it runs."""
    if not protocols(config):
        return no_protocol_reason("mitigation")
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs for ``ds``: each (model, protocol)'s table."""
    if not enabled(config) or skip_reason(config) or \
            ds not in section_datasets(config, "mitigation"):
        return []
    return [f"results/{ds}/mitigation/{m}/{p}/table.md"
            for m in models(config) for p in protocols(config)
            if protocol_applies(config, ds, p)]


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a mitigation output."""
    return {"caption": "../report/mitigation.rst", "category": "Bias mitigation",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}
