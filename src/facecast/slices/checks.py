"""Config checks of the slices section, run before any job; each message names its key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.columns import known_columns
from facecast.config.patterns import unmatched
from facecast.config.util import name_list, section
from facecast.fairness.checks import section_errors
from facecast.slices.predicates import NOT_ATTRIBUTES
from facecast.slices.targets import datasets, enabled, skip_reason, split_model


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan line of the slices section when it is off or skipped (nothing is
    filled)."""
    if not enabled(config):
        return ["slices: off (slices.enabled: false)"]
    if why := skip_reason(config):
        return [f"slices: skipped - {why}"]
    return []


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``slices`` section: its names, the threshold, and column patterns
    that match no column of a dataset's attribute table."""
    s = section(config, "slices")
    # a mitigated model (`dlib+fsn`) names its embed model; mitigation checks its method
    plain = {**config, "slices": {**s, "models": [split_model(m)[0]
                                                  for m in name_list(s.get("models"))]}}
    errs = section_errors(plain if s else config, "slices")
    if not s or not s.get("enabled", True):
        return errs
    t = dict(s.get("threshold") or {})
    if t.get("policy", "fmr") == "fmr":
        v = t.get("value", 1e-3)
        if not isinstance(v, (int, float)) or not 0 < float(v) < 1:
            errs.append(f"slices.threshold.value: {v!r} must lie in (0, 1)")
    if int(s.get("bins", 4)) < 2:
        errs.append(f"slices.bins: {s.get('bins')!r} must be at least 2")
    wanted = datasets(config)
    for ds, known in known_columns(config).items():
        if known is None or ds not in wanted:
            continue
        usable = sorted(c for c in known if c not in NOT_ATTRIBUTES)
        for pat in unmatched(usable, name_list(s.get("columns"))):
            errs.append(f"slices.columns: {pat!r} matches no column of dataset {ds!r}'s "
                        f"attribute table (columns there: {usable})")
    return errs
