"""Config checks of the covariates section, run before any job; each message names its
key. :func:`fill_defaults`: an enabled section that names no covariate gets them from the
run's columns (an age estimate, the native scorer's yaw), else it is skipped, saying so in
the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.columns import check_references, known_columns
from facecast.covariates.pairs import PAIR_FEATURES
from facecast.covariates.targets import _names, protocols, section

#: candidate covariate columns, in order (each used when the run has it)
DEFAULT_COVARIATES = (("age_gender_age", "label_age"), ("yaw",))


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Derive ``covariates.covariates`` when left out; plan lines for off/skipped."""
    cov = config.get("covariates") or {}
    if not cov.get("enabled", False):
        return ["covariates: off (covariates.enabled: false; true fits score models over "
                "continuous covariates)"]
    if "covariates.covariates" in absent and not cov.get("covariates"):
        known = [k for k in known_columns(config).values() if k is not None]
        have = set.intersection(*known) if known else set()
        picked = [next(c for c in group if c in have) for group in DEFAULT_COVARIATES
                  if any(c in have for c in group)]
        cov["covariates"] = picked
        if picked:
            return [f"covariates.covariates: derived - {', '.join(picked)}"]
    if not _names(cov.get("covariates")) and not _names(cov.get("pair_features")):
        return ["covariates: skipped - no covariate column (covariates.covariates is empty "
                "and the run has no age estimate or yaw; name attribute columns there)"]
    if not protocols(config):
        return ["covariates: skipped - no evaluated protocol (add a benchmark or set "
                "covariates.protocols)"]
    return []


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``covariates`` section, each naming its key (empty list when fine).

    Checks: models are embed models (or evaluated ones), protocols are evaluated benchmarks,
    covariates are non-empty and distinct, pair features parse (``<kind>:<column>``), the
    FMR targets and sizes make sense. Column names themselves can only be checked against
    attributes.parquet when the job runs (a clear error then).
    """
    cov = section(config)
    if not cov.get("enabled", False):
        return []
    errs: list[str] = []
    embed_models = _names((config.get("embed") or {}).get("models"))
    for m in _names(cov.get("models")):
        if embed_models and m not in embed_models:
            errs.append(f"covariates.models: {m!r} is not in embed.models {embed_models}")
    # any protocol evaluate_benchmark can score: a benchmark, lfw or an evaluate import
    evaluated = (_names(config.get("benchmarks"))
                 + _names((config.get("evaluate") or {}).get("imports"))
                 + _names((config.get("evaluate") or {}).get("benchmarks")))
    if any((d or {}).get("pairs") for d in (config.get("datasets") or {}).values()):
        evaluated.append("lfw")
    own = _names(cov.get("protocols"))  # inherited fairness.protocols are checked there
    for p in own:
        if evaluated and p not in evaluated:
            errs.append(f"covariates.protocols: {p!r} is not a benchmark, lfw or an "
                        f"evaluate import {evaluated}")
    covs = _names(cov.get("covariates"))
    pfeat = _names(cov.get("pair_features"))
    if len(set(covs)) != len(covs):
        errs.append(f"covariates.covariates: repeated names {covs}")
    for spec in pfeat:
        kind, sep, column = spec.partition(":")
        if not sep or kind not in PAIR_FEATURES or not column:
            errs.append(f"covariates.pair_features: {spec!r} is not <kind>:<column> with "
                        f"kind one of {sorted(PAIR_FEATURES)}")
    if not cov.get("per_image", True) and not pfeat:
        errs.append("covariates.per_image: false needs covariates.pair_features")
    for f in cov.get("fmr_targets", []) or []:
        if not 0 < float(f) < 1:
            errs.append(f"covariates.fmr_targets: {f} is not in (0, 1)")
    if int(cov.get("draws", 200)) < 100:
        errs.append("covariates.draws: at least 100 posterior draws")
    errs += _column_errors(config, covs, pfeat)
    n_cov = len(covs)
    lookup = int(cov.get("lookup_points", 5)) ** (2 * n_cov)
    if lookup > 200_000:
        errs.append(f"covariates.lookup_points: {lookup} threshold lookup rows; lower it")
    return errs


def _column_errors(config: Mapping[str, Any], covs: list[str], pfeat: list[str]) -> list[str]:
    """Covariate columns that no configured scorer or dataset label will produce."""
    wanted = _names(section(config).get("datasets")) or list(config.get("datasets") or {})
    refs = [(f"covariates.covariates[{i}]", c, wanted) for i, c in enumerate(covs)]
    refs += [(f"covariates.pair_features[{i}]", s.partition(":")[2], wanted)
             for i, s in enumerate(pfeat) if ":" in s]
    return check_references(config, refs)
