"""Which covariate fits a config asks for, and its config checks (workflow/rules/covariates.smk).

Models: ``covariates.models``, else ``evaluate.models``; protocols: ``covariates.protocols``
(required, a dense protocol suits best). Datasets: ``covariates.datasets``, else all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from facecast.config_util import name_list
from facecast.covariates.pairs import PAIR_FEATURES

OUT_DIR = "results/{ds}/covariates/{model}/{protocol}"


_names = name_list  # one definition: facecast.config_util.name_list


def section(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get("covariates") or {})


def enabled(config: Mapping[str, Any]) -> bool:
    return bool(section(config).get("enabled", False))


def models(config: Mapping[str, Any]) -> list[str]:
    return (_names(section(config).get("models"))
            or _names((config.get("evaluate") or {}).get("models"))
            or _names((config.get("embed") or {}).get("models")))


def protocols(config: Mapping[str, Any]) -> list[str]:
    """``covariates.protocols``, else ``fairness.protocols`` (the dense, unbanded ones)."""
    return (_names(section(config).get("protocols"))
            or _names((config.get("fairness") or {}).get("protocols")))


def targets(config: Mapping[str, Any], ds: str, datasets: Sequence[str]) -> list[str]:
    """Default outputs for ``ds``: each (model, protocol) fit.json."""
    if not enabled(config):
        return []
    if ds not in (_names(section(config).get("datasets")) or list(datasets)):
        return []
    return [f"results/{ds}/covariates/{m}/{p}/fit.json"
            for m in models(config) for p in protocols(config)]


def report_kw(name: str, caption: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a covariates output."""
    return {"caption": f"../report/{caption}.rst", "category": "Covariates",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}


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
    prots = protocols(config)
    own = _names(cov.get("protocols"))  # inherited fairness.protocols are checked there
    if not prots:
        errs.append("covariates.protocols: name at least one evaluated protocol (or set "
                    "fairness.protocols, which an empty list follows)")
    for p in own:
        if evaluated and p not in evaluated:
            errs.append(f"covariates.protocols: {p!r} is not a benchmark, lfw or an "
                        f"evaluate import {evaluated}")
    covs = _names(cov.get("covariates"))
    pfeat = _names(cov.get("pair_features"))
    if not covs and not pfeat:
        errs.append("covariates.covariates: name at least one attribute column")
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
    try:
        from facecast.config_columns import known_columns
    except ImportError:  # the parse-time column registry is optional for this check
        return []
    wanted = _names(section(config).get("datasets")) or list(config.get("datasets") or {})
    errs = []
    known = known_columns(config, [])
    refs = [("covariates.covariates", c) for c in covs]
    refs += [("covariates.pair_features", s.partition(":")[2]) for s in pfeat if ":" in s]
    for key, column in refs:
        for ds in wanted:
            cols = known.get(ds)
            if cols is not None and column not in cols:
                errs.append(f"{key}: {column!r} is not a column of results/{ds}/"
                            "attributes.parquet (no configured scorer or dataset label "
                            "writes it)")
    return errs
