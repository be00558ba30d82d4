"""How long `snakemake -n` takes to build the whole DAG for a WebFace-scale dataset.

Writes a synthetic manifest for N images (default 42M, shard_size 10,000 -> 4,200 shards)
into a temporary working directory, then times a dry run of every stage and reports the
peak memory of the Snakemake process. By default the manifest holds one row per shard
with the full shard list in its footer: building the DAG reads only the footer, so this
measures exactly what a real 42M-row manifest costs the DAG (use --full to write every
row anyway). Goal: under 60 s and under 4 GB on 2 cores.

Prints the DAG build time (wall clock, and the CPU time, which a busy machine does not
inflate), the peak memory, and a table of jobs per rule (with the share of all jobs, and
the SLURM jobs each rule becomes under the groups of profiles/slurm).

    python benchmarks/dag_scale.py [--images 42000000] [--shard-size 10000] [--full]
                                   [--profile-groups profiles/slurm/profile.yaml]
    python benchmarks/dag_scale.py --overlay config/cast11.yaml --models 3   # CAST-sized

On a machine with SLURM's client installed but no controller running, every Snakemake
start waits ~10 s for `scontrol` (the SLURM executor plugin asks it for its config):
that wait is wall time, not CPU time.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from facecast.datasets.manifest import shard_name  # noqa: E402
from facecast.io.parquet_io import ParquetStreamWriter  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def write_manifest(path: Path, n_images: int, shard_size: int, full: bool) -> int:
    n_shards = -(-n_images // shard_size)
    shard_ids = [shard_name(i) for i in range(n_shards)]
    schema = pa.schema([("image_id", pa.string()), ("path", pa.string()),
                        ("identity", pa.string()), ("split", pa.string()),
                        ("shard", pa.string()), ("exclude", pa.bool_()),
                        ("status", pa.string()), ("message", pa.string()),
                        ("single_image", pa.bool_())])
    meta = {"facecast.shards": json.dumps(shard_ids), "facecast.shard_size": str(shard_size),
            "facecast.n_images": str(n_images)}
    with ParquetStreamWriter(path, schema, provenance={"stage": "manifest", "synthetic": True},
                             metadata=meta) as w:
        for s, sid in enumerate(shard_ids):
            rows = min(shard_size, n_images - s * shard_size) if full else 1
            idx = range(s * shard_size, s * shard_size + rows)
            paths = [f"id{i // 20:07d}/{i % 20}.jpg" for i in idx]
            w.write(pa.table({
                "image_id": paths, "path": paths, "identity": [p[:9] for p in paths],
                "split": ["all"] * rows, "shard": [sid] * rows, "exclude": [False] * rows,
                "status": ["ok"] * rows, "message": [""] * rows, "single_image": [False] * rows,
            }))
    return n_shards


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=42_000_000)
    ap.add_argument("--shard-size", type=int, default=10_000)
    ap.add_argument("--full", action="store_true", help="write every manifest row")
    ap.add_argument("--config", default=str(REPO / "config.yaml"),
                    help="stage settings to use (datasets are replaced)")
    ap.add_argument("--overlay", action="append", default=[],
                    help="YAML merged over the config (repeatable), e.g. config/cast11.yaml")
    ap.add_argument("--models", type=int, default=0,
                    help="replace embed.models by this many copies of the first model")
    ap.add_argument("--profile-groups", default=str(REPO / "profiles/slurm/profile.yaml"),
                    help="profile whose groups/group-components turn jobs into SLURM jobs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="facecast-dag-") as tmp:
        work = Path(tmp)
        (work / "data").mkdir()
        t0 = time.perf_counter()
        n_shards = write_manifest(work / "results/web/manifest.parquet", args.images,
                                  args.shard_size, args.full)
        t_manifest = time.perf_counter() - t0
        with open(args.config) as fh:
            cfg = yaml.safe_load(fh)
        for overlay in args.overlay:
            with open(overlay) as fh:
                cfg = deep_merge(cfg, yaml.safe_load(fh))
        if args.models:
            first = dict(next(iter(cfg["embed"]["models"].values())))
            cfg["embed"]["models"] = {f"m{k}": dict(first) for k in range(args.models)}
            cfg["mining"]["reference_model"] = "m0"
            cfg["evaluate"]["models"] = []
        cfg["datasets"] = {"web": {"kind": "folder", "root": str(work / "data"),
                                   "shard_size": args.shard_size}}
        (work / "config.yaml").write_text(yaml.safe_dump(cfg))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
               "--directory", str(work), "--configfile", str(work / "config.yaml"),
               "-n", "--quiet", "rules", "--cores", "2"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        t_dag = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_gb = usage.ru_maxrss / 1024**2
        cpu_s = usage.ru_utime + usage.ru_stime
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            raise SystemExit(f"dry run failed ({proc.returncode})")
        counts = parse_job_counts(proc.stdout)
    total = sum(counts.values())
    slurm_jobs = slurm_job_counts(counts, Path(args.profile_groups))
    benches = len(cfg.get("benchmarks", {}))
    print(f"config            {len(cfg['embed']['models'])} embed models, "
          f"{len(cfg['attributes'].get('scorers', []))} attribute scorers, {benches} benchmarks")
    print(f"images            {args.images:,}")
    print(f"shards            {n_shards:,} x {args.shard_size:,}")
    print(f"manifest written  {t_manifest:.1f} s ({'full' if args.full else 'one row per shard'})")
    print(f"snakemake -n      {t_dag:.1f} s wall, {cpu_s:.1f} s CPU   (goal < 60 s)")
    print(f"peak memory       {peak_gb:.2f} GB (goal < 4 GB)")
    print(f"jobs              {total:,} ({total / t_dag:,.0f} jobs per second of DAG build)")
    print(f"SLURM jobs        {sum(slurm_jobs.values()):,} with the groups of "
          f"{args.profile_groups}")
    print()
    print(f"{'rule':<24}{'jobs':>10}{'share':>8}{'SLURM jobs':>12}")
    for rule, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{rule:<24}{n:>10,}{n / total:>8.1%}{slurm_jobs[rule]:>12,}")


def deep_merge(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` (mappings recursively, everything else replaced)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = (deep_merge(out[key], value)
                    if isinstance(value, dict) and isinstance(out.get(key), dict) else value)
    return out


def parse_job_counts(stdout: str) -> dict[str, int]:
    """``rule -> jobs`` from the job-stats table of ``snakemake -n --quiet rules``."""
    counts: dict[str, int] = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            counts[parts[0]] = int(parts[1])
    return counts


def slurm_job_counts(counts: dict[str, int], profile: Path) -> dict[str, int]:
    """SLURM jobs per rule under a profile's groups (local rule ``all``: none)."""
    prof = yaml.safe_load(profile.read_text()) if profile.is_file() else {}
    groups = prof.get("groups") or {}
    components = prof.get("group-components") or {}
    out = {}
    for rule, n in counts.items():
        per_job = int(components.get(groups.get(rule), 1)) if rule in groups else 1
        out[rule] = 0 if rule == "all" else -(-n // per_job)
    return out


if __name__ == "__main__":
    main()
