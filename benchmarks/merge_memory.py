"""Peak memory and time of facecast's streaming merges on a synthetic table at scale.

Builds, in a temporary folder, a manifest of N images (one row group per shard, label
columns), faces shards (image_id/status/message: the only columns the merge reads) and
the shards of two attribute scorers (A float columns in all), then runs each step in a
fresh Python process and reports its wall time and peak resident memory (ru_maxrss):

  merge        facecast.attributes.merge.merge_attributes -> attributes.parquet
  pearson      facecast.analysis.correlations.stream_pearson over attributes.parquet
  spearman     facecast.analysis.correlations.stream_spearman (ranks in memory by design)
  summary      facecast.datasets.summary.summarize_dataset (manifest + faces shards)

Every size in --images is measured, so the output shows how memory grows with N: a
streaming step stays flat, an in-memory one grows linearly.

    python benchmarks/merge_memory.py [--images 200000 1000000] [--shard-size 10000]
                                      [--attributes 40] [--steps merge pearson ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from facecast.datasets.manifest import shard_name  # noqa: E402
from facecast.io.parquet_io import ParquetStreamWriter, write_parquet  # noqa: E402

COLUMNS_KEY = "facecast.attribute_columns"
N_LABELS = 8

# step -> (imports, call); the imports alone are measured too, so the table separates
# what the libraries cost (torch comes in with the attributes package) from the step.
STEPS = {
    "merge": ("from facecast.attributes.merge import merge_attributes",
              'merge_attributes(w / "manifest.parquet", faces, scorers, w / "attributes.parquet")'),
    "pearson": ("import pyarrow.parquet as pq\n"
                "from facecast.analysis.correlations import attribute_columns, stream_pearson",
                'cols = attribute_columns(pq.read_schema(w / "attributes.parquet"))\n'
                'r, n = stream_pearson(w / "attributes.parquet", cols)'),
    "spearman": ("import pyarrow.parquet as pq\n"
                 "from facecast.analysis.correlations import attribute_columns, stream_spearman",
                 'cols = attribute_columns(pq.read_schema(w / "attributes.parquet"))\n'
                 'r, n = stream_spearman(w / "attributes.parquet", cols, max_rows=10**9)'),
    "summary": ("from facecast.datasets.summary import summarize_dataset",
                'summarize_dataset(w / "manifest.parquet", faces)'),
}


def build_inputs(work: Path, n_images: int, shard_size: int, n_attributes: int,
                 seed: int = 0) -> dict:
    """Write the synthetic manifest, faces shards and scorer shards; return their paths."""
    rng = np.random.default_rng(seed)
    n_shards = -(-n_images // shard_size)
    shard_ids = [shard_name(i) for i in range(n_shards)]
    labels = [f"label_{k}" for k in range(N_LABELS)]
    schema = pa.schema([("image_id", pa.string()), ("path", pa.string()),
                        ("identity", pa.string()), ("split", pa.string()),
                        ("shard", pa.string()), ("exclude", pa.bool_()),
                        ("status", pa.string()), ("message", pa.string()),
                        ("single_image", pa.bool_())]
                       + [(c, pa.float64()) for c in labels])
    meta = {"facecast.shards": json.dumps(shard_ids), "facecast.shard_size": str(shard_size),
            "facecast.n_images": str(n_images)}
    split = [n_attributes // 2, n_attributes - n_attributes // 2]
    scorer_cols = {"native": [f"native_{k}" for k in range(split[0])],
                   "model": [f"model_{k}" for k in range(split[1])]}
    faces, scorers = [], {s: [] for s in scorer_cols}
    with ParquetStreamWriter(work / "manifest.parquet", schema, metadata=meta) as man:
        for s, sid in enumerate(shard_ids):
            lo, hi = s * shard_size, min(n_images, (s + 1) * shard_size)
            ids = [f"id{i // 20:07d}/{i % 20}.jpg" for i in range(lo, hi)]
            n = len(ids)
            status = np.where(rng.random(n) < 0.02, "no_face", "ok")
            cols = {"image_id": ids, "path": ids, "identity": [p[:9] for p in ids],
                    "split": ["test"] * n, "shard": [sid] * n, "exclude": [False] * n,
                    "status": ["ok"] * n, "message": [""] * n, "single_image": [False] * n}
            cols.update({c: rng.random(n) for c in labels})
            man.write(pa.table(cols, schema=schema))
            fpath = work / "faces" / f"{sid}.parquet"
            write_parquet(pa.table({"image_id": ids, "status": status,
                                    "message": [""] * n}), fpath)
            faces.append(str(fpath))
            for scorer, names in scorer_cols.items():
                spath = work / "attributes" / scorer / f"{sid}.parquet"
                table = {"image_id": ids, "status": status, "message": [""] * n}
                table.update({c: np.where(status == "ok", rng.normal(size=n), np.nan)
                              for c in names})
                write_parquet(pa.table(table), spath,
                              metadata={COLUMNS_KEY: json.dumps({c: c for c in names})})
                scorers[scorer].append(str(spath))
    return {"faces": faces, "scorers": scorers, "shards": n_shards}


def _measure(code: str) -> tuple[str, float, str]:
    """Run ``code`` in a fresh interpreter; return (its output, peak GB, error tail or '')."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    err = "" if os.waitstatus_to_exitcode(status) == 0 else out[-800:]
    return out, usage.ru_maxrss / 1024**2, err


def run_step(step: str, work: Path, inputs: dict) -> tuple[float, float, float, str]:
    """Run one step in a fresh process; return (seconds, peak GB, imports-only GB, error)."""
    (work / "inputs.json").write_text(json.dumps(inputs))
    head = (f"import json, sys\nfrom pathlib import Path\n"
            f"sys.path.insert(0, {str(REPO / 'src')!r})\n"
            f"w = Path({str(work)!r})\nd = json.loads(Path(w / 'inputs.json').read_text())\n"
            "faces, scorers = d['faces'], d['scorers']\n")
    imports, call = STEPS[step]
    _, base_gb, _ = _measure(head + imports)
    out, peak_gb, err = _measure(head + imports + "\nimport time\nt0 = time.perf_counter()\n"
                                 + call + "\nprint('STEP_SECONDS', time.perf_counter() - t0)")
    lines = [ln for ln in out.splitlines() if ln.startswith("STEP_SECONDS")]
    seconds = float(lines[-1].split()[1]) if lines else float("nan")
    return seconds, peak_gb, base_gb, err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, nargs="+", default=[200_000, 1_000_000])
    ap.add_argument("--shard-size", type=int, default=10_000)
    ap.add_argument("--attributes", type=int, default=40, help="attribute columns in all")
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    args = ap.parse_args()
    rows = []
    for n in args.images:
        with tempfile.TemporaryDirectory(prefix="facecast-merge-") as tmp:
            work = Path(tmp)
            t0 = time.perf_counter()
            inputs = build_inputs(work, n, args.shard_size, args.attributes)
            t_build = time.perf_counter() - t0
            print(f"{n:,} images, {inputs['shards']} shards, {args.attributes} attributes "
                  f"+ {N_LABELS} labels: inputs written in {t_build:.1f} s", flush=True)
            for step in args.steps:
                sec, gb, base, err = run_step(step, work, inputs)
                rows.append((n, step, sec, gb, base, err))
                print(f"  {step:<9} {sec:8.1f} s  peak {gb:6.2f} GB (imports alone {base:.2f} GB)"
                      + (f"  FAILED: {err}" if err else ""), flush=True)
    print("\nimages       step      seconds  peak GB  imports GB  step GB  us/image")
    for n, step, sec, gb, base, err in rows:
        print(f"{n:>11,}  {step:<9} {sec:7.1f}  {gb:7.2f}  {base:10.2f}  {gb - base:7.2f}"
              f"  {1e6 * sec / n:8.1f}" + ("  FAILED" if err else ""))


if __name__ == "__main__":
    main()
