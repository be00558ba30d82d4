"""Targets and parse-time checks of the config sections ``quality`` (EDC),
``demographics`` (cross-group FMR matrices, per-group thresholds, bands) and
``identification`` (1:N per group). Used by workflow/rules/quality.smk.

:func:`config_errors` returns one message per mistake, each naming its key, so the
workflow can stop before any job runs.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from facecast.config_util import name_list
from facecast.quality.columns import DIRECTIONS, NATIVE_DIRECTIONS
from facecast.quality.edc import PAIR_QUALITY


def _section(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    return dict(config.get(name) or {})


def enabled(config: Mapping[str, Any], name: str) -> bool:
    """Whether section ``name`` is switched on (default on)."""
    return bool(_section(config, name).get("enabled", True))


_names = name_list  # one definition: facecast.config_util.name_list


def _embed_models(config: Mapping[str, Any]) -> list[str]:
    return _names((config.get("embed") or {}).get("models"))


def models(config: Mapping[str, Any], section: str) -> list[str]:
    """``<section>.models``, else ``evaluate.models``, else every embed model."""
    return (_names(_section(config, section).get("models"))
            or _names((config.get("evaluate") or {}).get("models")) or _embed_models(config))


def protocols(config: Mapping[str, Any], section: str) -> list[str]:
    """``<section>.protocols``, else ``fairness.protocols``, else ``evaluate.benchmarks``."""
    return (_names(_section(config, section).get("protocols"))
            or _names((config.get("fairness") or {}).get("protocols"))
            or _names((config.get("evaluate") or {}).get("benchmarks")))


def datasets(config: Mapping[str, Any], section: str) -> list[str]:
    return _names(_section(config, section).get("datasets")) or _names(config.get("datasets"))


def fairness_groups(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fairness section the analyses take their groups from ({} when fairness is off,
    so no ``label_*`` column of a switched-off section is read)."""
    fair = dict(config.get("fairness") or {})
    return fair if fair.get("enabled", True) else {}


def identification_pool(config: Mapping[str, Any]) -> str:
    """``identification.pool``, else the benchmark ``random``, else the first benchmark
    without filters, else the first benchmark ('' when there is none)."""
    pool = str(_section(config, "identification").get("pool") or "")
    benches = dict(config.get("benchmarks") or {})
    if pool or not benches:
        return pool
    if "random" in benches:
        return "random"
    plain = [b for b, v in benches.items() if not (v or {}).get("filters")]
    return (plain or list(benches))[0]


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs of the three sections for dataset ``ds``."""
    out: list[str] = []
    if enabled(config, "quality") and ds in datasets(config, "quality"):
        out += [f"results/{ds}/quality/{m}/{p}/ranking.csv"
                for m in models(config, "quality") for p in protocols(config, "quality")]
    if (enabled(config, "demographics") and ds in datasets(config, "demographics")
            and (fairness_groups(config).get("protected"))):
        out += [f"results/{ds}/demographics/{m}/{p}/group_thresholds.csv"
                for m in models(config, "demographics")
                for p in protocols(config, "demographics")]
    if (enabled(config, "identification") and ds in datasets(config, "identification")
            and identification_pool(config)):
        out += [f"results/{ds}/identification/{m}/cmc.csv"
                for m in models(config, "identification")]
    return out


def report_kw(caption: str, category: str, subcategory: str, name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model output."""
    return {"caption": f"../report/{caption}.rst", "category": category,
            "subcategory": subcategory, "labels": {"model": "{model}", "file": name}}


def _known_columns(config: Mapping[str, Any]) -> dict[str, set[str] | None]:
    """Columns of each dataset's attribute table (None where not certain)."""
    try:
        from facecast.config_columns import known_columns
    except ImportError:  # pragma: no cover - older checkouts
        return {}
    try:
        return known_columns(config)
    except Exception:  # noqa: BLE001 - the column checker reports its own errors
        return {}


def _is_quality_namespace(name: str) -> bool:
    return (name in NATIVE_DIRECTIONS or name.startswith("iqa_")
            or name.startswith("embed_norm_"))


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``quality``, ``demographics`` and ``identification`` sections."""
    errs: list[str] = []
    benches = set(_names(config.get("benchmarks"))) | {"lfw"} | set(
        _names((config.get("evaluate") or {}).get("imports")))
    embed = set(_embed_models(config))
    for section in ("quality", "demographics", "identification"):
        cfg = _section(config, section)
        if not cfg or not cfg.get("enabled", True):
            continue
        for m in _names(cfg.get("models")):
            if embed and m not in embed:
                errs.append(f"{section}.models: {m!r} is not an embed model "
                            f"(embed.models: {sorted(embed)})")
        if section != "identification":
            for p in _names(cfg.get("protocols")):
                if p not in benches:
                    errs.append(f"{section}.protocols: {p!r} is not a benchmark, lfw or an "
                                f"evaluate import ({sorted(benches)})")
        for d in _names(cfg.get("datasets")):
            if d not in _names(config.get("datasets")):
                errs.append(f"{section}.datasets: {d!r} is not a configured dataset")
    q = _section(config, "quality")
    if q and q.get("enabled", True):
        if q.get("pair_quality", "min") not in PAIR_QUALITY:
            errs.append(f"quality.pair_quality: {q.get('pair_quality')!r} is not one of "
                        f"{list(PAIR_QUALITY)}")
        lim = q.get("discard_limit", 0.2)
        if not isinstance(lim, (int, float)) or not 0 < float(lim) <= 1:
            errs.append(f"quality.discard_limit: {lim!r} must lie in (0, 1]")
        t = dict(q.get("threshold") or {})
        if t.get("mode", "fmr") not in ("fmr", "fnmr"):
            errs.append(f"quality.threshold.mode: {t.get('mode')!r} is not fmr or fnmr")
        v = t.get("value", 1e-3)
        if not isinstance(v, (int, float)) or not 0 < float(v) < 1:
            errs.append(f"quality.threshold.value: {v!r} must lie in (0, 1)")
        for col, d in (q.get("directions") or {}).items():
            if d not in DIRECTIONS:
                errs.append(f"quality.directions.{col}: {d!r} is not one of {list(DIRECTIONS)}")
        wanted = datasets(config, "quality")
        for ds, known in _known_columns(config).items():
            if known is None or ds not in wanted:
                continue
            for key in ("columns", "directions"):
                for pat in _names(q.get(key)):
                    if not fnmatch.filter(sorted(known), pat):
                        quality_like = sorted(c for c in known if _is_quality_namespace(c))
                        errs.append(f"quality.{key}: {pat!r} matches no column of dataset "
                                    f"{ds!r}'s attribute table (quality columns there: "
                                    f"{quality_like})")
    d = _section(config, "demographics")
    if d and d.get("enabled", True):
        fair = config.get("fairness") or {}
        allowed = ["group", *_names(fair.get("protected")), *_names(fair.get("legitimate"))]
        for a in _names(d.get("matrix_attributes")):
            if a not in allowed:
                errs.append(f"demographics.matrix_attributes: {a!r} is not 'group' or a "
                            f"fairness.protected/legitimate attribute ({allowed})")
    i = _section(config, "identification")
    if i and i.get("enabled", True):
        pool = i.get("pool", "")
        if pool and pool not in _names(config.get("benchmarks")):
            errs.append(f"identification.pool: {pool!r} is not a benchmark "
                        f"({_names(config.get('benchmarks'))})")
        for t in i.get("fpir_targets") or []:
            if not isinstance(t, (int, float)) or not 0 < float(t) < 1:
                errs.append(f"identification.fpir_targets: {t!r} must lie in (0, 1)")
        h = i.get("heldout_fraction", 0.2)
        if not isinstance(h, (int, float)) or not 0 <= float(h) < 1:
            errs.append(f"identification.heldout_fraction: {h!r} must lie in [0, 1)")
        for r in i.get("ranks") or []:
            if not isinstance(r, int) or r < 1:
                errs.append(f"identification.ranks: {r!r} must be a positive integer")
    return errs
