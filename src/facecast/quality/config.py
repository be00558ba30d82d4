"""Targets and parse-time checks of the config sections ``quality`` (EDC),
``demographics`` (cross-group FMR matrices, per-group thresholds, bands) and
``identification`` (1:N per group). Used by workflow/rules/quality.smk.

:func:`config_errors` returns one message per mistake, each naming its key, so the
workflow can stop before any job runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.columns import known_columns
from facecast.config.util import name_list
from facecast.fairness.targets import protocols as fairness_protocols
from facecast.quality.columns import select_columns


def _section(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    return dict(config.get(name) or {})


def enabled(config: Mapping[str, Any], name: str) -> bool:
    """Whether section ``name`` is switched on (default on)."""
    return bool(_section(config, name).get("enabled", True))


_names = name_list  # one definition: facecast.config.util.name_list


def _embed_models(config: Mapping[str, Any]) -> list[str]:
    return _names((config.get("embed") or {}).get("models"))


def models(config: Mapping[str, Any], section: str) -> list[str]:
    """``<section>.models``, else ``evaluate.models``, else every embed model."""
    return (_names(_section(config, section).get("models"))
            or _names((config.get("evaluate") or {}).get("models")) or _embed_models(config))


def protocols(config: Mapping[str, Any], section: str) -> list[str]:
    """``<section>.protocols``, else the fairness stage's protocols (``fairness.protocols``,
    else every evaluated protocol)."""
    return (_names(_section(config, section).get("protocols"))
            or fairness_protocols(config))


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


def quality_columns(config: Mapping[str, Any], ds: str) -> dict[str, str] | None:
    """Quality columns EDC ranks on ``ds`` (column -> direction; None when the attribute
    table's columns are not known before the run)."""
    known = known_columns(config).get(ds)
    if known is None:
        return None
    try:
        return select_columns(sorted(known), _section(config, "quality"))
    except KeyError:  # a pattern matching nothing: reported by the quality checks
        return None


def skip_reason(config: Mapping[str, Any], section: str, ds: str | None = None) -> str:
    """Why the enabled section ``quality`` / ``demographics`` / ``identification`` writes
    nothing (on ``ds``, or on any dataset); '' when it runs. The same words go into the
    run's plan, with the key that turns the section on."""
    if section in ("quality", "demographics") and not protocols(config, section):
        return (f"no evaluated protocol (add a benchmark, or set {section}.protocols or "
                "fairness.protocols)")
    if section == "quality":
        names = [ds] if ds else datasets(config, "quality")
        found = [quality_columns(config, d) for d in names]
        if found and all(f is not None and not f for f in found):
            return ("no quality column in the attribute table (add native or pyiqa to "
                    "attributes.scorers, or name columns in quality.columns)")
    if section == "demographics" and not fairness_groups(config).get("protected"):
        return ("no fairness groups (fairness is off or fairness.protected is empty; set "
                "fairness.protected)")
    if section == "identification" and not identification_pool(config):
        return "no benchmark to take the pool from (add a benchmark or set identification.pool)"
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs of the three sections for dataset ``ds``."""
    out: list[str] = []
    if (enabled(config, "quality") and ds in datasets(config, "quality")
            and not skip_reason(config, "quality", ds)):
        out += [f"results/{ds}/quality/{m}/{p}/ranking.csv"
                for m in models(config, "quality") for p in protocols(config, "quality")]
    if (enabled(config, "demographics") and ds in datasets(config, "demographics")
            and not skip_reason(config, "demographics", ds)):
        out += [f"results/{ds}/demographics/{m}/{p}/group_thresholds.csv"
                for m in models(config, "demographics")
                for p in protocols(config, "demographics")]
    if (enabled(config, "identification") and ds in datasets(config, "identification")
            and not skip_reason(config, "identification", ds)):
        out += [f"results/{ds}/identification/{m}/cmc.csv"
                for m in models(config, "identification")]
    return out


def report_kw(caption: str, category: str, subcategory: str, name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model output."""
    return {"caption": f"../report/{caption}.rst", "category": category,
            "subcategory": subcategory, "labels": {"model": "{model}", "file": name}}


