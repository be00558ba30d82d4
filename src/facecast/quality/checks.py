"""Config checks of the quality (EDC) section, run before any job; each message names its
key. (The demographics section is checked by :mod:`facecast.fairness.checks`, the
identification section by :mod:`facecast.identification.checks`.)"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from facecast.config.columns import known_columns
from facecast.config.util import name_list, section
from facecast.fairness.checks import section_errors
from facecast.quality.columns import DIRECTIONS, NATIVE_DIRECTIONS, PAIR_QUALITY
from facecast.quality.targets import datasets, enabled, skip_reason


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan line of the quality section when it is off or skipped (nothing is
    filled)."""
    if not enabled(config):
        return ["quality: off (quality.enabled: false)"]
    if why := skip_reason(config):
        return [f"quality: skipped - {why}"]
    return []


def _is_quality_namespace(name: str) -> bool:
    return (name in NATIVE_DIRECTIONS or name.startswith("iqa_")
            or name.startswith("embed_norm_") or name.startswith("ofiq_"))


def bias_errors(config: Mapping[str, Any]) -> list[str]:
    """``quality.bias``: rejection fractions in (0, 1), at least 2 identities a group."""
    errs = []
    b = section(section(config, "quality"), "bias")
    for i, q in enumerate(b.get("reject") or []):
        if not isinstance(q, (int, float)) or not 0 < float(q) < 1:
            errs.append(f"quality.bias.reject[{i}]: {q!r} must lie in (0, 1)")
    m = b.get("min_identities", 2)
    if not isinstance(m, int) or m < 2:
        errs.append(f"quality.bias.min_identities: {m!r} must be an integer >= 2 (a "
                    "bootstrap over identities needs two)")
    return errs


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``quality`` section: its names, the pair quality, discard limit,
    threshold, directions, and column patterns that match no column of a dataset."""
    errs = section_errors(config, "quality")
    q = section(config, "quality")
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
        errs += bias_errors(config)
        for col, d in (q.get("directions") or {}).items():
            if d not in DIRECTIONS:
                errs.append(f"quality.directions.{col}: {d!r} is not one of {list(DIRECTIONS)}")
        wanted = datasets(config)
        for ds, known in known_columns(config).items():
            if known is None or ds not in wanted:
                continue
            for key in ("columns", "directions"):
                for pat in name_list(q.get(key)):
                    if not fnmatch.filter(sorted(known), pat):
                        quality_like = sorted(c for c in known if _is_quality_namespace(c))
                        errs.append(f"quality.{key}: {pat!r} matches no column of dataset "
                                    f"{ds!r}'s attribute table (quality columns there: "
                                    f"{quality_like})")
    return errs
