"""The DAG side of the analysis stage (workflow/rules/analysis.smk): which correlation,
benchmark-subset and mined-pair files a config asks for, the benchmark wildcard, the
reference model and the mined folds.

Pure functions of the (validated) config, so the rule files stay free of logic; imported
when the Snakefile is parsed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.datasets.ijb import meta_files
from facecast.datasets.targets import arrays_only, cast_array_inputs, name_regex, pooled

#: where rule ``template_attributes`` writes an IJB dataset's template attribute table
TEMPLATE_ATTRIBUTES = "results/{ds}/template_attributes.parquet"


def correlation_outputs(out_dir: str | os.PathLike, method: str) -> dict[str, Path]:
    """The files :func:`facecast.analysis.correlations.write_correlations` writes for
    ``method`` (names the rule declares)."""
    d = Path(out_dir)
    names = {
        "matrix": f"{method}_matrix.parquet",
        "pairs": f"{method}_pairs.parquet",
        "pairs_tsv": f"{method}_pairs.tsv",
        "filtered": f"{method}_pairs_filtered.parquet",
        "filtered_tsv": f"{method}_pairs_filtered.tsv",
        "filtered_md": f"{method}_pairs_filtered.md",
        "heatmap_png": f"{method}_heatmap.png",
        "heatmap_svg": f"{method}_heatmap.svg",
        "thresholded_png": f"{method}_heatmap_thresholded.png",
        "thresholded_svg": f"{method}_heatmap_thresholded.svg",
    }
    return {k: d / v for k, v in names.items()}


def analysis_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``analysis`` section (``level``, ``template_majority``)."""
    return config.get("analysis", {}) or {}


def analysis_level(config: Mapping[str, Any], ds: str) -> str:
    """``template`` when ``analysis.level: template`` and ``ds`` is an IJB release (kind
    ``ijb``: its templates are known); ``image`` otherwise."""
    spec = (config.get("datasets", {}) or {}).get(ds, {}) or {}
    if analysis_section(config).get("level", "image") == "template" and \
            spec.get("kind") == "ijb":
        return "template"
    return "image"


def template_level_datasets(config: Mapping[str, Any]) -> list[str]:
    """The datasets whose analysis runs over templates."""
    return [ds for ds in (config.get("datasets", {}) or {})
            if analysis_level(config, ds) == "template"]


def image_level_datasets(config: Mapping[str, Any]) -> list[str]:
    """The datasets whose analysis runs over images (every other dataset)."""
    return [ds for ds in (config.get("datasets", {}) or {})
            if analysis_level(config, ds) == "image"]


def attribute_table(config: Mapping[str, Any], ds: str) -> str:
    """The table correlations and benchmark subsets of ``ds`` read: the template attribute
    table at template level, else ``attributes.parquet``."""
    if analysis_level(config, ds) == "template":
        return TEMPLATE_ATTRIBUTES.format(ds=ds)
    return f"results/{ds}/attributes.parquet"


def template_attribute_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """Inputs of rule ``template_attributes``: the image attribute table and the release's
    ``<variant>_face_tid_mid.txt`` (template membership)."""
    spec = config["datasets"][ds]
    tid_mid = meta_files(spec["root"], str(spec.get("variant") or "ijbc"))["tid_mid"]
    return {"attributes": f"results/{ds}/attributes.parquet", "tid_mid": str(tid_mid)}


def pool_statuses(config: Mapping[str, Any], ds: str) -> list[str]:
    """Statuses of the rows that may enter a benchmark of ``ds``: ``mining.statuses`` over
    images; ``[ok]`` over templates (the image statuses made the template's status)."""
    if analysis_level(config, ds) == "template":
        return ["ok"]
    return list((config.get("mining", {}) or {}).get("statuses", ["ok"]))


def embed_models(config: Mapping[str, Any]) -> list[str]:
    """Names of the configured embed models (``embed.models``), in config order."""
    return list((config.get("embed", {}) or {}).get("models", {}) or {})


def reference_model(config: Mapping[str, Any]) -> str:
    """The embed model that scores mining candidates ('' when none is configured)."""
    ref = (config.get("mining", {}) or {}).get("reference_model", "")
    models = embed_models(config)
    return ref or (models[0] if models else "")


def mining_folds(config: Mapping[str, Any]) -> list[str]:
    """Fold names of every mined benchmark: ``0``..``n_folds-1`` (+ ``val``)."""
    m = config.get("mining", {}) or {}
    return [str(k) for k in range(int(m.get("n_folds", 10)))] + (
        ["val"] if m.get("val_fold", True) else [])


def mining_uses_gpu(config: Mapping[str, Any]) -> bool:
    """Whether mining jobs ask the scheduler for a GPU (``mining.device: cuda[:N]``)."""
    return str((config.get("mining", {}) or {}).get("device", "auto")).startswith("cuda")


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
    """The mined benchmarks (``benchmarks``), in config order."""
    return list(config.get("benchmarks", {}) or {})


def benchmark_regex(config: Mapping[str, Any]) -> str:
    """The ``{bench}`` wildcard constraint of the mining rules: exactly the benchmarks."""
    return name_regex(benchmark_names(config))


def is_bin_dataset(config: Mapping[str, Any], ds: str) -> bool:
    """Whether ``ds`` is an ``insightface_bin`` dataset (its identities are placeholders
    from the pair labels, so nothing is mined on it)."""
    return (config.get("datasets", {}) or {}).get(ds, {}).get("kind") == "insightface_bin"


def bench_mode(config: Mapping[str, Any], bench: str) -> str:
    """The mining mode of benchmark ``bench`` (its own ``mining.mode``, else the global)."""
    own = ((config.get("benchmarks", {}) or {}).get(bench, {}) or {}).get("mining", {}) or {}
    return str(own.get("mode") or (config.get("mining", {}) or {}).get("mode", "band"))


def mine_inputs(config: Mapping[str, Any], ds: str, bench: str, embed_index: str
                ) -> dict[str, str]:
    """Inputs of rule ``mine_pairs``: subset and manifest, plus the reference model's
    embed index unless the benchmark draws CAST random pairs (no embeddings needed)."""
    out = {"subset": f"results/{ds}/benchmarks/{bench}/subset.parquet",
           "manifest": f"results/{ds}/manifest.parquet"}
    if bench_mode(config, bench) != "cast_random":
        out["embeddings"] = embed_index.format(ds=ds, model=reference_model(config))
    return out


def array_subset_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """Inputs of rule ``cast_benchmark_subset``: the manifest (row statuses, exclusions) and
    CAST's arrays."""
    return {"manifest": f"results/{ds}/manifest.parquet", **cast_array_inputs(config, ds)}


def analysis_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default analysis outputs of dataset ``ds`` (no mined benchmarks for an
    ``insightface_bin`` dataset: its identities are placeholders from the pair labels; a
    ``cast_arrays`` dataset without ``root`` has no embeddings, so only its
    ``cast_random`` benchmarks get pairs; with ``root`` its pools are embedded). At
    template level (:func:`analysis_level`) the template attribute table, correlations
    and benchmark subsets of templates: no mined pairs (templates have no embedding
    here; the templates stage scores the release's own template pairs)."""
    out = correlation_files(config, ds)
    if is_bin_dataset(config, ds):
        return out
    if analysis_level(config, ds) == "template":
        return [TEMPLATE_ATTRIBUTES.format(ds=ds), *out] + [
            f"results/{ds}/benchmarks/{bench}/description.txt"
            for bench in benchmark_names(config)]
    for bench in benchmark_names(config):
        out.append(f"results/{ds}/benchmarks/{bench}/description.txt")
        mode = bench_mode(config, bench)
        embeddable = not arrays_only(config, ds) or pooled(config, ds)
        if mode == "cast_random" or (reference_model(config) and embeddable):
            out.append(f"results/{ds}/benchmarks/{bench}/pairs.parquet")
            out.append(f"results/{ds}/benchmarks/{bench}/pair_stats.html")  # report table
    return out


#: where training subset ``<name>`` of dataset ``<ds>`` goes
TRAIN_SUBSET_DIR = "results/{ds}/train_subsets/{name}"


def train_subsets(config: Mapping[str, Any]) -> dict[str, Any]:
    """``export.train_subsets``: name -> its config block."""
    return dict((config.get("export", {}) or {}).get("train_subsets", {}) or {})


def train_subset_regex(config: Mapping[str, Any], fmt: str) -> str:
    """The ``{name}`` wildcard of the rule writing format ``fmt``."""
    return name_regex([n for n, c in train_subsets(config).items()
                       if (c or {}).get("format", "recordio") == fmt])


def train_subset_inputs(config: Mapping[str, Any], ds: str, name: str) -> dict[str, str]:
    """Inputs of a training-subset job: the benchmark's subset, the manifest, and the
    attribute table when an image dataset balances by a column."""
    cfg = train_subsets(config)[name] or {}
    out = {"subset": f"results/{ds}/benchmarks/{cfg['benchmark']}/subset.parquet",
           "manifest": f"results/{ds}/manifest.parquet"}
    if cfg.get("balance_by") and not arrays_only(config, ds):
        out["attributes"] = f"results/{ds}/attributes.parquet"
    return out


def train_subset_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Each training subset's ``selection.parquet`` (none on an ``insightface_bin``
    dataset, whose identities are placeholders, nor on a dataset analysed over
    templates: its subsets hold templates, not images)."""
    if is_bin_dataset(config, ds) or analysis_level(config, ds) == "template":
        return []
    return [f"{TRAIN_SUBSET_DIR.format(ds=ds, name=n)}/selection.parquet"
            for n in train_subsets(config)]


#: where ``.bin`` export ``<name>`` of dataset ``<ds>`` goes (sidecars beside it)
BIN_EXPORT = "results/{ds}/bins/{name}.bin"


def bin_exports(config: Mapping[str, Any]) -> dict[str, Any]:
    """``export.bins``: name -> its config block."""
    return dict((config.get("export", {}) or {}).get("bins", {}) or {})


def bin_export_datasets(config: Mapping[str, Any]) -> list[str]:
    """Datasets a ``.bin`` export is written for: mined pairs (image level, not a ``.bin``
    dataset) and aligned crops (faces shards: not a ``cast_arrays`` dataset without
    ``root``)."""
    return [ds for ds in image_level_datasets(config)
            if not is_bin_dataset(config, ds) and (not arrays_only(config, ds)
                                                   or pooled(config, ds))]


def bin_export_ready(config: Mapping[str, Any], ds: str, name: str) -> bool:
    """Whether every benchmark of export ``name`` gets mined pairs on ``ds`` (what
    :func:`analysis_targets` asks for)."""
    benches = list((bin_exports(config).get(name) or {}).get("benchmarks") or [])
    if ds not in bin_export_datasets(config) or not benches:
        return False
    return all(bench_mode(config, b) == "cast_random" or bool(reference_model(config))
               for b in benches)


def bin_export_inputs(config: Mapping[str, Any], ds: str, name: str,
                      faces_index: str) -> dict[str, str]:
    """Inputs of rule ``export_bin``: each benchmark's ``pairs.parquet`` (key
    ``pairs_<benchmark>``, in the export's order) and the faces index (the crops)."""
    cfg = bin_exports(config)[name] or {}
    out = {f"pairs_{b}": f"results/{ds}/benchmarks/{b}/pairs.parquet"
           for b in cfg.get("benchmarks") or []}
    out["faces"] = faces_index.format(ds=ds)
    return out


def bin_export_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Each ``.bin`` export of ``ds`` (its ``.json`` and ``.pairs.parquet`` come along)."""
    return [BIN_EXPORT.format(ds=ds, name=n) for n in bin_exports(config)
            if bin_export_ready(config, ds, n)]
