"""What the analysis rules call: the template attribute table of an IJB dataset
(:func:`write_template_attributes`, rule ``template_attributes``, ``analysis.level:
template``), attribute correlations (:func:`write_correlations`, rule
``correlations``), a CAST benchmark subset (:func:`build_benchmark_subset`, rule
``benchmark_subset``) and one benchmark's pair mining with its exports
(:func:`mine_benchmark`, rule ``mine_pairs``).

:func:`mine_benchmark` reads a benchmark subset and the reference model's embeddings, mines
the pairs (:func:`facecast.analysis.mining.mine_pairs`) and writes ``pairs.parquet``,
``mining_report.json``, the per-fold ``pair_stats.tsv`` and ``pair_scores.png`` (for the
report), the CAST ``.list`` files and ``pairs.txt``. The report holds no wall-clock
figures, so reruns give identical files; the mining time goes to the job's log. Subset
images without a reference embedding (status not ``ok`` in the embed shards) cannot be
scored; they are counted in the report (``n_without_embedding``) and left out of the pool.

Seeds: the benchmark's generator is seeded with ``[config seed, crc32(benchmark name)]``, so
benchmarks differ from each other and each is reproducible on its own.

Memory: a subset larger than ``mining.max_pool_images`` (the ``random`` benchmark of a
WebFace-scale dataset is tens of millions of images) is sampled by whole identities
before any embedding is read (:func:`facecast.analysis.mining.pool_sample`); the
embeddings are read shard by shard, keeping only the pool's rows, and the manifest only
for the identities of the mined pairs.
"""

from __future__ import annotations

import json
import logging
import os
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.analysis.cast_filters import build_array_subset
from facecast.analysis.cast_tuples import argsort_platform, parse_cast_filters
from facecast.analysis.correlations import write_correlations
from facecast.analysis.exports import image_numbers, write_cast_lists, write_lfw_pairs
from facecast.analysis.filtering import DEFAULT_STATUSES, build_subset, parse_filters
from facecast.analysis.mining_config import MiningConfig, MiningShortfall
from facecast.analysis.pair_stats import pair_statistics, plot_pair_scores
from facecast.analysis.template_level import template_attribute_table
from facecast.datasets.ijb import IMAGE_DIR, read_tid_mid
from facecast.embed.read import load_embeddings
from facecast.faces.cuda_fp32 import cuda_fp32
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet

__all__ = ["PER_BENCHMARK_MINING_KEYS", "benchmark_mining_config", "benchmark_seed",
           "build_array_subset", "build_benchmark_subset", "build_train_subset",
           "export_benchmark_bin", "mine_benchmark", "write_correlations",
           "write_template_attributes"]

log = logging.getLogger(__name__)

# Mining keys a benchmark may override (the schema's benchmarks.<name>.mining lists the same;
# the fold layout stays global: it names the rule outputs)
PER_BENCHMARK_MINING_KEYS = ("mode", "band", "band_mode", "n_genuine", "n_impostor",
                             "max_image_uses", "on_shortfall", "block_size", "max_candidates",
                             "quantile_sample", "genuine_oversample", "genuine_chunk_rows",
                             "max_pool_images")


def benchmark_seed(seed: int, bench: str) -> list[int]:
    """The seed sequence of benchmark ``bench``: ``[seed, crc32(name)]``."""
    return [int(seed), zlib.crc32(bench.encode())]


def benchmark_mining_config(mining: Mapping[str, Any], bench_cfg: Mapping[str, Any]
                            ) -> MiningConfig:
    """Global ``mining`` settings with the benchmark's own ``mining`` overrides applied."""
    over = dict(bench_cfg.get("mining", {}) or {})
    bad = [k for k in over if k not in PER_BENCHMARK_MINING_KEYS]
    if bad:
        raise ValueError(f"mining keys {bad} cannot be set per benchmark; allowed: "
                         f"{list(PER_BENCHMARK_MINING_KEYS)}")
    return MiningConfig.from_config({**mining, **over})


def build_benchmark_subset(attributes_path: str | os.PathLike,
                           filters: Sequence[Mapping[str, Any]],
                           subset_path: str | os.PathLike, description_path: str | os.PathLike,
                           *, bench: str, rank_method: str = "facecast",
                           cast_filters: Sequence[Sequence[Any]] = (),
                           cast_ties: str = "argsort",
                           statuses: Sequence[str] = DEFAULT_STATUSES,
                           provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Benchmark ``bench``'s filters (its config's ``filters`` list, ranked by
    ``rank_method`` unless a filter says otherwise, then its CAST tuples ``cast_filters``,
    :mod:`facecast.analysis.cast_filters`) over the attribute table -> ``subset.parquet`` +
    ``description.txt``; return the counts (:func:`facecast.analysis.filtering.build_subset`)."""
    parsed = (parse_filters(filters, bench, rank_method)
              + parse_cast_filters(cast_filters, bench, cast_ties))
    # the platform of numpy's argsort decides which tied rows a CAST rank cut keeps
    return build_subset(attributes_path, parsed, subset_path, description_path,
                        statuses=statuses, provenance={**(provenance or {}),
                                                       "argsort_platform": argsort_platform()})


def write_template_attributes(tid_mid_path: str | os.PathLike,
                              attributes_path: str | os.PathLike, out_path: str | os.PathLike,
                              *, majority_columns: Sequence[str] = (),
                              statuses: Sequence[str] = DEFAULT_STATUSES,
                              provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per template of an IJB release (its ``<variant>_face_tid_mid.txt``) with
    its images' mean / majority attributes (:mod:`facecast.analysis.template_level`) ->
    ``template_attributes.parquet`` (provenance ``level: template``); return the table."""
    tid = read_tid_mid(tid_mid_path)
    members = pd.DataFrame({"image_id": IMAGE_DIR + "/" + tid["name"].astype(str),
                            "template_id": tid["template_id"].to_numpy(np.int64)})
    attributes = read_parquet(attributes_path)
    table = template_attribute_table(members, attributes, majority_columns=majority_columns,
                                     statuses=statuses)
    prov = dict(provenance or {})
    prov.update({"stage": "template_attributes", "level": "template",
                 "aggregation": "numeric: mean; categorical and majority_columns: majority",
                 "majority_columns": list(majority_columns), "statuses": list(statuses),
                 "n_templates": int(len(table)),
                 "n_no_ok_image": int((table["status"] != "ok").sum())})
    write_parquet(table, out_path, provenance=prov)
    n_bad = prov["n_no_ok_image"]
    log.info("%d templates from %d image lines; %d without an ok image%s", len(table),
             len(members), n_bad, " (status no_ok_image)" if n_bad else "")
    return table


def mine_benchmark(subset_path: str | os.PathLike, embed_paths: Iterable[str | os.PathLike],
                   manifest_path: str | os.PathLike, out_dir: str | os.PathLike, *, bench: str,
                   cfg: MiningConfig, seed: int,
                   provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Mine benchmark ``bench`` into ``out_dir``; return the mining report."""
    # the mining modules need torch: imported here, so correlations and subset jobs skip it
    from facecast.analysis.exhaustive import describe_all
    from facecast.analysis.mining import mine_pairs, pool_sample

    out_dir = Path(out_dir)
    if cfg.mode == "cast_random":
        return _cast_random_benchmark(subset_path, manifest_path, out_dir, bench=bench,
                                      cfg=cfg, seed=seed, provenance=provenance)
    subset = read_parquet(subset_path, columns=["image_id", "identity"])
    pool = pool_sample(subset["identity"], cfg.max_pool_images,
                       np.random.default_rng([*benchmark_seed(seed, bench), 1]))
    n_subset, sampled = len(subset), not pool.all()
    subset = subset[pool]
    if sampled:
        log.info("%s: subset of %d images sampled to %d images of %d identities "
                 "(mining.max_pool_images)", bench, n_subset, len(subset),
                 subset["identity"].nunique())
    ids, emb = load_embeddings(embed_paths, subset["image_id"].astype(str))
    order = np.argsort(ids, kind="mergesort")            # pool order independent of shards
    ids, emb = ids[order], emb[order]
    ident = subset.set_index("image_id")["identity"].astype(str)
    identity = pd.Categorical(ident.reindex(ids))
    n_missing = len(subset) - len(ids)
    log.info("%s: pool %d images, %d with a reference embedding", bench, len(subset), len(ids))
    t0 = time.perf_counter()
    try:
        with cuda_fp32(cfg.device):  # fp32 scores on CUDA: no TF32 (facecast.faces.cuda_fp32)
            result = mine_pairs(emb, identity, ids, cfg, benchmark_seed(seed, bench))
    except MiningShortfall as exc:
        exc.report["n_without_embedding"] = int(n_missing)
        log.error("mining report:\n%s", json.dumps(exc.report, indent=1, default=str))
        raise
    report = {"benchmark": bench, "n_subset": int(n_subset),
              "n_pool_sampled": int(len(subset)) if sampled else None,
              "n_without_embedding": int(n_missing), **result.report}
    prov = dict(provenance or {})
    folds = report.get("folds_formed") or (
        f"mined fold by fold: {cfg.n_genuine} genuine + {cfg.n_impostor} impostor pairs each")
    prov.update({"stage": "mining", "benchmark": bench, "mode": cfg.mode,
                 "band": report["band"], "shortfall": report["shortfall"], "folds": folds,
                 "reference_model": cfg.extra.get("reference_model", "")})
    _write_pairs(result.pairs, report, prov, manifest_path, out_dir, bench=bench, cfg=cfg)
    if cfg.mode == "all":
        log.info("%s: %s; %.2f s", bench, describe_all(report), time.perf_counter() - t0)
    else:
        log.info("%s: %d genuine + %d impostor pairs in band %s%s, mined in %.2f s", bench,
                 report["genuine"]["selected"], report["impostor"]["selected"], report["band"],
                 " (SHORTFALL)" if report["shortfall"] else "", time.perf_counter() - t0)
    return report


def _write_pairs(pairs: pd.DataFrame, report: Mapping[str, Any], prov: Mapping[str, Any],
                 manifest_path: str | os.PathLike, out_dir: Path, *, bench: str,
                 cfg: MiningConfig) -> None:
    """``pairs.parquet``, the report, per-fold stats and plot, CAST lists, ``pairs.txt``."""
    write_parquet(pairs, out_dir / "pairs.parquet", provenance=prov)
    write_text(out_dir / "mining_report.json", json.dumps(report, indent=1, default=str) + "\n")
    stats = pair_statistics(pairs, cfg.fold_names)
    write_text(out_dir / "pair_stats.tsv", stats.to_csv(sep="\t", index=False,
                                                        float_format="%.4f"))
    title = (f"{bench}: CAST random pairs (no reference scores)" if cfg.mode == "cast_random"
             else f"{bench}: mined pairs (band dashed)")
    plot_pair_scores(pairs, report["band"], out_dir / "pair_scores.png", title)
    # only the rows of the pairs' identities (LFW numbers count within an identity)
    identities = sorted(set(pairs["identity_a"]) | set(pairs["identity_b"]))
    manifest = read_parquet(manifest_path, columns=["image_id", "path", "identity"],
                            filters=[("identity", "in", identities)] if identities else None)
    paths = dict(zip(manifest["image_id"], manifest["path"], strict=True))
    write_cast_lists(pairs, paths, out_dir, cfg.fold_names)
    write_lfw_pairs(pairs, image_numbers(manifest), out_dir / "pairs.txt",
                    [f for f in cfg.fold_names if f != "val"])


def _cast_random_benchmark(subset_path: str | os.PathLike, manifest_path: str | os.PathLike,
                           out_dir: Path, *, bench: str, cfg: MiningConfig, seed: int,
                           provenance: Mapping[str, Any] | None) -> dict[str, Any]:
    """``mining.mode: cast_random``: CAST's random pairs of the subset, no embeddings
    (:mod:`facecast.analysis.cast_random`)."""
    from facecast.analysis.cast_random import cast_random_pairs

    subset = read_parquet(subset_path, columns=["image_id", "identity"])
    result = cast_random_pairs(subset["image_id"], subset["identity"], cfg,
                               benchmark_seed(seed, bench))
    report = {"benchmark": bench, "n_subset": int(len(subset)), **result.report}
    if report["shortfall"] and cfg.on_shortfall == "fail":
        log.error("mining report:\n%s", json.dumps(report, indent=1, default=str))
        raise MiningShortfall(
            f"{bench}: the subset gives {report['genuine']['selected']} genuine (of "
            f"{report['genuine']['needed']}) and {report['impostor']['selected']} impostor "
            f"(of {report['impostor']['needed']}) CAST random pairs; lower mining.n_genuine "
            "/ n_impostor or set on_shortfall: write", report)
    prov = dict(provenance or {})
    prov.update({"stage": "mining", "benchmark": bench, "mode": cfg.mode, "band": None,
                 "shortfall": report["shortfall"], "folds": report["folds_formed"],
                 "reference_model": ""})
    _write_pairs(result.pairs, report, prov, manifest_path, out_dir, bench=bench, cfg=cfg)
    log.info("%s: %s", bench, report["folds_formed"])
    return report


def build_train_subset(subset_path: str | os.PathLike, manifest_path: str | os.PathLike,
                       attributes_path: str | os.PathLike | None, spec: Mapping[str, Any],
                       cfg: Mapping[str, Any], out_dir: str | os.PathLike, *, name: str,
                       dataset_dir: str | os.PathLike, seed: int,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Training subset ``name`` (``export.train_subsets.<name>`` = ``cfg``) of a benchmark's
    subset -> ``out_dir`` (:mod:`facecast.analysis.train_subsets`); return the report.

    ``attributes_path`` gives the ``balance_by`` column of image datasets; a
    ``cast_arrays`` dataset reads it from its array (the subset's ``row``).
    """
    from facecast.analysis.cast_filters import read_column
    from facecast.analysis.train_subsets import (
        file_fetcher,
        select_training_subset,
        write_training_subset,
    )
    from facecast.datasets.cast_arrays import as_str, read_column_names
    from facecast.datasets.targets import dataset_root
    from facecast.io.parquet_io import read_provenance

    arrays = spec.get("kind") == "cast_arrays"
    pool = read_parquet(subset_path, columns=["image_id", "identity"] + (["row"] if arrays
                                                                          else []))
    col = str(cfg.get("balance_by") or "")
    if col and arrays:
        j = read_column_names(spec["columns"]).index(col)
        pool[col] = read_column(spec["attributes"], j)[pool["row"].to_numpy()]
    elif col:
        vals = read_parquet(attributes_path, columns=["image_id", col])
        pool[col] = pool["image_id"].map(vals.set_index("image_id")[col])
    seq = [int(cfg.get("seed") if cfg.get("seed") is not None else seed),
           zlib.crc32(name.encode())]
    sel, report = select_training_subset(
        pool, balance_by=col, per_class=cfg.get("per_class", "equal"),
        min_images_per_identity=int(cfg.get("min_images_per_identity", 2)),
        max_images_per_identity=int(cfg.get("max_images_per_identity", 0)), seed=seq)
    if arrays:    # paths.npy's path (a nan_attribute row's image_id is <path>//row<n>)
        sel["path"] = as_str(np.load(spec["paths"], mmap_mode="r")
                             [sel["row"].to_numpy()]).tolist()
    else:
        ids = sel["image_id"].tolist()
        m = read_parquet(manifest_path, columns=["image_id", "path"],
                         filters=[("image_id", "in", ids)] if ids else None)
        sel["path"] = sel["image_id"].map(m.set_index("image_id")["path"])
    fetch = None
    if not arrays or spec.get("root"):
        root = dataset_root(spec, dataset_dir)
        fetch = file_fetcher(root, read_provenance(manifest_path).get("containers"))
    report = {"name": name, "benchmark": cfg.get("benchmark"),
              "format": cfg.get("format", "recordio"), **report}
    prov = dict(provenance or {})
    prov.update({"stage": "train_subset", "name": name, "seed": seq})
    write_training_subset(sel, str(cfg.get("format", "recordio")), out_dir, fetch, report,
                          provenance=prov)
    log.info("training subset %s: %d images of %d identities%s", name, report["n_images"],
             report["n_identities"], " (SHORTFALL)" if report.get("shortfall") else "")
    return report


def export_benchmark_bin(sources: Mapping[str, str | os.PathLike],
                         faces_index: str | os.PathLike, out_bin: str | os.PathLike, *,
                         name: str, cfg: Mapping[str, Any], seed: int,
                         provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``.bin`` export ``name`` (``export.bins.<name>`` = ``cfg``; rule ``export_bin``) of
    the benchmarks' ``pairs.parquet`` (``sources``, in order) with the crops of the faces
    shards ``faces_index`` lists -> ``out_bin`` and its sidecars
    (:func:`facecast.analysis.bins.export_bin`); return the ``.json`` sidecar's content."""
    from facecast.analysis.bins import export_bin
    from facecast.io.shard_index import shard_files

    return export_bin(sources, shard_files(faces_index), out_bin, name=name, cfg=cfg,
                      seed=seed, provenance=provenance)
