"""Config checks and plan lines of the estimator report's splits (issue 47.1): which
FairFace splits it covers (``estimators.fairface_splits``) and whose training images are
left out (:data:`facecast.attributes.estimates.TRAINED_ON`, ``estimators.imports.<name>.
trained_on``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import attribute_only, datasets_of


def _declared(config: Mapping[str, Any]) -> dict[str, dict[str, list[str]]]:
    imports = (config.get("estimators") or {}).get("imports") or {}
    return {str(k): dict((v or {}).get("trained_on") or {}) for k, v in imports.items()}


def covered_splits(config: Mapping[str, Any], ds: str) -> list[str] | None:
    """The splits of FairFace dataset ``ds`` the report covers (None: every split it has;
    a dataset of another kind: None)."""
    spec = datasets_of(config).get(ds, {})
    if spec.get("kind") != "fairface":
        return None
    wanted = list((config.get("estimators") or {}).get("fairface_splits", ["val"]) or [])
    have = list(spec.get("splits") or [])
    if not wanted:
        return have or None
    return [s for s in wanted if not have or s in have]


def split_plan(config: Mapping[str, Any]) -> list[str]:
    """Plan lines: per attribute benchmark, the splits covered and the training images
    left out of each estimator's figures."""
    from facecast.attributes.estimates import estimates_in, trained_splits
    from facecast.config.columns import scorer_columns

    if not (config.get("estimators") or {}).get("enabled", True):
        return []
    declared = _declared(config)
    names = sorted({e.estimator for e in estimates_in(scorer_columns(config, None) or set())}
                   | set(declared))
    lines = []
    for ds, spec in datasets_of(config).items():
        if not attribute_only(config, ds):
            continue
        kind = str(spec.get("kind"))
        covered = covered_splits(config, ds)
        if covered:
            lines.append(f"estimators: {ds} - FairFace split(s) {', '.join(covered)} "
                         "(estimators.fairface_splits); images of other splits are counted, "
                         "in no group")
        for name in names:
            splits = trained_splits(name, kind, declared)
            if splits:
                seen = [s for s in splits if covered is None or s in covered]
                lines.append(
                    f"estimators: {ds} - {name} was trained on the {', '.join(splits)} split "
                    f"of {kind}: "
                    + ("those images are left out of its figures (n_train_excluded)"
                       if seen else "not among the splits reported"))
    return lines


def split_errors(config: Mapping[str, Any]) -> list[str]:
    """``estimators.fairface_splits`` that leave a FairFace dataset without an image."""
    errs = []
    wanted = list((config.get("estimators") or {}).get("fairface_splits", ["val"]) or [])
    for ds, spec in datasets_of(config).items():
        have = list(spec.get("splits") or [])
        if spec.get("kind") == "fairface" and wanted and have and not set(wanted) & set(have):
            errs.append(f"estimators.fairface_splits: {wanted} has no split of "
                        f"datasets.{ds}.splits {have}: the estimator report of {ds} would "
                        "have no image (add one of its splits, or [] for every split)")
    return errs
