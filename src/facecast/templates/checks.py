"""Config checks of the templates stage (IJB-B / IJB-C), run before any job; each message
names its key. :func:`fill_defaults` adds the plan line of an IJB run (nothing is filled)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import embed_model_names, name_list, section
from facecast.templates.targets import datasets, enabled, has_one_n, models


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan line of the templates stage when there is an IJB dataset."""
    ijb = datasets(config) if isinstance(config.get("datasets"), Mapping) else []
    if not ijb:
        return []
    if not enabled(config):
        return ["templates: off (templates.enabled: false); IJB datasets get no template "
                "evaluation"]
    out = []
    for ds in ijb:
        try:
            one_n = has_one_n(config, ds)
        except (OSError, KeyError, ValueError):
            one_n = False
        out.append(f"templates: {ds} - 1:1 template verification"
                   + (" and 1:N identification (G1, G2, G1+G2)" if one_n
                      else " (no 1:N CSVs in the release: no 1:N)")
                   + f" for models {', '.join(models(config))}")
    return out


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``templates`` section: model and dataset names, FARs, FPIRs, ranks."""
    errs: list[str] = []
    t = section(config, "templates")
    if not t or not t.get("enabled", True):
        return errs
    known = embed_model_names(config)
    for m in name_list(t.get("models")):
        if m not in known:
            errs.append(f"templates.models: {m!r} is not an embed model ({known})")
    all_ds = section(config, "datasets")
    for d in name_list(t.get("datasets")):
        if d not in all_ds:
            errs.append(f"templates.datasets: {d!r} is not a dataset")
        elif section(all_ds, d).get("kind") != "ijb":
            errs.append(f"templates.datasets: {d!r} is not of kind ijb")
    for far in t.get("fars") or []:
        if not isinstance(far, (int, float)) or not 0 < float(far) < 1:
            errs.append(f"templates.fars: {far!r} must lie in (0, 1)")
    for f in t.get("fpir_targets") or []:
        if not isinstance(f, (int, float)) or not 0 < float(f) < 1:
            errs.append(f"templates.fpir_targets: {f!r} must lie in (0, 1)")
    for r in t.get("ranks") or []:
        if not isinstance(r, int) or r < 1:
            errs.append(f"templates.ranks: {r!r} must be a positive integer")
    return errs
