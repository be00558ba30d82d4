"""Config checks of ``export.bins`` (:mod:`facecast.analysis.bins`), run before any job.

Each names its key: unknown or repeated benchmarks, an ``image_size`` other than the stored
crop's, ``quality`` without ``encoding: jpg``, ``folds: val`` without a val fold, blocks
whose sizes the config already fixes (band mining: ``n_folds x (n_genuine + n_impostor)``
pairs) and that differ without ``block_size`` or fall short of it, blocks that would leave
one of insightface's ten folds without genuine or impostor pairs (its ``calculate_val``
divides by both counts), and an export no dataset can get (no mined pairs, or no aligned
crops).

:func:`fold_genuine_counts` is the one rule for how many genuine pairs each insightface
fold of a block gets (:func:`facecast.analysis.bins.bin_pair_order` lays the block out
by it), so the config check predicts exactly what the export writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.bin_sets import BIN_FOLDS, LAYOUT_BLOCKS
from facecast.config.util import listing, section

STORED_SIZE = 112  # facecast.analysis.bins.STORED_SIZE (no pandas/pyarrow import here)
#: the blocks CAST's cc11.py cuts every .bin into (``sub_benchmarks``)
CC11_BLOCKS = LAYOUT_BLOCKS["cc11"]


def rounded_share(count: int, size: int, total: int) -> int:
    """``floor(count * size / total + 1/2)`` in exact integers: the genuine pairs of a
    ``size``-pair sample of ``total`` pairs of which ``count`` are genuine."""
    return (2 * count * size + total) // (2 * total) if total else 0


def fold_genuine_counts(n_pairs: int, n_genuine: int, n_folds: int = BIN_FOLDS) -> list[int]:
    """Genuine pairs in each of the ``n_folds`` KFold folds of a block of ``n_pairs``
    pairs, ``n_genuine`` of them genuine: fold ``k``'s share proportional to its size
    (``KFold(shuffle=False)``: the first ``n_pairs % n_folds`` folds one longer), rounded
    cumulatively half up so the shares sum to ``n_genuine`` (exact integer arithmetic)."""
    if n_pairs <= 0:
        return [0] * n_folds
    base, extra = divmod(n_pairs, n_folds)
    out, done, edge = [], 0, 0
    for k in range(n_folds):
        edge += base + (k < extra)
        cum = rounded_share(n_genuine, edge, n_pairs)
        out.append(cum - done)
        done = cum
    return out


def fold_class_gaps(n_pairs: int, n_genuine: int) -> list[str]:
    """``fold k: g genuine / i impostor`` for each insightface fold of such a block that
    lacks genuine or impostor pairs (empty when every fold has both)."""
    base, extra = divmod(n_pairs, BIN_FOLDS)
    gaps = []
    for k, g in enumerate(fold_genuine_counts(n_pairs, n_genuine)):
        imp = base + (k < extra) - g
        if g == 0 or imp == 0:
            gaps.append(f"fold {k}: {g} genuine / {imp} impostor")
    return gaps


def expected_counts(config: Mapping[str, Any], bench: str, folds: str
                    ) -> tuple[int, int] | None:
    """(pairs, genuine pairs) a band-mined benchmark has in ``folds`` when mining falls not
    short (None when the config does not fix the count: modes ``all`` and
    ``cast_random``)."""
    mining = dict(section(config, "mining"))
    over = dict(section(section(section(config, "benchmarks"), bench), "mining"))
    cfg = {**mining, **over}
    if str(cfg.get("mode", "band")) != "band":
        return None
    n_gen, n_imp = int(cfg.get("n_genuine", 500)), int(cfg.get("n_impostor", 500))
    times = 1 if folds == "val" else int(mining.get("n_folds", 10))
    return (n_gen + n_imp) * times, n_gen * times


def _fold_errors(key: str, counts: Mapping[str, tuple[int, int]],
                 block: int | None) -> list[str]:
    out = []
    for b, (n, g) in counts.items():
        size = n if block is None else int(block)
        gen = g if block is None else rounded_share(g, size, n)
        gaps = fold_class_gaps(size, gen)
        if gaps:
            out.append(f"{key}: block {b} ({size} pairs, {gen} genuine) would leave "
                       f"{', '.join(gaps)}; each of insightface's {BIN_FOLDS} folds needs "
                       "genuine and impostor pairs (calculate_val divides by both): raise "
                       "block_size or mining.n_genuine / n_impostor")
    return out


def _size_errors(config: Mapping[str, Any], key: str, cfg: Mapping[str, Any],
                 benches: list[str]) -> list[str]:
    folds = str(cfg.get("folds", "test"))
    counts = {b: expected_counts(config, b, folds) for b in benches}
    known = {b: c[0] for b, c in counts.items() if c is not None}
    block = cfg.get("block_size")
    if block is not None:
        short = [f"{b} ({n})" for b, n in known.items() if n < int(block)]
        if short:
            return [f"{key}.block_size: {block} pairs per block, but benchmark(s) "
                    f"{', '.join(short)} are mined with fewer {folds} pairs; lower block_size"]
    elif len(set(known.values())) > 1:
        listed = ", ".join(f"{b} {n}" for b, n in known.items())
        return [f"{key}.benchmarks: blocks of one .bin must have equal sizes (cc11.py slices "
                f"by one size), but the mining settings give {listed} {folds} pairs; set "
                f"{key}.block_size (at most {min(known.values())}) to sample each benchmark "
                "to that many pairs"]
    return _fold_errors(key, {b: c for b, c in counts.items() if c is not None}, block)


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
