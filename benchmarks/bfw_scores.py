"""Speed and memory of a BFW dataset scored by its datatable's columns (issue 41.5): the
manifest, the protocol, then per score model evaluate, fairness and demographics - with no
image read, as a ``kind: bfw`` dataset without embed models runs them.

A synthetic datatable of BFW's shape: 8 subgroups x ``--people`` people (BFW: 100) x 25
images, 5 folds with no person in two folds, every genuine pair of each person (300) and
random impostor pairs within the subgroup and fold up to ``--pairs`` rows (BFW: ~920k),
four score columns (vgg16, resnet50, senet50, sphereface) whose impostor scores shift by
subgroup. ``--cross F``: a share F of the impostor pairs pairs people of two subgroups
(issue 46.2: pairs the global threshold of ``demographics.global_pairs: same_group``
leaves out). The CSV is written with pandas' index column, as BFW ships it. The config is
the one ``docs/usage.md`` ("Your BFW") gives, with the schema's defaults (fairness and
demographics: identity-clustered bootstraps, cross-validated thresholds, plots) and the
demographics job's config of a ``bfw`` dataset (BFW's five intended FMRs, the global
threshold on same-subgroup pairs).

Each model's chain (evaluate -> fairness -> demographics) runs in its own process,
``--workers`` at a time (Snakemake with ``--cores 2`` runs two jobs at once). Prints the
seconds of each step, the wall time of the whole and the peak resident memory of one job
(the largest of the processes).

Usage: python benchmarks/bfw_scores.py                 (quick: 92,000 pairs)
       python benchmarks/bfw_scores.py --full          (920,000 pairs, BFW's size)
       taskset -c 0,1 python benchmarks/bfw_scores.py --full   (2 cores)
Target: --full < 3 minutes on 2 cores with no image read (issue 41).
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes.stage import write_manifest_attributes
from facecast.config.prepare import resolve_config
from facecast.config.schema import SCHEMA
from facecast.datasets.stage import build_manifest
from facecast.evaluate.stage import evaluate_given_scores, write_set_protocol
from facecast.evaluate.targets import job_config
from facecast.fairness.stage import run_demographics, run_fairness
from facecast.fairness.targets import demographics_config

GROUPS = ("asian_females", "asian_males", "black_females", "black_males", "indian_females",
          "indian_males", "white_females", "white_males")
MODELS = {"vgg16": 0.10, "resnet50": 0.08, "senet50": 0.07, "sphereface": 0.12}
PER_PERSON = 25
FOLDS = 5


def synthetic_table(path: Path, people: int, n_pairs: int, seed: int = 41,
                    cross: float = 0.0) -> int:
    """Write a BFW-shaped datatable of about ``n_pairs`` rows; return its row count."""
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(PER_PERSON, 1)
    n_people = len(GROUPS) * people
    group = np.repeat(np.arange(len(GROUPS)), people)
    fold = np.tile(np.arange(people) % FOLDS, len(GROUPS)) + 1
    # genuine: every pair of each person's images
    pid = np.repeat(np.arange(n_people), len(a))
    ia, ib = pid * PER_PERSON + np.tile(a, n_people), pid * PER_PERSON + np.tile(b, n_people)
    n_imp = max(0, n_pairs - len(ia))
    # impostors: a random other person of the same subgroup and fold, random images
    p1 = rng.integers(0, n_people, n_imp)
    step = FOLDS * (1 + rng.integers(0, max(1, people // FOLDS - 1), n_imp))
    p2 = group[p1] * people + (p1 - group[p1] * people + step) % people
    across = rng.random(n_imp) < cross  # the same person slot in another subgroup
    other = (group[p1] + 1 + rng.integers(0, len(GROUPS) - 1, n_imp)) % len(GROUPS)
    p2 = np.where(across, other * people + (p2 - group[p2] * people), p2)
    ja = p1 * PER_PERSON + rng.integers(0, PER_PERSON, n_imp)
    jb = p2 * PER_PERSON + rng.integers(0, PER_PERSON, n_imp)
    img_a, img_b = np.concatenate([ia, ja]), np.concatenate([ib, jb])
    label = np.r_[np.ones(len(ia), np.int8), np.zeros(n_imp, np.int8)]
    person_a, person_b = img_a // PER_PERSON, img_b // PER_PERSON
    g, g2 = group[person_a], group[person_b]
    names, names2 = np.array(GROUPS)[g], np.array(GROUPS)[g2]
    paths = np.array([f"{GROUPS[group[p]]}/n{p:06d}/{k:04d}_01.jpg"
                      for p in range(n_people) for k in range(PER_PERSON)])
    eth = np.array([x[0].upper() for x in GROUPS])
    gen = np.array([x.split("_")[1][0].upper() for x in GROUPS])
    abbr = np.char.add(eth, gen)
    df = pd.DataFrame({"fold": fold[person_a], "p1": paths[img_a], "p2": paths[img_b],
                       "label": label, "id1": person_a, "id2": person_b, "att1": names,
                       "att2": names2, "a1": abbr[g], "a2": abbr[g2], "g1": gen[g],
                       "g2": gen[g2], "e1": eth[g], "e2": eth[g2]})
    shift = 0.03 * (g % 4)
    for m, sd in MODELS.items():
        mu = np.where(label == 1, 0.55, 0.15 + shift)
        df[m] = np.round(mu + sd * rng.standard_normal(len(df)), 6)
    df.to_csv(path)
    return len(df)


def bfw_config(table: Path) -> dict[str, Any]:
    """The "Your BFW" config of docs/usage.md, resolved (schema defaults, derived groups)."""
    config: dict[str, Any] = {"datasets": {"bfw": {"kind": "bfw", "table": str(table)}},
                              "embed": {"models": {}},
                              "fairness": {"thresholds": {"fmr_targets": [0.1, 0.01, 0.001]}}}
    resolve_config(config, str(Path(__file__).resolve().parents[1] / SCHEMA))
    return config


def _chain(model: str, config: dict[str, Any], work: str) -> dict[str, float]:
    """evaluate -> fairness -> demographics of one score model (one process)."""
    os.chdir(work)
    times: dict[str, float] = {}
    cpu0 = time.process_time()
    t = time.perf_counter()
    evaluate_given_scores("protocol.parquet", f"eval/{model}.parquet", f"eval/{model}",
                          model=model, benchmark="bfw",
                          cfg=job_config(config["evaluate"], config["seed"]))
    times["evaluate"] = time.perf_counter() - t
    t = time.perf_counter()
    run_fairness(f"eval/{model}.parquet", "attributes.parquet", f"fairness/{model}",
                 config["fairness"], model=model, protocol="bfw", seed=config["seed"])
    times["fairness"] = time.perf_counter() - t
    t = time.perf_counter()
    run_demographics(f"eval/{model}.parquet", "attributes.parquet", f"demographics/{model}",
                     demographics_config(config, "bfw"), config["fairness"], model=model,
                     protocol="bfw", seed=config["seed"])
    times["demographics"] = time.perf_counter() - t
    times["cpu"] = time.process_time() - cpu0
    times["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="BFW's size: 920,000 pairs")
    ap.add_argument("--workers", type=int, default=2, help="model chains at once (cores)")
    ap.add_argument("--cross", type=float, default=0.0,
                    help="share of impostor pairs across two subgroups")
    args = ap.parse_args()
    people, n_pairs = (100, 920_000) if args.full else (20, 92_000)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        table = work / "bfw-datatable.csv"
        n = synthetic_table(table, people, n_pairs, cross=args.cross)
        print(f"synthetic datatable: {n:,} pairs, {len(GROUPS) * people * PER_PERSON:,} images, "
              f"{len(MODELS)} score models")
        config = bfw_config(table)
        spec = config["datasets"]["bfw"]
        start, cpu_start = time.perf_counter(), time.process_time()
        os.chdir(work)
        build_manifest(spec, work, "manifest.parquet")
        write_manifest_attributes("manifest.parquet", "attributes.parquet")
        t_manifest = time.perf_counter() - start
        write_set_protocol(spec, "bfw", "manifest.parquet", "protocol.parquet")
        t_protocol = time.perf_counter() - start - t_manifest
        cpu_own = time.process_time() - cpu_start
        print(f"manifest + attributes {t_manifest:.1f} s, protocol {t_protocol:.1f} s")
        with ProcessPoolExecutor(args.workers) as pool:
            futures = {m: pool.submit(_chain, m, config, str(work)) for m in MODELS}
            results = {m: f.result() for m, f in futures.items()}
        wall = time.perf_counter() - start
        for m, r in results.items():
            print(f"{m:>10}: evaluate {r['evaluate']:.1f} s, fairness {r['fairness']:.1f} s, "
                  f"demographics {r['demographics']:.1f} s (wall; {r['cpu']:.1f} CPU-s), "
                  f"peak {r['peak_mb']:.0f} MB")
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak = max([own] + [r["peak_mb"] for r in results.values()])
        cpu = cpu_own + sum(r["cpu"] for r in results.values())
        print(f"total wall {wall:.1f} s with {args.workers} workers, {cpu:.1f} CPU-seconds "
              f"(load average {os.getloadavg()[0]:.1f}); peak RSS {peak:.0f} MB (largest "
              "process); no image read")


if __name__ == "__main__":
    main()
