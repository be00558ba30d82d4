"""The DAG side of the evaluate stage (workflow/rules/evaluate.smk): which protocols each
dataset is evaluated on, the files the summary reads, the protocol wildcards and the part
of the config one evaluation job depends on.

Pure functions of the (validated) config, so the rule files stay free of logic. The mined
benchmarks and the reference model come from :mod:`facecast.analysis.targets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.analysis.targets import (
    benchmark_names,
    embed_models,
    is_bin_dataset,
    reference_model,
)
from facecast.datasets.targets import name_regex

#: the ``evaluate`` config keys one evaluation job depends on (its rule's params)
JOB_KEYS = ("fars", "thresholds", "include_val", "n_folds")


def job_config(evaluate_cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The part of the ``evaluate`` section one (model, benchmark) job reads, plus the seed.

    Only these go into the rule's params, so that editing ``evaluate.imports.<x>`` (or the
    model/benchmark lists) reruns only the jobs it concerns.
    """
    return {**{k: evaluate_cfg[k] for k in JOB_KEYS if k in evaluate_cfg}, "seed": int(seed)}


def imports(config: Mapping[str, Any]) -> dict[str, Any]:
    """``evaluate.imports``: protocol name -> import spec."""
    return dict((config.get("evaluate", {}) or {}).get("imports", {}) or {})


def _import_applies(config: Mapping[str, Any], name: str, ds: str) -> bool:
    spec = imports(config)[name]
    wanted = spec.get("datasets")
    if not wanted and spec.get("format") == "insightface_bin":
        # a .bin protocol pairs the images of the insightface_bin dataset made from the
        # same file: by default it applies to those datasets only
        name_ = Path(str(spec.get("path", ""))).name
        return (config["datasets"][ds].get("kind") == "insightface_bin"
                and Path(str(config["datasets"][ds].get("path", ""))).name == name_)
    return ds in (wanted or list(config["datasets"]))


def import_regex(config: Mapping[str, Any]) -> str:
    """The ``{proto}`` wildcard constraint of rule ``import_protocol``: the imports."""
    return name_regex(imports(config))


def protocol_regex(config: Mapping[str, Any]) -> str:
    """The ``{bench}`` wildcard constraint of rule ``evaluate_benchmark``: the mined
    benchmarks, ``lfw`` and the imports."""
    return name_regex([*benchmark_names(config), "lfw", *imports(config)])


def eval_models(config: Mapping[str, Any]) -> list[str]:
    """Embed models to evaluate: ``evaluate.models``, or every configured embed model."""
    return list((config.get("evaluate", {}) or {}).get("models", []) or []) or \
        embed_models(config)


def eval_benchmarks(config: Mapping[str, Any], ds: str) -> list[str]:
    """Protocols evaluated on ``ds``: ``evaluate.benchmarks``, or mined + ``lfw`` + imports.

    Listed names that do not apply to ``ds`` (``lfw`` without a pairs file, an import
    restricted to other datasets) are skipped.
    """
    has_lfw = bool(config["datasets"][ds].get("pairs"))
    benches, imps = benchmark_names(config), imports(config)
    listed = (config.get("evaluate", {}) or {}).get("benchmarks", []) or []
    if listed:
        return [b for b in listed if (b in benches and not is_bin_dataset(config, ds))
                or (b == "lfw" and has_lfw)
                or (b in imps and _import_applies(config, b, ds))]
    out = list(benches) if reference_model(config) and not is_bin_dataset(config, ds) else []
    if has_lfw:
        out.append("lfw")
    return out + [n for n in imps if _import_applies(config, n, ds)]


def evaluated_protocols(config: Mapping[str, Any]) -> list[str]:
    """Every protocol evaluated on some dataset (``evaluate.benchmarks``, else the mined
    benchmarks, ``lfw`` and imports that apply), in order: what later stages assess when
    their own ``protocols`` list is empty."""
    listed = [str(b) for b in (config.get("evaluate", {}) or {}).get("benchmarks", []) or []]
    if listed:
        return listed
    out: list[str] = []
    for ds in config.get("datasets", {}) or {}:
        out += [b for b in eval_benchmarks(config, ds) if b not in out]
    return out


def protocol_path(config: Mapping[str, Any], ds: str, bench: str) -> str:
    """The pair protocol Parquet of benchmark ``bench`` on ``ds``."""
    if bench in benchmark_names(config):
        return f"results/{ds}/benchmarks/{bench}/pairs.parquet"
    if bench == "lfw":
        return f"results/{ds}/protocols/pairs.parquet"
    return f"results/{ds}/protocols/{bench}.parquet"


def metric_files(config: Mapping[str, Any], ds: str) -> list[str]:
    """Every per-(model, benchmark) metrics file the summary of ``ds`` reads."""
    return [f"results/{ds}/eval/{m}/{b}/metrics.parquet"
            for m in eval_models(config) for b in eval_benchmarks(config, ds)]


def evaluate_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default evaluation outputs of ``ds`` (the summary pulls in every benchmark)."""
    if not eval_models(config) or not eval_benchmarks(config, ds):
        return []
    return [f"results/{ds}/eval/summary.md", f"results/{ds}/eval/summary.html"]
