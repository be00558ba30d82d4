"""The DAG side of the mitigation stage (rule ``mitigation`` in
workflow/rules/mitigation.smk): which methods, models, protocols and inputs a config asks
for. Pure functions of the config; imported when the Snakefile is parsed.

Models, protocols and datasets follow :func:`facecast.fairness.targets.section_models`
and its siblings (``mitigation.models``, else ``evaluate.models``, else every embed model,
with a BFW datatable's score columns; ``mitigation.protocols``, else the fairness stage's
protocols). The section runs where ``mitigation.enabled`` is true - left out, where the
calibration split leaves enough identities on each side (:mod:`facecast.mitigation.auto`).

A BFW score column (:func:`is_score_model`) has scores, labels, identities and groups but
no embeddings: the score-level methods run on it (raw, oracle calibration, group
thresholds, fusion with its dataset's other score columns) and the embedding methods
(:data:`EMBEDDING_METHODS`) are table rows that say :data:`SCORE_ONLY_NOTE`. Its rule
(``mitigation_scores``) asks for no embedding and writes no ``<method>/pairs.parquet`` of a
method that did not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.fair_sets import score_models
from facecast.config.util import name_list
from facecast.datasets.targets import name_regex
from facecast.evaluate.failures import rule_of
from facecast.evaluate.targets import eval_models, model_applies, protocol_applies
from facecast.fairness.targets import (
    fairness_groups,
    no_protocol_reason,
    section_datasets,
    section_models,
    section_protocols,
)
from facecast.io.shard_index import EMBED_INDEX

__all__ = ["EMBEDDING_METHODS", "FUSION_METHODS", "GROUP_METHODS", "METHODS",
           "MITIGATION_DIR", "PROBABILITY_METHODS", "SCORE_ONLY_NOTE", "calibration",
           "calibration_source", "dropped_methods", "embed_model_regex", "enabled",
           "failure_rule", "fairness_section", "fusion_models", "is_score_model", "method_files",
           "methods", "models", "partners", "protocols", "report_kw", "rule_inputs",
           "run_methods", "skip_reason", "targets", "unavailable"]

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
#: methods that read embeddings (cohorts, k-means clusters): none runs on a score column
EMBEDDING_METHODS = ("znorm", "tnorm", "ztnorm", "snorm", "asnorm", "fsn", "faircal")
#: the table's note on an embedding method of a BFW score model
SCORE_ONLY_NOTE = "n/a (score-only model: needs embeddings)"


def _section(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get("mitigation") or {})


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether ``mitigation.enabled`` is true. Left out by the user, the run's plan
    (:func:`facecast.mitigation.checks.fill_defaults`) has set it from the identities on
    each side of the calibration split (:mod:`facecast.mitigation.auto`); a config that
    never went through the plan reads the schema's false."""
    return bool(_section(config).get("enabled", False))


def models(config: Mapping[str, Any]) -> list[str]:
    """``mitigation.models``, else ``evaluate.models``, else every embed model, then BFW's
    score columns (each only on its dataset's protocol ``bfw``)."""
    own = section_models(config, "mitigation")
    if name_list(_section(config).get("models")):
        return own
    return own + [m for m in score_models(config) if m not in own]


def is_score_model(config: Mapping[str, Any], model: str) -> bool:
    """Whether ``model`` is a BFW datatable's score column (no embeddings), as
    :func:`facecast.evaluate.targets.model_applies` tells them apart."""
    return model in score_models(config)


def protocols(config: Mapping[str, Any]) -> list[str]:
    """``mitigation.protocols``, else the fairness stage's protocols."""
    return section_protocols(config, "mitigation")


def _score_datasets(config: Mapping[str, Any]) -> list[str]:
    """The stage's datasets that have score columns."""
    return [d for d in section_datasets(config, "mitigation") if score_models(config, d)]


def fusion_models(config: Mapping[str, Any], model: str | None = None,
                  ds: str | None = None) -> list[str]:
    """The models a fusion of ``model`` on ``ds`` combines, sorted by name: a score
    column's fusion takes the score columns of its dataset ``ds``, any other model's (and
    ``model`` None) every evaluated model."""
    if model is None or not is_score_model(config, model):
        return sorted(eval_models(config))
    return sorted(score_models(config, ds)) if ds else []


def _fusion_size(config: Mapping[str, Any], model: str | None) -> int:
    """How many models the fusions of ``model``'s kind combine: the evaluated models, or
    for a score column the fewest score columns of a dataset the stage runs on (one rule
    writes every score column's files, so the methods are those every dataset can run)."""
    if model is None or not is_score_model(config, model):
        return len(eval_models(config))
    sizes = [len(score_models(config, d)) for d in _score_datasets(config)]
    return min(sizes) if sizes else 0


def _asked(config: Mapping[str, Any]) -> list[str]:
    return name_list(_section(config).get("methods")) or list(METHODS)


def dropped_methods(config: Mapping[str, Any], model: str | None = None
                    ) -> dict[str, str]:
    """Requested methods the config cannot run (on ``model``; None: an embed model), each
    with why. Not among them: the embedding methods of a score column, which stay in its
    table as rows that say why (:func:`unavailable`)."""
    asked = _asked(config)
    out = {}
    if not fairness_groups(config).get("protected"):
        out.update({m: "needs the fairness stage's protected groups (fairness.protected)"
                    for m in GROUP_METHODS if m in asked})
    if _fusion_size(config, model) < 2:
        why = ("needs two or more score columns in each BFW datatable (datasets.<ds>."
               "scores)" if model is not None and is_score_model(config, model)
               else "needs two or more evaluated models (evaluate.models)")
        out.update({m: why for m in FUSION_METHODS if m in asked})
    return out


def methods(config: Mapping[str, Any], model: str | None = None) -> list[str]:
    """The methods of ``model``'s table (None: an embed model's): ``mitigation.methods``
    (all by default) that the config can run, in :data:`METHODS` order, ``raw`` always
    first - on a score column with its embedding methods as n/a rows."""
    asked = set(_asked(config)) | {"raw"}
    drop = dropped_methods(config, model)
    return [m for m in METHODS if m in asked and m not in drop]


def unavailable(config: Mapping[str, Any], model: str | None = None) -> dict[str, str]:
    """The rows of ``model``'s table that are not a number, each with its note: a score
    column's embedding methods (:data:`SCORE_ONLY_NOTE`); {} for an embed model."""
    if model is None or not is_score_model(config, model):
        return {}
    return {m: SCORE_ONLY_NOTE for m in methods(config, model) if m in EMBEDDING_METHODS}


def run_methods(config: Mapping[str, Any], model: str | None = None) -> list[str]:
    """The methods that run on ``model``: :func:`methods` less :func:`unavailable`."""
    skip = unavailable(config, model)
    return [m for m in methods(config, model) if m not in skip]


def _kind_model(config: Mapping[str, Any], score: bool) -> str | None:
    """A model standing for the score columns (``score``) or the embed models (None)."""
    return next((m for m in score_models(config)), None) if score else None


def fairness_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fairness section the table takes its groups from ({} when fairness is off)."""
    return fairness_groups(config)


def calibration(config: Mapping[str, Any]) -> dict[str, Any]:
    """``mitigation.calibration`` with its defaults (fraction 0.5, folds ``auto``, no
    source)."""
    return {"fraction": 0.5, "folds": "auto", "benchmark": "", "dataset": "",
            **dict(_section(config).get("calibration") or {})}


def failure_rule(config: Mapping[str, Any]) -> str:
    """The rule for pairs without a feature (``evaluate.failed``, default ``nonmatch``):
    the methods learn on scored pairs only; under ``nonmatch`` an evaluated pair without
    a feature is a non-match after every method."""
    return rule_of(config)


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


def partners(config: Mapping[str, Any], model: str, ds: str | None = None) -> list[str]:
    """The other models a fusion of ``model`` on ``ds`` reads (none without a fusion
    method): the evaluated models, or a score column's fellow columns of ``ds``."""
    if not any(m in FUSION_METHODS for m in run_methods(config, model)):
        return []
    return [m for m in fusion_models(config, model, ds) if m != model]


def rule_inputs(config: Mapping[str, Any], ds: str, model: str, protocol: str
                ) -> dict[str, Any]:
    """Inputs of rule ``mitigation``: the scores, the embed index (not for a score
    column, :func:`is_score_model`), the attribute table (with groups), the fusion
    partners' scores (``partners``, in :func:`partners` order), and the calibration
    source's (``cal_*``) when one is set."""
    groups = bool(fairness_groups(config).get("protected"))
    fused = partners(config, model, ds)
    embeds = any(m in EMBEDDING_METHODS for m in run_methods(config, model))
    out: dict[str, Any] = {"scores": _scores(ds, model, protocol),
                           "partners": [_scores(ds, m, protocol) for m in fused]}
    if embeds:
        out["embeddings"] = EMBED_INDEX.format(ds=ds, model=model)
    if groups:
        out["attributes"] = f"results/{ds}/attributes.parquet"
    src = calibration_source(config, ds, protocol)
    if src:
        cds, bench = src
        out["cal_scores"] = _scores(cds, model, bench)
        if embeds:
            out["cal_embeddings"] = EMBED_INDEX.format(ds=cds, model=model)
        out["cal_partners"] = [_scores(cds, m, bench) for m in fused]
        if groups:
            out["cal_attributes"] = f"results/{cds}/attributes.parquet"
    return out


def method_files(config: Mapping[str, Any], score: bool = False) -> list[str]:
    """``<method>/pairs.parquet`` of every method that runs on an embed model (on a score
    column with ``score``): the rule outputs, relative."""
    return [f"{m}/pairs.parquet" for m in run_methods(config, _kind_model(config, score))]


def embed_model_regex(config: Mapping[str, Any]) -> str:
    """The ``{model}`` constraint of rule ``mitigation``: a model name that is no score
    column (and holds no ``/`` or ``+``)."""
    names = score_models(config)
    return (f"(?!(?:{name_regex(names)})/)" if names else "") + "[^/+]+"


def skip_reason(config: Mapping[str, Any]) -> str:
    """Why the enabled section writes nothing; '' when it runs."""
    if not protocols(config):
        return no_protocol_reason("mitigation")
    if not models(config):
        return ("no model (mitigation.models, evaluate.models and embed.models are empty "
                "and no BFW datatable has a score column)")
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs for ``ds``: each (model, protocol)'s table, where the model has
    scored pairs (:func:`facecast.evaluate.targets.model_applies`)."""
    if not enabled(config) or skip_reason(config) or \
            ds not in section_datasets(config, "mitigation"):
        return []
    return [f"results/{ds}/mitigation/{m}/{p}/table.md"
            for m in models(config) for p in protocols(config)
            if protocol_applies(config, ds, p) and model_applies(config, ds, m, p)]


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a mitigation output."""
    return {"caption": "../report/mitigation.rst", "category": "Bias mitigation",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}
