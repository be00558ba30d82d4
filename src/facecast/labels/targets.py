"""The DAG side of the label stages ``audit``, ``features``, ``describe`` and
``estimators`` (workflow/rules/labels.smk): their inputs, output files, report() keywords
and which of them a config asks for.

Imported when the Snakefile is parsed, so it stays free of heavy imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from facecast.attributes.targets import LANDMARKS, ofiq_writes_landmarks
from facecast.config.util import attribute_only
from facecast.io.shard_index import EMBED_INDEX, FACES_INDEX

__all__ = ["AUDIT_FILES", "DESCRIBE_FILES", "ESTIMATOR_FILES", "FEATURES_FILES",
           "FEATURES_SHARD", "audit_inputs", "default_targets", "describe_inputs",
           "enabled", "estimator_inputs", "estimator_targets", "feature_shards", "report_kw"]

AUDIT_FILES = ["metrics.parquet", "metrics.csv", "rules.csv", "flags.parquet", "kappa.csv",
               "kappa.parquet", "predictions.parquet", "suspects.parquet", "suspects_top.csv",
               "identities.parquet", "group_skew.csv", "phi.csv", "recovery.csv", "summary.md"]
AUDIT_FIGURES = ["report.html", "kappa.png", "f1_vs_prevalence.png", "suspects_grid.png",
                 "phi.png", "measurements.png"]
FEATURES_FILES = ["images.parquet", "identities.parquet", "reliability.csv",
                  "prominent_rates.csv", "status.csv"]
FEATURES_FIGURES = ["report.html"]
DESCRIBE_FILES = ["descriptions.parquet", "evaluation.csv", "thresholds.csv", "examples.csv"]
DESCRIBE_FIGURES = ["report.html"]
#: the estimator report of an attribute benchmark (rule ``estimators``), in
#: results/{ds}/labels/ (:mod:`facecast.labels.estimators_report`)
ESTIMATOR_FILES = ["estimators.parquet", "estimators.csv", "estimators.md",
                   "estimator_confusion.parquet", "estimator_confusion.csv",
                   "estimator_imports.parquet", "estimator_imports.csv"]
ESTIMATOR_FIGURES = ["estimators.html", "estimators.png"]
#: the landmark shard rule ``features_shard`` writes where the ofiq scorer does not
FEATURES_SHARD = "results/{ds}/features/shards/{shard}.parquet"


def feature_shards(config: Mapping[str, Any], ds: str,
                   per_shard: Callable[..., list[str]]) -> list[str]:
    """The landmark shards features_merge reads: the ``ofiq`` scorer's
    (``results/{ds}/attributes/landmarks/``, one dlib fit for both) where it writes them
    (:func:`facecast.attributes.targets.ofiq_writes_landmarks`), else rule
    ``features_shard``'s."""
    return per_shard(LANDMARKS if ofiq_writes_landmarks(config) else FEATURES_SHARD, ds)


def estimators_on(config: Mapping[str, Any], ds: str) -> bool:
    """Whether the estimator report runs for ``ds``: ``estimators.enabled`` (default on)
    and ``ds`` of an attribute-only kind (fairface, utkface: the truth labels)."""
    return (bool((config.get("estimators") or {}).get("enabled", True))
            and attribute_only(config, ds))


def estimator_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """The estimator report of ``ds`` (none unless :func:`estimators_on`)."""
    if not estimators_on(config, ds):
        return []
    return [f"results/{ds}/labels/{f}" for f in ESTIMATOR_FILES + ESTIMATOR_FIGURES]


def estimator_inputs(config: Mapping[str, Any], ds: str) -> dict[str, Any]:
    """Inputs of rule estimators: the attribute table and the manifest (which rule all
    builds for an attribute benchmark anyway: the report adds no faces or attributes job)
    and the predictions file of every ``estimators.imports`` entry that predicts ``ds``
    (its ``datasets``, empty = every attribute benchmark)."""
    imports = (config.get("estimators") or {}).get("imports") or {}
    return {"attributes": f"results/{ds}/attributes.parquet",
            "manifest": f"results/{ds}/manifest.parquet",
            "predictions": [str(spec["path"]) for spec in imports.values()
                            if not (spec or {}).get("datasets")
                            or ds in spec["datasets"]]}


def report_kw(caption: str, name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()``: category "Attribute labels"."""
    return {"caption": f"../report/{caption}.rst", "category": "Attribute labels",
            "subcategory": "{ds}", "labels": {"stage": caption.replace("labels_", ""),
                                              "file": name}}


def enabled(config: Mapping[str, Any], stage: str) -> bool:
    """Whether stage ``audit`` / ``features`` / ``describe`` runs in the default target."""
    return bool((config.get(stage) or {}).get("enabled", False))


def default_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Outputs `rule all` builds for dataset ``ds``."""
    out = []
    if enabled(config, "audit"):
        out += [f"results/{ds}/audit/{f}" for f in AUDIT_FILES + AUDIT_FIGURES]
    if enabled(config, "features"):
        out += [f"results/{ds}/features/{f}" for f in FEATURES_FILES + FEATURES_FIGURES]
    if enabled(config, "describe"):
        out += [f"results/{ds}/describe/{f}" for f in DESCRIBE_FILES + DESCRIBE_FIGURES]
    return out


def audit_inputs(config: Mapping[str, Any], ds: str) -> dict[str, Any]:
    """Inputs of rule audit: the attribute table, the faces and embedding shard indexes,
    features."""
    audit = config.get("audit") or {}
    # the shard indexes stand for every faces / embedding shard (a small DAG at 42M images)
    out: dict[str, Any] = {"attributes": f"results/{ds}/attributes.parquet",
                           "faces": FACES_INDEX.format(ds=ds)}
    emb = (audit.get("model") or {}).get("embedding", "")
    if emb:
        out["embeddings"] = EMBED_INDEX.format(ds=ds, model=emb)
    if enabled(config, "features"):
        out["features"] = f"results/{ds}/features/images.parquet"
    second = audit.get("second_source", "")
    if second:
        out["second_source"] = second
    return out


def describe_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """Inputs of rule describe: attributes, the audit's predictions and kappa, features."""
    out = {"attributes": f"results/{ds}/attributes.parquet"}
    if enabled(config, "audit"):
        out["predictions"] = f"results/{ds}/audit/predictions.parquet"
        out["kappa"] = f"results/{ds}/audit/kappa.csv"
    if enabled(config, "features"):
        out["features_images"] = f"results/{ds}/features/images.parquet"
        out["features_identities"] = f"results/{ds}/features/identities.parquet"
    return out
