"""Parse-time checks and file lists for the ``audit``, ``features`` and ``describe`` stages.

Imported when the Snakefile is parsed, so it stays free of heavy imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.labels.noise import validate_noise_spec
from facecast.labels.rules import RULE_SETS, validate_rules
from facecast.shard_index import EMBED_INDEX, FACES_INDEX

__all__ = ["AUDIT_FILES", "DESCRIBE_FILES", "FEATURES_FILES", "audit_inputs", "config_errors",
           "default_targets", "describe_inputs", "enabled", "report_kw"]

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


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Problems in the ``audit``, ``features`` and ``describe`` sections (each names its key).

    Also checks every synthetic dataset's ``label_noise`` spec.
    """
    errs: list[str] = []
    audit = config.get("audit") or {}
    feats = config.get("features") or {}
    desc = config.get("describe") or {}
    models = set((config.get("embed") or {}).get("models") or {})
    rs = audit.get("rule_set", "none")
    if rs not in RULE_SETS:
        errs.append(f"audit.rule_set: unknown {rs!r}; known: {sorted(RULE_SETS)}")
    errs += validate_rules(audit.get("rules") or {})
    emb = (audit.get("model") or {}).get("embedding", "")
    if emb and emb not in models and enabled(config, "audit"):
        errs.append(f"audit.model.embedding: {emb!r} is not an embed.models entry "
                    f"({sorted(models)})")
    if int((audit.get("model") or {}).get("folds", 3)) < 2:
        errs.append("audit.model.folds: needs at least 2 folds")
    for key in ("min_kappa", "min_f1"):
        v = audit.get(key)
        if v is not None and not -1.0 <= float(v) <= 1.0:
            errs.append(f"audit.{key}: {v} is not in [-1, 1]")
    inv = audit.get("invariant") or []
    names = audit.get("attributes") or []
    if names and set(inv) - set(names):
        errs.append(f"audit.invariant: {sorted(set(inv) - set(names))} not in audit.attributes")
    lo, hi = float(feats.get("low", 0.1)), float(feats.get("high", 0.9))
    if not 0.0 < lo < hi < 1.0:
        errs.append(f"features.low/high: need 0 < low < high < 1, got {lo}, {hi}")
    if feats.get("reference", "all") not in ("all", "train", "test"):
        errs.append(f"features.reference: {feats.get('reference')!r} is not all | train | test")
    if desc.get("source", "audit") not in ("audit", "labels", "columns"):
        errs.append(f"describe.source: {desc.get('source')!r} is not audit | labels | columns")
    if enabled(config, "describe") and desc.get("source", "audit") == "audit" \
            and not enabled(config, "audit"):
        errs.append("describe.source: 'audit' needs audit.enabled: true (or source labels)")
    if desc.get("source") == "columns" and not desc.get("columns"):
        errs.append("describe.columns: source 'columns' needs attribute -> column entries")
    if not 0.0 <= float(desc.get("drop_rate", 0.0)) < 1.0:
        errs.append(f"describe.drop_rate: {desc.get('drop_rate')} is not in [0, 1)")
    if int(desc.get("gallery_size", 128)) < 2:
        errs.append("describe.gallery_size: needs at least 2")
    for name, ds in (config.get("datasets") or {}).items():
        spec = ((ds or {}).get("synthetic") or {}).get("label_noise")
        if spec:
            errs += [f"datasets.{name}.synthetic.{e}" for e in validate_noise_spec(spec)]
    return errs


def audit_inputs(config: Mapping[str, Any], ds: str, per_shard=None) -> dict[str, Any]:
    """Inputs of rule audit: the attribute table, the faces and embedding shard indexes
    (``per_shard`` is unused), features."""
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
