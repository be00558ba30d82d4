"""End-to-end wall time of an LFW-sized verification .bin through Snakemake.

Builds a synthetic ``lfw.bin`` in a temporary folder (6,000 pairs, 12,000 aligned 112 px
crops: the demo generator's faces, centre-cropped, each pair image re-encoded as JPEG
after a random flip, brightness change and shift; 10 folds of 300 genuine then 300
impostor pairs, as LFW's file is ordered), writes an ``arcface_torch`` backbone of the
chosen arch with random weights (no weights can be downloaded here; the timing does not
depend on them, the accuracy does, so it is not meaningful), and runs the whole default
target of config/cc11.yaml's setup (``faces.detector: none``, native attributes,
correlations, evaluation, the .bin suite table) with ``--cores`` cores. Prints the wall
time of the Snakemake run (the data generation is not timed) and the slowest jobs.

Figures (docs/SCALE.md, "An LFW-sized .bin end to end"): 6,000 pairs took 425.7 s before
the CPU speed work of issue 21 and 230.6 s after its first part (three shards of 4,000, a
shared machine); on an idle machine with the later changes (no torch in the faces and
native attribute jobs, the batched blur effect) 162.5 s with config/cc11.yaml's shard size
(one shard) and 187.7 s with ``--shard-size 4000``.

Usage: python benchmarks/bin_suite.py [--pairs 6000] [--arch mbf] [--cores 2]
       [--shard-size N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

REPO = Path(__file__).resolve().parents[1]


def _crops(folder: Path, n_identities: int) -> dict[str, list[np.ndarray]]:
    """Identity -> 112 px crops of the demo generator's faces (4 renders each)."""
    from facecast.datasets.synthetic.generate import generate_dataset

    truth = generate_dataset(folder, seed=11, n_jobs=2, n_identities=n_identities,
                             images_per_identity=4, image_size=160)
    out: dict[str, list[np.ndarray]] = {}
    for r in truth.itertuples():
        with Image.open(folder / r.path) as im:
            crop = im.convert("RGB").crop((30, 30, 130, 130)).resize(
                (112, 112), Image.Resampling.BILINEAR)
        out.setdefault(str(r.identity), []).append(np.asarray(crop))
    return out


def _variant(arr: np.ndarray, rng: np.random.Generator) -> bytes:
    v = arr[:, ::-1] if rng.random() < 0.5 else arr
    v = np.roll(v, tuple(rng.integers(-3, 4, 2)), axis=(0, 1))
    v = np.clip(v.astype(np.float32) * rng.uniform(0.8, 1.2), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(v).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def make_bin(path: Path, n_pairs: int, work: Path) -> None:
    """An LFW-like .bin of ``n_pairs`` pairs (10 folds, genuine then impostor in each)."""
    from facecast.datasets.insightface_bin import write_bin

    crops = _crops(work / "faces", n_identities=200)
    ids = sorted(crops)
    rng = np.random.default_rng(0)
    per_fold = n_pairs // 10
    images, issame = [], []
    for _ in range(10):
        for k in range(per_fold):
            same = k < per_fold // 2
            a = ids[rng.integers(len(ids))]
            b = a if same else ids[(ids.index(a) + 1 + rng.integers(len(ids) - 1)) % len(ids)]
            ia = rng.integers(4)
            ib = (ia + 1 + rng.integers(3)) % 4 if same else rng.integers(4)
            images += [_variant(crops[a][ia], rng), _variant(crops[b][ib], rng)]
            issame.append(same)
    write_bin(path, images, issame, protocol=4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6000)
    ap.add_argument("--arch", default="mbf")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=None,
                    help="images per job (default: config/cc11.yaml's, one shard for LFW)")
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="facecast_bin_suite_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        make_bin(work / "lfw.bin", args.pairs, work)
        import torch

        from facecast.embed.arcface.weights import build_backbone

        torch.manual_seed(0)
        torch.save(build_backbone(args.arch).state_dict(), work / "backbone.pth")
        print(f"data: {args.pairs} pairs ({2 * args.pairs} images), random {args.arch} "
              f"weights, built in {time.perf_counter() - t0:.0f} s (not timed below)")
        cfg = yaml.safe_load((REPO / "config/cc11.yaml").read_text())
        shard_size = args.shard_size or cfg["datasets"]["cc11"]["shard_size"]
        cfg["datasets"] = {"lfw": {"kind": "insightface_bin", "path": str(work / "lfw.bin"),
                                   "shard_size": shard_size}}
        cfg["embed"]["models"] = {args.arch: {"backend": "arcface_torch", "arch": args.arch,
                                              "weights": str(work / "backbone.pth")}}
        cfg["embed"].update({"device": "cpu", "threads": args.cores, "batch_size": 64})
        cfg["evaluate"]["models"] = [args.arch]
        (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
               "--directory", str(work / "run"), "--configfile", str(work / "config.yaml"),
               "--cores", str(args.cores), "--quiet", "rules"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-6000:])
            raise SystemExit(f"snakemake failed ({proc.returncode})")
        runtimes = []
        for tsv in (work / "run/results").rglob("runtime/**/*.tsv"):
            lines = tsv.read_text().splitlines()
            if len(lines) > 1:
                runtimes.append((float(lines[1].split("\t")[0]),
                                 str(tsv.relative_to(work / "run/results"))))
        print(f"end to end (snakemake, {args.cores} cores, shard_size {shard_size}): {wall:.1f} s "
              f"({'< 3 min' if wall < 180 else 'over 3 min'})")
        for sec, name in sorted(runtimes, reverse=True)[:8]:
            print(f"  {sec:7.1f} s  {name}")
        print((work / "run/results/bin_suite.md").read_text().split("\n## ")[0])
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
