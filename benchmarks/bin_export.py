"""Peak memory and time of the ``.bin`` export (``facecast.analysis.bins.export_bin``).

Builds, in a temporary folder, faces shards of N distinct images (real 112 px PNG crops:
64 noisy patterns of ~37 kB, reused under distinct image ids, so the file holds N crops'
bytes) and eleven band-mined benchmarks of P pairs each (10 folds of genuine then impostor
pairs, each image in one pair: 2 x 11 x P = N images), then runs, each in a fresh Python
process, and reports wall time and peak resident memory (VmHWM of /proc/self/status: the
process's own high-water mark; ru_maxrss would carry the builder's from before exec):

  export     export_bin of the eleven benchmarks -> one CC11-style .bin (streamed)
  in_memory  (with --baseline) what the export did before issue 39: every crop read into
             memory, then one pickle.dump of the whole (bins, issame_list)

The streamed export should stay flat as N grows; the in-memory one grows with the file.
Quick by default (11 x 300 pairs, 6,600 crops, ~250 MB); ``--pairs 10000`` is CC11's size
(220,000 crops, ~8 GB written, as much again spilled while writing).

    python benchmarks/bin_export.py [--pairs 300 1000] [--baseline] [--shard-size 10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from facecast.faces.crops import encode_png  # noqa: E402
from facecast.io.parquet_io import write_parquet  # noqa: E402

NAMES = ["black", "caucasian", "east_asian", "latinx", "middle_eastern", "young", "female",
         "male", "glasses_facial_hair", "low_p2p", "random"]

STEPS = {
    "export": ("from facecast.analysis.bins import export_bin",
               "export_bin(sources, faces, w / 'cc.bin', name='cc', "
               "cfg={'benchmarks': list(sources)}, seed=0)"),
    "in_memory": ("import pickle\nimport pyarrow.dataset as pads\nimport pandas as pd",
                  "ids = set()\n"
                  "for p in sources.values():\n"
                  "    d = pd.read_parquet(p)\n"
                  "    ids |= set(d.image_a) | set(d.image_b)\n"
                  "t = pads.dataset([str(f) for f in faces]).to_table(filter="
                  "pads.field('image_id').isin(sorted(ids)))\n"
                  "crops = dict(zip(t.column('image_id').to_pylist(), "
                  "t.column('crop_arcface').to_pylist()))\n"
                  "imgs, same = [], []\n"
                  "for p in sources.values():\n"
                  "    d = pd.read_parquet(p)\n"
                  "    for a, b, lab in zip(d.image_a, d.image_b, d.label):\n"
                  "        imgs += [crops[a], crops[b]]\n"
                  "        same.append(bool(lab))\n"
                  "pickle.dump((imgs, same), open(w / 'mem.bin', 'wb'), protocol=4)"),
}


def build(work: Path, pairs: int, shard_size: int) -> None:
    """Faces shards and eleven benchmarks' pairs.parquet (module docstring)."""
    rng = np.random.default_rng(0)
    patterns = [encode_png(rng.integers(0, 255, (112, 112, 3), dtype=np.uint8))
                for _ in range(64)]
    n_images = 2 * pairs * len(NAMES)
    ids = [f"id{k // 4}/{k % 4}.jpg" for k in range(n_images)]
    faces = work / "faces"
    faces.mkdir()
    for s, start in enumerate(range(0, n_images, shard_size)):
        chunk = ids[start:start + shard_size]
        write_parquet(pd.DataFrame({"image_id": chunk, "status": "ok",
                                    "crop_arcface": [patterns[k % 64] for k in
                                                     range(start, start + len(chunk))]}),
                      faces / f"{s:05d}.parquet")  # one row group per shard, as the faces stage
    per_fold = pairs // 10
    for b, name in enumerate(NAMES):
        mine = ids[2 * pairs * b:2 * pairs * (b + 1)]
        fold = np.repeat([str(k) for k in range(10)], per_fold)
        label = np.tile(np.r_[np.ones(per_fold // 2), np.zeros(per_fold - per_fold // 2)],
                        10).astype(int)
        (work / name).mkdir()
        write_parquet(pd.DataFrame({"image_a": mine[0::2], "image_b": mine[1::2],
                                    "identity_a": "a", "identity_b": "b", "label": label,
                                    "fold": fold}), work / name / "pairs.parquet")


def measure(work: Path, step: str) -> dict:
    """Run one step in a fresh process: wall seconds and peak RSS (MiB)."""
    imports, call = STEPS[step]
    code = (f"import re, sys, time\nfrom pathlib import Path\n"
            f"sys.path.insert(0, {str(REPO / 'src')!r})\n{imports}\n"
            f"w = Path({str(work)!r})\n"
            f"faces = sorted((w / 'faces').glob('*.parquet'))\n"
            f"sources = {{n: w / n / 'pairs.parquet' for n in {NAMES!r}}}\n"
            "def hwm():\n"
            "    txt = open('/proc/self/status').read()\n"
            "    return int(re.search(r'VmHWM:\\s+(\\d+)', txt).group(1))\n"
            "base = hwm()\n"
            f"t0 = time.perf_counter()\n{call}\n"
            "print(time.perf_counter() - t0, base, hwm())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    secs, base, peak = out.stdout.split()[-3:]
    return {"step": step, "seconds": round(float(secs), 2),
            "rss_after_imports_mib": round(int(base) / 1024), "peak_rss_mib":
            round(int(peak) / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[300],
                        help="pairs per block (11 blocks)")
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--baseline", action="store_true",
                        help="also measure the in-memory export (peak grows with the file)")
    args = parser.parse_args()
    for pairs in args.pairs:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            t0 = time.perf_counter()
            build(work, pairs, args.shard_size)
            built = time.perf_counter() - t0
            for step in ["export", *(["in_memory"] if args.baseline else [])]:
                row = measure(work, step)
                name = "cc.bin" if step == "export" else "mem.bin"
                row.update({"pairs": 11 * pairs, "images": 22 * pairs,
                            "bin_mib": round((work / name).stat().st_size / 2**20),
                            "build_seconds": round(built, 1)})
                print(json.dumps(row))


if __name__ == "__main__":
    main()
