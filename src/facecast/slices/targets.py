"""The DAG side of the slices stage (rule ``slices`` in workflow/rules/slices.smk): which
searches a config asks for, and why the section writes nothing when it does not.

Models, protocols and datasets follow :func:`facecast.fairness.targets.section_models` and
its siblings (``slices.models``, else ``evaluate.models``, else every embed model; the
fairness stage's protocols). Pure functions of the (validated) config; imported when the
Snakefile is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from facecast.config.columns import known_columns
from facecast.evaluate.targets import job_config, model_applies, protocol_applies
from facecast.fairness.targets import (
    no_protocol_reason,
    section_datasets,
    section_enabled,
    section_models,
    section_protocols,
)
from facecast.slices import predicates

__all__ = ["MITIGATED", "MITIGATED_SCORES", "SLICES_DIR", "accuracy_config", "datasets",
           "enabled", "mitigated_applies", "models", "protocols", "report_kw",
           "scores_input", "skip_reason", "slice_columns", "split_model", "targets"]

#: where rule ``slices`` writes
SLICES_DIR = "results/{ds}/slices/{model}/{protocol}"
#: a mitigated model's name joins an embed model and a mitigation method: ``dlib+fsn``
MITIGATED = "+"
#: where the mitigation stage writes a method's transformed scores (scores-file format);
#: slices and compare read a mitigated model from there, importing no mitigation code
MITIGATED_SCORES = "results/{ds}/mitigation/{model}/{protocol}/{method}/pairs.parquet"


def split_model(name: str) -> tuple[str, str]:
    """``(embed model, mitigation method)`` of a model name; method ``""`` when the name
    is a plain model."""
    model, _, method = str(name).partition(MITIGATED)
    return model, method


def scores_input(ds: str, name: str, protocol: str) -> str:
    """The scored pairs of model ``name`` on ``protocol``: evaluate's scores file, or the
    mitigation stage's transformed scores of a mitigated model (``dlib+fsn``)."""
    model, method = split_model(name)
    if method:
        return MITIGATED_SCORES.format(ds=ds, model=model, protocol=protocol, method=method)
    return f"results/{ds}/eval/{model}/{protocol}.parquet"


def mitigated_applies(config: Mapping[str, Any], ds: str, name: str, protocol: str) -> bool:
    """Whether scored pairs of ``name`` exist on (``ds``, ``protocol``): always for a plain
    model; for a mitigated one where the mitigation stage runs (its datasets and
    protocols: ``mitigation.datasets``/``protocols``, else the fairness stage's)."""
    if not split_model(name)[1]:
        return True
    return (ds in section_datasets(config, "mitigation")
            and protocol in section_protocols(config, "mitigation"))


def accuracy_config(config: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The 10-fold accuracy settings of a job reading the models ``names``: evaluate's
    (:func:`facecast.evaluate.targets.job_config`), with ``thresholds: exact`` when one
    of them is mitigated - transformed scores are not cosines, so insightface's grid on
    ``2 - 2 cos`` does not cover them; every model of the job then uses the exact search,
    so their accuracies stay comparable."""
    cfg = job_config(config["evaluate"], config["seed"])
    if any(split_model(n)[1] for n in names):
        cfg["thresholds"] = "exact"
    return cfg


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
            if protocol_applies(config, ds, p) and mitigated_applies(config, ds, m, p)
            and model_applies(config, ds, split_model(m)[0], p)]


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model slices output."""
    return {"caption": "../report/slices.rst", "category": "Slices",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}
