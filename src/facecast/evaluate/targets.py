"""Which analysis/evaluation files a config asks for (used by analysis.smk and evaluate.smk).

Pure functions of the (validated) config, so the rule files stay free of logic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from facecast.analysis.correlations import correlation_outputs


def _embed_models(config: Mapping[str, Any]) -> list[str]:
    return list((config.get("embed", {}) or {}).get("models", {}) or {})


def reference_model(config: Mapping[str, Any]) -> str:
    """The embed model that scores mining candidates ('' when none is configured)."""
    ref = (config.get("mining", {}) or {}).get("reference_model", "")
    models = _embed_models(config)
    return ref or (models[0] if models else "")


def mining_folds(config: Mapping[str, Any]) -> list[str]:
    """Fold names of every mined benchmark: ``0``..``n_folds-1`` (+ ``val``)."""
    m = config.get("mining", {}) or {}
    return [str(k) for k in range(int(m.get("n_folds", 10)))] + (
        ["val"] if m.get("val_fold", True) else [])


#: correlation outputs shown in the Snakemake report: kind -> (caption, label)
CORRELATION_REPORT = {"heatmap_png": ("correlation_heatmap", "heatmap"),
                      "thresholded_png": ("correlation_heatmap", "heatmap |r| >= min_abs_r"),
                      "filtered_tsv": ("correlation_pairs", "ranked pairs |r| >= min_abs_r")}


def correlation_items(config: Mapping[str, Any], ds: str = "{ds}"
                      ) -> list[tuple[str, str, str]]:
    """``(method, kind, path)`` of every file the correlations rule writes."""
    methods = (config.get("correlations", {}) or {}).get("methods", ["pearson"])
    return [(m, kind, str(p)) for m in methods
            for kind, p in correlation_outputs(f"results/{ds}/correlations", m).items()]


def correlation_files(config: Mapping[str, Any], ds: str = "{ds}") -> list[str]:
    """Every file the correlations rule writes."""
    return [p for _, _, p in correlation_items(config, ds)]


def benchmark_names(config: Mapping[str, Any]) -> list[str]:
    return list(config.get("benchmarks", {}) or {})


def name_regex(names: list[str]) -> str:
    """A wildcard constraint matching exactly ``names`` (never matches when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def analysis_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default analysis outputs of dataset ``ds`` (no mined benchmarks for an
    ``insightface_bin`` dataset: its identities are placeholders from the pair labels)."""
    out = correlation_files(config, ds)
    if _is_bin_dataset(config, ds):
        return out
    for bench in benchmark_names(config):
        out.append(f"results/{ds}/benchmarks/{bench}/description.txt")
        if reference_model(config):
            out.append(f"results/{ds}/benchmarks/{bench}/pairs.parquet")
            out.append(f"results/{ds}/benchmarks/{bench}/pair_stats.html")  # report table
    return out


def _is_bin_dataset(config: Mapping[str, Any], ds: str) -> bool:
    return (config.get("datasets", {}) or {}).get(ds, {}).get("kind") == "insightface_bin"


def imports(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict((config.get("evaluate", {}) or {}).get("imports", {}) or {})


def _import_applies(config: Mapping[str, Any], name: str, ds: str) -> bool:
    spec = imports(config)[name]
    wanted = spec.get("datasets")
    if not wanted and spec.get("format") == "insightface_bin":
        # a .bin protocol pairs the images of the insightface_bin dataset made from the
        # same file: by default it applies to those datasets only
        from pathlib import Path

        name_ = Path(str(spec.get("path", ""))).name
        return (config["datasets"][ds].get("kind") == "insightface_bin"
                and Path(str(config["datasets"][ds].get("path", ""))).name == name_)
    return ds in (wanted or list(config["datasets"]))


def eval_models(config: Mapping[str, Any]) -> list[str]:
    """Embed models to evaluate: ``evaluate.models``, or every configured embed model."""
    return list((config.get("evaluate", {}) or {}).get("models", []) or []) or \
        _embed_models(config)


def eval_benchmarks(config: Mapping[str, Any], ds: str) -> list[str]:
    """Protocols evaluated on ``ds``: ``evaluate.benchmarks``, or mined + ``lfw`` + imports.

    Listed names that do not apply to ``ds`` (``lfw`` without a pairs file, an import
    restricted to other datasets) are skipped.
    """
    has_lfw = bool(config["datasets"][ds].get("pairs"))
    benches, imps = benchmark_names(config), imports(config)
    listed = (config.get("evaluate", {}) or {}).get("benchmarks", []) or []
    if listed:
        return [b for b in listed if (b in benches and not _is_bin_dataset(config, ds))
                or (b == "lfw" and has_lfw)
                or (b in imps and _import_applies(config, b, ds))]
    out = list(benches) if reference_model(config) and not _is_bin_dataset(config, ds) else []
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
