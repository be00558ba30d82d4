"""Config checks of the audit, features and describe sections (and the synthetic
datasets' planted label noise), run before any job; each message names its key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import attribute_only
from facecast.datasets.label_noise import validate_noise_spec
from facecast.labels.estimators_checks import split_errors, split_plan
from facecast.labels.imports_checks import import_errors
from facecast.labels.rules import RULE_SETS, validate_rules
from facecast.labels.targets import enabled

#: what each label stage adds, for the plan's "off" lines
WHAT = {"audit": "audits attribute labels", "features": "finds prominent features from "
        "landmarks", "describe": "writes face descriptions"}


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Plan lines for the label stages that are off and for the estimator report (nothing
    is filled)."""
    return [f"{stage}: off ({stage}.enabled: false; true {what})"
            for stage, what in WHAT.items() if not enabled(config, stage)] + \
        estimator_plan(config) + split_plan(config)


def estimator_plan(config: Mapping[str, Any]) -> list[str]:
    """What the estimator report checks for each attribute benchmark, or why it is off."""
    from facecast.attributes.estimates import estimates_in
    from facecast.config.columns import scorer_columns

    benches = [ds for ds in (config.get("datasets") or {}) if attribute_only(config, ds)]
    if not benches:
        return []
    if not (config.get("estimators") or {}).get("enabled", True):
        return ["estimators: off (estimators.enabled: false; true writes the estimator "
                f"report of {', '.join(benches)})"]
    cols = scorer_columns(config, None) or set()
    found = [f"{e.estimator}'s {e.attribute}" for e in estimates_in(cols)]
    what = ("the detector and " + ", ".join(found) if found else
            "only the detector (no scorer of attributes.scorers estimates gender, age or "
            "race: add age_gender or fairface)")
    imports = (config.get("estimators") or {}).get("imports") or {}

    def checked(ds: str) -> str:
        names = [f"{n} ({spec.get('path')})" for n, spec in imports.items()
                 if not (spec or {}).get("datasets") or ds in spec["datasets"]]
        if not names:
            return what
        return (f"{what}, and the predictions of " if found else "the detector and the "
                "predictions of ") + ", ".join(names)

    return [f"estimators: {ds} - {checked(ds)} against its truth labels "
            f"(results/{ds}/labels/estimators.md)" for ds in benches]


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Problems in the ``audit``, ``features`` and ``describe`` sections (each names its key).

    Also checks every synthetic dataset's ``label_noise`` spec and ``estimators.imports``
    (:func:`facecast.labels.imports_checks.import_errors`).
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
    return errs + import_errors(config) + split_errors(config)
