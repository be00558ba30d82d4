"""Speed and memory of the mitigation stage's methods (facecast.mitigation) at scale.

A synthetic world: 512-d embeddings (identity centres plus image noise, four protected
groups with their own offsets and noise levels), 20,000 calibration images (2,000
identities x 10) with every genuine pair and random impostor pairs, and 1,000,000
evaluated pairs among 40,000 other images (every genuine pair of 4,000 identities plus
random impostors); a second model's scores for the fusion. Every method learns on the
calibration pairs and scores the evaluated pairs, exactly as the stage runs them
(:data:`facecast.mitigation.methods.PARTS`, the paper defaults: cohort 1,000 images, top
200, 100 clusters, FMR 1e-3). Prints the seconds of each step, the total and the peak
memory; then the whole table at this size (every figure of every method with
``--n-boot`` identity-clustered replicates, ``--workers`` processes, and the tests):
its seconds, the seconds per replicate and the peak memory.

``--crossfit``: a BFW-like world instead (identities in 5 identity-disjoint folds,
every pair within one fold, two models' scores, the score-level methods of a BFW score
column: raw, oracle_cal, group_thresholds, fusion, fusion_lr) through three splits -
today's fraction split (``folds: 1``: half the identities evaluated, the pairs across
the two halves lost), the protocol's folds (``folds: auto``: 5 fits, no pair lost) and 5
seeded identity folds (``folds: 5``: 15 fits) - each: the fits, the table with
``--n-boot`` replicates and FairCal's figures (:mod:`facecast.mitigation.faircal_figures`).

Usage: python benchmarks/mitigation.py                (100,000 evaluated pairs)
       python benchmarks/mitigation.py --full         (1,000,000 evaluated pairs)
       taskset -c 0,1 python benchmarks/mitigation.py --full     (on 2 cores)
       python benchmarks/mitigation.py --crossfit [--full]   (BFW-like folds, 100,000 or
                                                              1,000,000 pairs in all)
Targets: every method together < 120 s on 2 CPU cores, < 4 GB (issue 35); the whole
table with 1,000 replicates at 1,000,000 pairs < 5 minutes per model on 2 cores (issue 41);
the cross-fitted table on BFW-like folds at most 2x the single split's (issue 46).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import pandas as pd

from facecast.mitigation.cohort import l2_normalise
from facecast.mitigation.crossfit import choose_split
from facecast.mitigation.faircal_figures import faircal_table
from facecast.mitigation.inputs import side
from facecast.mitigation.methods import PARTS, Images, Result, Settings, Side, finish, start
from facecast.mitigation.metrics import metric_names
from facecast.mitigation.replicates import bootstrap
from facecast.mitigation.stage import fit_all
from facecast.mitigation.table import build_tables, metric_notes
from facecast.mitigation.targets import METHODS

DIM = 512


def _images(n_ids: int, per: int, rng: np.random.Generator, first: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit embeddings, identity codes and group codes of ``n_ids`` x ``per`` images."""
    group = rng.integers(0, 4, n_ids)
    centre = rng.normal(size=(n_ids, DIM)).astype(np.float32)
    centre[:, :4] += 3.0 * np.eye(4, dtype=np.float32)[group]
    noise = (0.9 + 0.15 * group).astype(np.float32)
    ident = np.repeat(np.arange(n_ids), per)
    emb = centre[ident] + rng.normal(size=(len(ident), DIM)).astype(np.float32) * \
        noise[ident, None]
    return l2_normalise(emb), ident + first, group[ident]


def _pairs(ident: np.ndarray, offset: int, per: int, n_total: int,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every genuine pair, then random impostor pairs up to ``n_total`` (image indices)."""
    n_img = len(ident)
    a, b = np.triu_indices(per, 1)
    base = np.arange(n_img // per)[:, None] * per
    gen = np.stack([(base + a).ravel(), (base + b).ravel()], 1)
    n_imp = max(n_total - len(gen), 0)
    ia = rng.integers(0, n_img, n_imp)
    ib = (ia + rng.integers(per, n_img - per, n_imp)) % n_img
    both = np.vstack([gen, np.stack([ia, ib], 1)]) + offset
    label = np.r_[np.ones(len(gen), int), np.zeros(n_imp, int)]
    return both, label


def _side(pairs: np.ndarray, label: np.ndarray, emb: np.ndarray,
          rng: np.random.Generator) -> Side:
    score = np.empty(len(pairs))
    for lo in range(0, len(pairs), 200_000):
        p = pairs[lo:lo + 200_000]
        score[lo:lo + 200_000] = np.einsum("ij,ij->i", emb[p[:, 0]], emb[p[:, 1]])
    other = np.clip(score + rng.normal(0, 0.15, len(score)), -1, 1)
    return Side(pairs[:, 0], pairs[:, 1], score, label, np.column_stack([score, other]))


def world(n_eval: int, seed: int = 0) -> tuple[Images, Side, Side]:
    """The synthetic world of the module docstring (``n_eval`` evaluated pairs)."""
    rng = np.random.default_rng(seed)
    per = 10
    ev_ids = max(50, n_eval // 250)
    e_emb, e_id, e_g = _images(ev_ids, per, rng, 0)
    c_emb, c_id, c_g = _images(2000, per, rng, ev_ids)
    emb = np.vstack([e_emb, c_emb])
    im = Images(np.arange(len(emb)).astype(str), emb, np.r_[e_id, c_id], np.r_[e_g, c_g],
                ["g0", "g1", "g2", "g3"])
    ev_pairs, ev_label = _pairs(e_id, 0, per, n_eval, rng)
    cal_pairs, cal_label = _pairs(c_id - ev_ids, len(e_emb), per, 500_000, rng)
    return im, _side(ev_pairs, ev_label, emb, rng), _side(cal_pairs, cal_label, emb, rng)


def peak_gb() -> float:
    """Peak resident memory of this process, GB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def annotated(im: Images, ev: Side) -> pd.DataFrame:
    """The evaluated pairs as the stage annotates them: groups of same-group pairs (one
    legitimate combination), mixed pairs in the reference set, ten folds."""
    group = np.where(im.group[ev.ia] == im.group[ev.ib], im.group[ev.ia], -1)
    ids = im.ident.astype(str)
    return pd.DataFrame({
        "identity_a": ids[ev.ia], "identity_b": ids[ev.ib], "label": ev.label,
        "group": pd.Series(np.where(group >= 0, np.array(im.groups, dtype=object)[
            np.maximum(group, 0)], None)),
        "combo": "all", "in_cells": group >= 0, "in_reference": True,
        "status": np.where(group >= 0, "ok", "mixed"),
        "eval_fold": (np.arange(len(ev.label)) % 10).astype(str)})


def methods_part(im: Images, ev: Side, cal: Side) -> Result:
    """Every method learned on the calibration pairs (the seconds of each step printed)."""
    st = Settings(methods=list(METHODS), fmr=1e-3, cohort_size=1000, top_k=200, clusters=100,
                  seed=0, fusion_models=["a", "b"])
    res, total = start(ev, cal), 0.0
    for what, step in PARTS:
        t = time.perf_counter()
        step(im, ev, cal, st, res)
        dt = time.perf_counter() - t
        total += dt
        print(f"  {what:<52s} {dt:7.1f} s")
    res = finish(res, st)
    print(f"every method together: {total:.1f} s (target < 120 s); peak memory "
          f"{peak_gb():.2f} GB (target < 4 GB)")
    for note in res.notes:
        print(f"  note: {note}")
    return res


def table_part(im: Images, ev: Side, res: Result, n_boot: int, workers: int) -> float:
    """The whole table (figures of every method, ``n_boot`` replicates, the tests): its
    seconds, printed with the parts."""
    t0 = time.perf_counter()
    ann = annotated(im, ev)
    groups, point, reps = bootstrap(ann, res.scores, res.probs, fars=[1e-3, 1e-4],
                                    fmr=1e-3, fairness={}, n_boot=n_boot, seed=3,
                                    workers=workers)
    boot = time.perf_counter() - t0
    t = time.perf_counter()
    n_imp = int((ann["label"] == 0).sum())
    notes = metric_notes(metric_names([1e-3, 1e-4], groups), n_impostors=n_imp,
                         fars=[1e-3, 1e-4], fmr=1e-3, groups=groups)
    n_ids = int(pd.concat([ann["identity_a"], ann["identity_b"]]).nunique())
    build_tables(point, reps, notes=notes, n_identities=n_ids, confidence=0.95,
                 alpha=0.05, counts={"n_pairs": len(ann)})
    tests = time.perf_counter() - t
    t = time.perf_counter()
    faircal_table(ann.assign(group=ann["group"].fillna("mixed")), res.scores, res.probs,
                  fits=np.full(len(ann), "all"))
    fc = time.perf_counter() - t
    total = time.perf_counter() - t0
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"table of {len(point)} methods: {boot:.1f} s for the states, point estimates and "
          f"{n_boot} replicates ({boot / max(n_boot, 1) * 1000:.0f} ms per replicate for "
          f"all methods, {workers} worker processes), {tests:.1f} s for the tests, "
          f"{fc:.1f} s for FairCal's figures")
    print(f"whole table: {total:.1f} s (target at 1,000,000 pairs and 1,000 replicates: "
          f"< 300 s on 2 cores); peak memory {peak_gb():.2f} GB; CPU so far "
          f"{cpu.ru_utime + cpu.ru_stime + kids.ru_utime + kids.ru_stime:.0f} s; load "
          f"average {os.getloadavg()[0]:.1f}")
    return total


SCORE_METHODS = ["raw", "oracle_cal", "group_thresholds", "fusion", "fusion_lr"]


def bfw_world(n_pairs: int, n_folds: int = 5, seed: int = 1) -> tuple[Images, pd.DataFrame]:
    """The BFW-like world of ``--crossfit``: 10 images per identity, identity ``i`` in
    fold ``i mod n_folds``, every genuine pair and random impostor pairs within a fold up
    to ``n_pairs``; the pairs as a scores file (with ``score@a``, ``score@b``)."""
    rng = np.random.default_rng(seed)
    per = 10
    n_ids = n_folds * max(20, n_pairs // (250 * n_folds))
    emb, ident, group = _images(n_ids, per, rng, 0)
    a, b = np.triu_indices(per, 1)
    base = np.arange(n_ids)[:, None] * per
    gen = np.stack([(base + a).ravel(), (base + b).ravel()], 1)
    n_imp = max(n_pairs - len(gen), 0)
    ida = rng.integers(0, n_ids, n_imp)
    idb = (ida + n_folds * rng.integers(1, n_ids // n_folds, n_imp)) % n_ids
    imp = np.stack([ida * per + rng.integers(0, per, n_imp),
                    idb * per + rng.integers(0, per, n_imp)], 1)
    pairs = np.vstack([gen, imp])
    label = np.r_[np.ones(len(gen), int), np.zeros(n_imp, int)]
    sd = _side(pairs, label, emb, rng)
    names = np.arange(len(emb)).astype(str)
    fold = (ident[pairs[:, 0]] % n_folds + 1).astype(str)
    frame = pd.DataFrame({"image_a": names[pairs[:, 0]], "image_b": names[pairs[:, 1]],
                          "identity_a": ident[pairs[:, 0]].astype(str),
                          "identity_b": ident[pairs[:, 1]].astype(str), "label": label,
                          "score": sd.score, "score@a": sd.score,
                          "score@b": sd.partners[:, 1], "fold": fold, "eval_fold": fold,
                          "status": "ok"})
    return Images(names, emb, ident, group, ["g0", "g1", "g2", "g3"]), frame


def crossfit_part(n_pairs: int, n_boot: int, workers: int) -> None:
    """The three splits of ``--crossfit`` on one BFW-like world, timed."""
    t = time.perf_counter()
    im, frame = bfw_world(n_pairs)
    print(f"BFW-like world: {len(frame):,} pairs in 5 identity-disjoint folds "
          f"({time.perf_counter() - t:.1f} s to build)")
    st = Settings(methods=SCORE_METHODS, fmr=1e-3, seed=0, fusion_models=["a", "b"])
    times = {}
    for what, cal in (("fraction split (folds: 1, today)", {"folds": 1}),
                      ("protocol folds (folds: auto)", {"folds": "auto"}),
                      ("5 seeded folds (folds: 5)", {"folds": 5})):
        t0 = time.perf_counter()
        split, _ = choose_split(frame, cal, 0)
        scores, probs, _ = fit_all(im, split, ["a", "b"], st)
        fits = time.perf_counter() - t0
        t = time.perf_counter()
        ev = split.evaluated
        ann = annotated(im, side(ev, im, []))
        bootstrap(ann, scores, probs, fars=[1e-3, 1e-4], fmr=1e-3, fairness={},
                  n_boot=n_boot, seed=3, workers=workers)
        table = time.perf_counter() - t
        t = time.perf_counter()
        fit = ev["fit"].to_numpy() if "fit" in ev else np.full(len(ev), "all")
        faircal_table(ann.assign(group=ann["group"].fillna("mixed")), scores, probs, fits=fit)
        fc = time.perf_counter() - t
        times[what] = (table + fc, len(ev))
        print(f"  {what:<36s} {len(split.fits):3d} fits, {len(ev):>9,} pairs evaluated: "
              f"fits {fits:6.1f} s, table ({n_boot} replicates) {table:6.1f} s, FairCal's "
              f"figures {fc:5.1f} s; peak {peak_gb():.2f} GB")
    base, n_base = times["fraction split (folds: 1, today)"]
    for what, (sec, n) in times.items():
        print(f"  table + FairCal's figures, {what}: {sec:.1f} s = {sec / base:.2f} x the "
              f"fraction split's; per evaluated pair {sec / n * 1e6:.0f} us = "
              f"{sec / n / (base / n_base):.2f} x (target: at most 2x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="1,000,000 evaluated pairs "
                    "(default: 100,000)")
    ap.add_argument("--n-boot", type=int, default=1000, help="table replicates (default "
                    "1,000, the stage's default)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of the "
                    "table (the rule's threads)")
    ap.add_argument("--table-only", action="store_true", help="skip the methods' timings")
    ap.add_argument("--crossfit", action="store_true", help="BFW-like folds: the fraction "
                    "split, the protocol's folds and 5 seeded folds (module docstring)")
    args = ap.parse_args()
    n_eval = 1_000_000 if args.full else 100_000
    if args.crossfit:
        crossfit_part(n_eval, args.n_boot, args.workers)
        return
    t0 = time.perf_counter()
    im, ev, cal = world(n_eval)
    print(f"world: {len(ev.label):,} evaluated pairs, {len(cal.label):,} calibration pairs, "
          f"{int(np.unique(np.r_[cal.ia, cal.ib]).size):,} calibration images, {DIM}-d "
          f"({time.perf_counter() - t0:.1f} s to build; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, {len(os.sched_getaffinity(0))} "
          "CPUs)")
    if args.table_only:
        res = start(ev, cal)
        for _, step in PARTS:
            step(im, ev, cal, Settings(methods=list(METHODS), fmr=1e-3, cohort_size=1000,
                                       top_k=200, clusters=100, seed=0,
                                       fusion_models=["a", "b"]), res)
    else:
        res = methods_part(im, ev, cal)
    table_part(im, ev, res, args.n_boot, args.workers)


if __name__ == "__main__":
    main()
