"""CAST's precomputed attributes at WebFace42M scale: the eleven CC11 filters on mapped arrays.

Writes a synthetic attribute array in CAST's format (``attrArr.npy`` N x K float32,
``paths.npy`` fixed-width unicode ``<identity folder>/<k>.jpg``, ``columns.csv``, a
boolean exclusion mask of the first 28 % of identities, as WebFace12M in WebFace42M) to
``--dir``, then, each in its own process (so peak RSS is its own; processes are
spawned, never forked: a fork after threads can deadlock):

1. facecast: the eleven CC11 benchmarks of ``config/cast11.yaml`` translated to CAST tuples
   (``rank`` fractions -> percents), cut from the mapped arrays
   (:func:`facecast.analysis.cast_filters.select_from_arrays`) and written as
   ``subset.parquet`` + ``description.txt`` each, as ``snakemake --cores 2`` runs the
   ``cast_benchmark_subset`` jobs: ``--workers`` at a time, ``--job-threads`` threads each
   (default 1, the rule's); prints the time per benchmark, the wall time and the peak RSS
   (per job, and for the jobs at once);
2. CAST's way, re-implemented from its ``filter.py``: ``np.load`` both arrays whole, one
   full ``argsort`` per rank tuple, masks multiplied, ``paths[mask]`` (``--skip-cast``
   leaves it out); prints its time and peak RSS and the ratio;
3. the DAG: ``snakemake -n`` of a config with this ``cast_arrays`` dataset and the CC11
   tuples (``mining.mode: cast_random``), timed.

The pool is every row not excluded (the synthetic rows have no NaN, no bad path), as the
manifest would give it; reading it from a 42M-row manifest adds one column read.

    python benchmarks/cast_arrays.py                 # 2,000,000 rows (quick)
    python benchmarks/cast_arrays.py --full          # 42,000,000 rows (~5 GB on disk)

Figures: docs/SCALE.md (section "CAST arrays, 42M rows").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

IMAGES_PER_ID = 21
ID_WIDTH = 7   # "0_0_" + 7 digits, WebFace42M's folder names
BLOCK = 1 << 21


def cc11_tuples() -> dict[str, list[list]]:
    """config/cast11.yaml's benchmarks as CAST tuples (rank fractions -> percents)."""
    cfg = yaml.safe_load((REPO / "config" / "cast11.yaml").read_text())
    out = {}
    for name, b in cfg["benchmarks"].items():
        out[name] = [[f["attribute"], "rank", round(f["low"] * 100, 6), round(f["high"] * 100, 6)]
                     for f in b.get("filters", [])]
    return out


def columns_needed(tuples: dict[str, list[list]]) -> list[str]:
    return list(dict.fromkeys(t[0] for ts in tuples.values() for t in ts))


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """``values`` as zero-padded decimal code points, shape (n, width)."""
    out = np.empty((len(values), width), np.uint32)
    v = values.astype(np.int64)
    for j in range(width - 1, -1, -1):
        out[:, j] = ord("0") + v % 10
        v //= 10
    return out


def make_paths(lo: int, hi: int) -> np.ndarray:
    """Paths ``0_0_<id7>/<k2>.jpg`` of rows ``lo .. hi-1`` (fixed width 18)."""
    rows = np.arange(lo, hi)
    ident, k = rows // IMAGES_PER_ID, rows % IMAGES_PER_ID
    parts = [np.tile(np.array([ord(c) for c in "0_0_"], np.uint32), (len(rows), 1)),
             _digits(ident, ID_WIDTH), np.full((len(rows), 1), ord("/"), np.uint32),
             _digits(k, 2), np.tile(np.array([ord(c) for c in ".jpg"], np.uint32),
                                    (len(rows), 1))]
    codes = np.ascontiguousarray(np.concatenate(parts, axis=1))
    return codes.view(f"<U{codes.shape[1]}").reshape(-1)


def write_arrays(out: Path, n: int, columns: list[str], seed: int = 0) -> dict[str, str]:
    """CAST-format arrays of ``n`` rows in ``out`` (written block by block)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = {"attributes": str(out / "attrArr.npy"), "paths": str(out / "paths.npy"),
            "columns": str(out / "columns.csv"), "exclude_mask": str(out / "mask.npy")}
    done = out / "done.json"
    if done.is_file() and json.loads(done.read_text()) == {"n": n, "columns": columns}:
        return spec
    rng = np.random.default_rng(seed)
    attrs = np.lib.format.open_memmap(spec["attributes"], "w+", np.float32, (n, len(columns)))
    paths = np.lib.format.open_memmap(spec["paths"], "w+", make_paths(0, 1).dtype, (n,))
    mask = np.lib.format.open_memmap(spec["exclude_mask"], "w+", np.bool_, (n,))
    n_ids = (n + IMAGES_PER_ID - 1) // IMAGES_PER_ID
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        block = rng.random((hi - lo, len(columns)), dtype=np.float32)
        for j, c in enumerate(columns):
            if c == "age_gender_age":
                block[:, j] = 15 + 60 * block[:, j]
        attrs[lo:hi] = block
        paths[lo:hi] = make_paths(lo, hi)
        mask[lo:hi] = np.arange(lo, hi) // IMAGES_PER_ID < int(0.28 * n_ids)
    attrs.flush()
    paths.flush()
    mask.flush()
    del attrs, paths, mask
    Path(spec["columns"]).write_text(",".join(columns) + "\n")
    done.write_text(json.dumps({"n": n, "columns": columns}))
    return spec


def cpu_s() -> float:
    """CPU seconds (user + system) of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_gb() -> float:
    """Peak RSS of this process and of its (waited-for) children, GB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024 ** 2


def one_benchmark(args: tuple) -> tuple[str, float, int, float, float]:
    """One cast_benchmark_subset job: filters from the mapped arrays, subset + description."""
    from facecast.analysis.cast_filters import select_from_arrays, write_array_subset
    from facecast.analysis.cast_tuples import parse_cast_filters
    from facecast.datasets.cast_arrays import open_cast_arrays

    spec, name, ts, out, ties, threads = args
    t, c = time.perf_counter(), cpu_s()
    arrays = open_cast_arrays(spec)
    pool = ~arrays.exclude_mask()
    filters = parse_cast_filters(ts, name, ties)
    values: dict = {}
    mask, report = select_from_arrays(arrays, spec["attributes"], filters, pool,
                                      workers=threads, values=values)
    d = Path(out) / "benchmarks" / name
    d.mkdir(parents=True, exist_ok=True)
    write_array_subset(arrays, spec["attributes"], spec["paths"], mask, filters, report,
                       d / "subset.parquet", d / "description.txt", values=values)
    return name, time.perf_counter() - t, int(mask.sum()), peak_rss_gb(), cpu_s() - c


def _import_facecast() -> None:
    """Pool initializer: import what a job imports, before the clock starts."""
    import facecast.analysis.cast_filters  # noqa: F401
    import facecast.datasets.cast_arrays  # noqa: F401


def _ready(_: int) -> int:
    """A started (and initialised) worker's pid."""
    time.sleep(0.05)
    return os.getpid()


def run_facecast(spec: dict, tuples: dict, out: Path, workers: int, ties: str,
                 threads: int, q: mp.Queue) -> None:
    """The eleven benchmarks as Snakemake runs them with --cores ``workers``: jobs of
    ``threads`` threads side by side (a pool of ``workers`` spawned processes, started and
    initialised before the clock starts)."""
    jobs = [(spec, name, ts, str(out), ties, threads) for name, ts in tuples.items()]
    jobs.sort(key=lambda j: -len(j[2]))        # longest first, as a scheduler would like
    with mp.get_context("spawn").Pool(workers, initializer=_import_facecast) as pool:
        while len(set(pool.map(_ready, range(2 * workers), chunksize=1))) < workers:
            pass
        t0 = time.perf_counter()
        results = pool.map(one_benchmark, jobs, chunksize=1)
    times = {name: (secs, size, cpu) for name, secs, size, _, cpu in results}
    # peak RSS: the largest job, times the jobs that run at once (an upper bound)
    rss_job = max(r[3] for r in results)
    q.put({"total": time.perf_counter() - t0, "times": {n: times[n] for n in tuples},
           "rss": rss_job * workers, "rss_job": rss_job,
           "cpu": sum(r[4] for r in results)})


def run_cast(spec: dict, tuples: dict, q: mp.Queue) -> None:
    """CAST's filter.py way: both arrays loaded whole, one argsort per rank tuple."""
    t0, c0 = time.perf_counter(), cpu_s()
    attr = np.load(spec["attributes"])
    paths = np.load(spec["paths"])
    train = np.load(spec["exclude_mask"])
    columns = Path(spec["columns"]).read_text().strip().split(",")
    t_load = time.perf_counter() - t0
    sizes = {}
    for name, ts in tuples.items():
        mask = ~train
        for attr_name, _style, lo, hi in ts:
            col = attr[:, columns.index(attr_name)]
            ranked = np.argsort(col)
            m = np.zeros(len(col), bool)
            m[ranked[round(len(col) * lo / 100):round(len(col) * hi / 100) - 1]] = True
            mask = mask * m
        sizes[name] = len(paths[mask])
    q.put({"total": time.perf_counter() - t0, "load": t_load, "sizes": sizes,
           "rss": peak_rss_gb(), "cpu": cpu_s() - c0})


def in_child(target, *args) -> dict:
    """``target(*args, queue)`` in a spawned process (its own peak RSS); what it put."""
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    res = q.get()
    p.join()
    return res


def dag_time(spec: dict, tuples: dict, work: Path) -> float:
    cfg = {"seed": 1,
           "datasets": {"webface42m": {"kind": "cast_arrays", **spec, "shard_size": 100_000}},
           "embed": {"models": {}},
           "mining": {"mode": "cast_random"},
           "benchmarks": {name: {"cast_filters": ts} for name, ts in tuples.items()}}
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "--directory", str(work), "--configfile",
                           str(work / "config.yaml"), "-n", "--cores", "2", "--quiet"],
                          capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"snakemake -n failed:\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--full", action="store_true", help="42,000,000 rows")
    ap.add_argument("--dir", default="/tmp/facecast_cast_arrays_bench")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--job-threads", type=int, default=1,
                    help="threads per job (select_from_arrays workers; the rule's: 1)")
    ap.add_argument("--skip-cast", action="store_true", help="do not time CAST's way")
    ap.add_argument("--ties", choices=["argsort", "row_order"], default="argsort",
                    help="benchmarks.<bench>.cast_ties of the facecast run")
    ap.add_argument("--keep", action="store_true", help="keep the arrays for the next run")
    args = ap.parse_args()
    n = 42_000_000 if args.full else args.rows
    tuples = cc11_tuples()
    columns = columns_needed(tuples)
    base = Path(args.dir)
    need = n * (4 * len(columns) + 4 * 18 + 1) * 1.1
    free = shutil.disk_usage(base.parent if not base.exists() else base).free
    if free < need:
        raise SystemExit(f"{free / 1e9:.1f} GB free at {base}, {need / 1e9:.1f} GB needed")
    print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} "
          "(timings scale with the cores other processes leave free)")
    t = time.perf_counter()
    spec = write_arrays(base / "arrays", n, columns)
    print(f"arrays: {n:,} x {len(columns)} float32 + paths in {base / 'arrays'} "
          f"({time.perf_counter() - t:.1f} s to write or reuse)")
    fc = in_child(run_facecast, spec, tuples, base / "out", args.workers, args.ties,
                  args.job_threads)
    print(f"\nfacecast, mapped arrays, cast_ties {args.ties}, {args.workers} jobs of "
          f"{args.job_threads} thread(s) side by side:")
    for name, (secs, size, cpu) in fc["times"].items():
        print(f"  {name:20s} {secs:7.2f} s wall {cpu:7.2f} s CPU  {size:>12,} images")
    print(f"  {'total':20s} {fc['total']:7.2f} s wall {fc['cpu']:7.2f} s CPU (idle "
          f"{args.workers}-core estimate: {fc['cpu'] / args.workers:.1f} s)")
    print(f"  peak RSS {fc['rss_job']:.2f} GB per job, {fc['rss']:.2f} GB for {args.workers} "
          "at once (upper bound)")
    if not args.skip_cast:
        cast = in_child(run_cast, spec, tuples)
        print(f"\nCAST's filter.py way (arrays loaded whole: {cast['load']:.1f} s):")
        print(f"  total {cast['total']:.2f} s wall {cast['cpu']:.2f} s CPU (one process)  "
              f"peak RSS {cast['rss']:.2f} GB")
        print(f"  ratio CAST / facecast: wall {cast['total'] / fc['total']:.2f}x, CPU "
              f"{cast['cpu'] / fc['cpu']:.2f}x")
    dag = dag_time(spec, tuples, base / "dag")
    print(f"\nsnakemake -n, cast_arrays dataset of {n:,} rows + CC11: {dag:.1f} s")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
