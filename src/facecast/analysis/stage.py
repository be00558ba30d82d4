"""What the analysis rules call: one benchmark's pair mining with its exports.

:func:`mine_benchmark` reads a benchmark subset and the reference model's embeddings, mines
the pairs (:func:`facecast.analysis.mining.mine_pairs`) and writes ``pairs.parquet``,
``mining_report.json``, the CAST ``.list`` files and ``pairs.txt``. Subset images without
a reference embedding (status not ``ok`` in the embed shards) cannot be scored; they are
counted in the report (``n_without_embedding``) and left out of the pool.

Seeds: the benchmark's generator is seeded with ``[config seed, crc32(benchmark name)]``, so
benchmarks differ from each other and each is reproducible on its own.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from facecast.analysis.exports import image_numbers, write_cast_lists, write_lfw_pairs
from facecast.analysis.mining import MiningConfig, MiningShortfall, mine_pairs
from facecast.evaluate.scoring import load_embeddings
from facecast.parquet_io import read_parquet, write_parquet

log = logging.getLogger(__name__)

# Mining keys a benchmark may override (fold layout stays global: it names the rule outputs)
PER_BENCHMARK_MINING_KEYS = ("band", "band_mode", "n_genuine", "n_impostor", "max_image_uses",
                             "on_shortfall", "max_candidates")


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


def mine_benchmark(subset_path: str | os.PathLike, embed_paths: Iterable[str | os.PathLike],
                   manifest_path: str | os.PathLike, out_dir: str | os.PathLike, *, bench: str,
                   cfg: MiningConfig, seed: int,
                   provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Mine benchmark ``bench`` into ``out_dir``; return the mining report."""
    out_dir = Path(out_dir)
    subset = read_parquet(subset_path, columns=["image_id", "identity"])
    ids, emb = load_embeddings(embed_paths, subset["image_id"].astype(str))
    order = np.argsort(ids, kind="mergesort")            # pool order independent of shards
    ids, emb = ids[order], emb[order]
    ident = subset.set_index("image_id")["identity"].astype(str)
    identity = ident.reindex(ids).to_numpy()
    n_missing = len(subset) - len(ids)
    log.info("%s: subset %d images, %d with a reference embedding", bench, len(subset), len(ids))
    try:
        result = mine_pairs(emb, identity, ids, cfg, benchmark_seed(seed, bench))
    except MiningShortfall as exc:
        exc.report["n_without_embedding"] = int(n_missing)
        log.error("mining report:\n%s", json.dumps(exc.report, indent=1, default=str))
        raise
    report = {"benchmark": bench, "n_subset": int(len(subset)),
              "n_without_embedding": int(n_missing), **result.report}
    prov = dict(provenance or {})
    prov.update({"stage": "mining", "benchmark": bench, "band": report["band"],
                 "shortfall": report["shortfall"],
                 "reference_model": cfg.extra.get("reference_model", "")})
    write_parquet(result.pairs, out_dir / "pairs.parquet", provenance=prov)
    (out_dir / "mining_report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    manifest = read_parquet(manifest_path, columns=["image_id", "path", "identity"])
    paths = dict(zip(manifest["image_id"], manifest["path"], strict=True))
    write_cast_lists(result.pairs, paths, out_dir, cfg.fold_names)
    write_lfw_pairs(result.pairs, image_numbers(manifest), out_dir / "pairs.txt",
                    [f for f in cfg.fold_names if f != "val"])
    log.info("%s: %d genuine + %d impostor pairs in band %s%s", bench,
             report["genuine"]["selected"], report["impostor"]["selected"], report["band"],
             " (SHORTFALL)" if report["shortfall"] else "")
    return report
