"""The DAG side of the compare stage (rule ``compare`` in workflow/rules/compare.smk):
which models and benchmarks a dataset's comparison reads. Pure functions of the config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.fair_sets import score_models
from facecast.config.util import name_list
from facecast.evaluate.targets import eval_benchmarks, eval_models, model_applies
from facecast.slices.targets import accuracy_config, mitigated_applies, scores_input, split_model

#: where rule ``compare`` writes
COMPARE_DIR = "results/{ds}/compare"


def _section(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get("compare") or {})


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the ``compare`` section is on (default on)."""
    return bool(_section(config).get("enabled", True))


def models(config: Mapping[str, Any]) -> list[str]:
    """``compare.models``, else the evaluated models (with BFW's score models)."""
    own = eval_models(config)
    return (name_list(_section(config).get("models"))
            or own + [m for m in score_models(config) if m not in own])


def benchmarks(config: Mapping[str, Any], ds: str) -> list[str]:
    """``compare.benchmarks`` evaluated on ``ds``, else every benchmark evaluated there."""
    here = eval_benchmarks(config, ds)
    wanted = name_list(_section(config).get("benchmarks"))
    return [b for b in wanted if b in here] if wanted else here


def score_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """Rule inputs: ``<benchmark>/<model>`` -> scored pairs (a mitigated model,
    ``dlib+fsn``, on the benchmarks the mitigation stage transforms)."""
    return {f"{b}/{m}": scores_input(ds, m, b)
            for b in benchmarks(config, ds) for m in models(config)
            if mitigated_applies(config, ds, m, b)
            and model_applies(config, ds, split_model(m)[0], b)}


def accuracy(config: Mapping[str, Any]) -> dict[str, Any]:
    """The 10-fold accuracy settings of the job (exact thresholds with a mitigated model:
    :func:`facecast.slices.targets.accuracy_config`)."""
    return accuracy_config(config, models(config))


def skip_reason(config: Mapping[str, Any]) -> str:
    """Why the enabled section writes nothing; '' when it runs."""
    if len(models(config)) < 2:
        return "fewer than two evaluated models (set evaluate.models or compare.models)"
    return ""


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs for ``ds``: the leaderboard (none with fewer than two models)."""
    if not enabled(config) or skip_reason(config) or not benchmarks(config, ds):
        return []
    return [f"results/{ds}/compare/leaderboard.md"]


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a compare output."""
    return {"caption": "../report/compare.rst", "category": "Model comparisons",
            "subcategory": "{ds}", "labels": {"file": name}}
