"""Config checks of the quality (EDC), demographics and identification sections, run
before any job; each message names its key."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from facecast.config.columns import known_columns
from facecast.quality.columns import DIRECTIONS, NATIVE_DIRECTIONS
from facecast.quality.config import (
    _embed_models,
    _names,
    _section,
    datasets,
    enabled,
    skip_reason,
)
from facecast.quality.edc import PAIR_QUALITY


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Plan lines for the quality, demographics and identification sections that are off
    or skipped (nothing is filled)."""
    lines = []
    for name in ("quality", "demographics", "identification"):
        if not enabled(config, name):
            lines.append(f"{name}: off ({name}.enabled: false)")
        elif why := skip_reason(config, name):
            lines.append(f"{name}: skipped - {why}")
    return lines


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
        for ds, known in known_columns(config).items():
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
