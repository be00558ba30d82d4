"""Config checks of ``export.bins`` (:mod:`facecast.analysis.bins`), run before any job.

Each names its key: unknown or repeated benchmarks, an ``image_size`` other than the stored
crop's, ``quality`` without ``encoding: jpg``, ``folds: val`` without a val fold, blocks
whose sizes the config already fixes (band mining: ``n_folds x (n_genuine + n_impostor)``
pairs) and that differ without ``block_size`` or fall short of it, and an export no
dataset can get (no mined pairs, or no aligned crops).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import listing, section

STORED_SIZE = 112  # facecast.analysis.bins.STORED_SIZE (no pandas/pyarrow import here)


def expected_pairs(config: Mapping[str, Any], bench: str, folds: str) -> int | None:
    """Pairs a band-mined benchmark has in ``folds`` when mining falls not short (None
    when the config does not fix the count: modes ``all`` and ``cast_random``)."""
    mining = dict(section(config, "mining"))
    over = dict(section(section(section(config, "benchmarks"), bench), "mining"))
    cfg = {**mining, **over}
    if str(cfg.get("mode", "band")) != "band":
        return None
    per_fold = int(cfg.get("n_genuine", 500)) + int(cfg.get("n_impostor", 500))
    return per_fold if folds == "val" else per_fold * int(mining.get("n_folds", 10))


def _size_errors(config: Mapping[str, Any], key: str, cfg: Mapping[str, Any],
                 benches: list[str]) -> list[str]:
    folds = str(cfg.get("folds", "test"))
    sizes = {b: expected_pairs(config, b, folds) for b in benches}
    known = {b: n for b, n in sizes.items() if n is not None}
    block = cfg.get("block_size")
    if block is not None:
        short = [f"{b} ({n})" for b, n in known.items() if n < int(block)]
        return [f"{key}.block_size: {block} pairs per block, but benchmark(s) "
                f"{', '.join(short)} are mined with fewer {folds} pairs; lower block_size"
                ] if short else []
    if len(set(known.values())) > 1:
        listed = ", ".join(f"{b} {n}" for b, n in known.items())
        return [f"{key}.benchmarks: blocks of one .bin must have equal sizes (cc11.py slices "
                f"by one size), but the mining settings give {listed} {folds} pairs; set "
                f"{key}.block_size (at most {min(known.values())}) to sample each benchmark "
                "to that many pairs"]
    return []


def _reach_errors(config: Mapping[str, Any], key: str, name: str) -> list[str]:
    from facecast.analysis.targets import bin_export_datasets, bin_export_ready

    datasets = list(section(config, "datasets"))
    if any(bin_export_ready(config, ds, name) for ds in datasets):
        return []
    if not bin_export_datasets(config):
        return [f"{key}: no dataset has mined pairs with aligned crops (.bin datasets, "
                "datasets analysed at template level and cast_arrays datasets without root "
                "have none); remove the export or add an image dataset"]
    return [f"{key}.benchmarks: no dataset gets mined pairs of every benchmark listed (set "
            "mining.reference_model / an embed model, or mode cast_random)"]


def bin_export_errors(config: Mapping[str, Any]) -> list[str]:
    """Every ``export.bins`` mistake (module docstring), each naming its key."""
    errors: list[str] = []
    benches = list(section(config, "benchmarks"))
    val_fold = bool(section(config, "mining").get("val_fold", True))
    for name, cfg in section(section(config, "export"), "bins").items():
        key = f"export.bins.{name}"
        cfg = cfg or {}
        listed = [str(b) for b in cfg.get("benchmarks") or []]
        bad = [f"{key}.benchmarks[{i}]: {b!r} is not a benchmark; known: {listing(benches)}"
               for i, b in enumerate(listed) if b not in benches]
        dup = sorted({b for b in listed if listed.count(b) > 1})
        if dup:
            bad.append(f"{key}.benchmarks: {', '.join(dup)} listed twice (one block each)")
        if int(cfg.get("image_size", STORED_SIZE)) != STORED_SIZE:
            bad.append(f"{key}.image_size: {cfg.get('image_size')} cannot be written; the "
                       f"faces stage stores the aligned crop at {STORED_SIZE} px only "
                       "(insightface's load_bin resizes other sizes itself); use 112")
        if cfg.get("quality") is not None and cfg.get("encoding", "png") != "jpg":
            bad.append(f"{key}.quality: applies to encoding jpg only (png is lossless); "
                       "remove it or set encoding: jpg")
        if cfg.get("folds", "test") == "val" and not val_fold:
            bad.append(f"{key}.folds: val needs the held-out fold (mining.val_fold: true)")
        if not bad:
            bad = _size_errors(config, key, cfg, listed) + _reach_errors(config, key, name)
        errors += bad
    return errors
