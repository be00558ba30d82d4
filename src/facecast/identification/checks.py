"""Config checks of the identification section (1:N per group), run before any job; each
message names its key. :func:`fill_defaults` says in the run's plan when the section is
off or skipped (nothing is filled)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import name_list, section
from facecast.fairness.checks import section_errors
from facecast.identification.targets import enabled, skip_reason


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan line of the identification section when it is off or skipped."""
    if not enabled(config):
        return ["identification: off (identification.enabled: false)"]
    if why := skip_reason(config):
        return [f"identification: skipped - {why}"]
    return []


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``identification`` section: its names, the pool, FPIR targets, the
    held-out fraction and the ranks."""
    errs = section_errors(config, "identification")
    i = section(config, "identification")
    if i and i.get("enabled", True):
        pool = i.get("pool", "")
        if pool and pool not in name_list(config.get("benchmarks")):
            errs.append(f"identification.pool: {pool!r} is not a benchmark "
                        f"({name_list(config.get('benchmarks'))})")
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
