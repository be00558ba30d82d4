"""How long `snakemake -n` takes to build the whole DAG for a WebFace-scale dataset.

Writes a synthetic manifest for N images, sharded as ``shard_size: auto`` shards them
(10,000 images per shard, and above 10M images at most 1,000 shards: 42,000 each at 42M;
``--shard-size 10000`` for fixed shards), into a temporary working directory, then times
a dry run of every stage of the config (by default the repository's demo config.yaml) and
reports the peak memory of the Snakemake process. By default it runs two sizes, a tenth
of the goal (4.2M images, 420 shards: seconds) and then the goal itself, the WebFace42M
size (42M images, 1,000 shards: under 30 s and under 4 GB on 2 cores; 4,200 shards with
``--shard-size 10000``), so a cost that grows with the jobs shows in both; ``--full``
runs the goal only, ``--n-images N`` one size of your choice.

The dataset is a valid config, checked at parse time like any other: a ``table`` dataset
whose manifest table (``data/webface.parquet``) carries the label columns of the config's
own datasets (the demo's synthetic labels), so every benchmark filter, fairness attribute
and covariate the config names exists. The table holds its header only: the parse-time
checks read nothing else, and the ingest job never runs, because the sharded manifest it
would write (``results/web/manifest.parquet``) is already there. That manifest holds one
row per shard by default, with the full shard list in its footer: building the DAG reads
only the footer, so this measures exactly what a real 42M-row manifest costs the DAG
(``--all-rows`` writes every row anyway).

Prints the DAG build time (wall clock, and the CPU time, which a busy machine does not
inflate), the peak memory, and a table of jobs per rule (with the share of all jobs, and
the SLURM jobs each rule becomes under the groups of profiles/slurm).

    python benchmarks/dag_scale.py [--n-images 4200000 | --full] [--shard-size auto|10000]
                                   [--all-rows] [--profile-groups profiles/slurm/profile.yaml]
                                   [--config config.yaml] [--overlay more.yaml] [--models N]
    python benchmarks/dag_scale.py --full --cast   # CAST-sized

``--cast`` is the demo config with config/cast11.yaml merged over it, 3 embed models
(copies of the first) and the scorers whose columns the C11 benchmarks read (FairFace, a
CelebA-40 head, pyiqa's PaQ-2-PiQ), their weight files stood in by files that satisfy the
parse-time checks (a dry run loads no weights).

On a machine with SLURM's client installed but no controller running, every Snakemake
start waits ~10 s for `scontrol` (the SLURM executor plugin asks it for its config):
that wait is wall time, not CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from facecast.config.columns import dataset_labels  # noqa: E402
from facecast.datasets.manifest import resolve_shard_size, shard_name  # noqa: E402
from facecast.io.parquet_io import ParquetStreamWriter  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: the WebFace42M size the goal is stated for (``--full``)
FULL_IMAGES = 42_000_000
#: the default size: a tenth of it, about a minute on 2 cores
DEFAULT_IMAGES = 4_200_000
#: the benchmark's dataset name
DATASET = "web"
#: the CAST-sized run (``--cast``): the C11 benchmarks over this many embed models
CAST_OVERLAY = REPO / "config" / "cast11.yaml"
CAST_MODELS = 3
#: the attribute heads' module (weight file names, CelebA-40 labels)
HEADS = "facecast.attributes.heads"
#: manifest columns besides the labels (as the ingest writes them)
MANIFEST_FIELDS = [("image_id", pa.string()), ("path", pa.string()), ("identity", pa.string()),
                   ("split", pa.string()), ("shard", pa.string()), ("exclude", pa.bool_()),
                   ("status", pa.string()), ("message", pa.string()),
                   ("single_image", pa.bool_())]


@dataclass
class DagFigures:
    """What one benchmark run measured."""

    n_images: int
    n_shards: int
    shard_size: int
    shard_setting: str
    manifest_s: float
    dag_wall_s: float
    dag_cpu_s: float
    peak_gb: float
    jobs: dict[str, int]
    slurm_jobs: dict[str, int]
    config: dict[str, Any] = field(repr=False)
    plan: list[str] = field(default_factory=list)

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs.values())


def write_manifest(path: Path, n_images: int, shard_size: int, labels: list[str],
                   all_rows: bool) -> int:
    """Write a sharded manifest of ``n_images`` rows (one per shard unless ``all_rows``;
    the footer always lists every shard and counts every image); return the shard count."""
    n_shards = -(-n_images // shard_size)
    shard_ids = [shard_name(i) for i in range(n_shards)]
    schema = pa.schema(MANIFEST_FIELDS + [(c, pa.float32()) for c in labels])
    meta = {"facecast.shards": json.dumps(shard_ids), "facecast.shard_size": str(shard_size),
            "facecast.n_images": str(n_images),
            "facecast.status_counts": json.dumps({"ok": n_images})}
    with ParquetStreamWriter(path, schema, provenance={"stage": "manifest", "synthetic": True},
                             metadata=meta) as w:
        for s, sid in enumerate(shard_ids):
            rows = min(shard_size, n_images - s * shard_size) if all_rows else 1
            idx = range(s * shard_size, s * shard_size + rows)
            paths = [f"id{i // 20:07d}/{i % 20}.jpg" for i in idx]
            cols: dict[str, list] = {
                "image_id": paths, "path": paths, "identity": [p[:9] for p in paths],
                "split": ["all"] * rows, "shard": [sid] * rows, "exclude": [False] * rows,
                "status": ["ok"] * rows, "message": [""] * rows, "single_image": [False] * rows,
            }
            cols.update({c: [0.0] * rows for c in labels})
            w.write(pa.table(cols))
    return n_shards


def write_table_header(path: Path, labels: list[str]) -> None:
    """The dataset's manifest table, header only (path, identity, split and ``labels``)."""
    fields = [pa.field(c, pa.string()) for c in ("path", "identity", "split")]
    fields += [pa.field(c, pa.float32()) for c in labels]
    pq.write_table(pa.schema(fields).empty_table(), path)


def deep_merge(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` (mappings recursively, everything else replaced)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = (deep_merge(out[key], value)
                    if isinstance(value, dict) and isinstance(out.get(key), dict) else value)
    return out


def with_models(cfg: dict, n_models: int) -> dict:
    """``cfg`` with ``embed.models`` replaced by ``n_models`` copies (m0, m1, ...) of its
    first model, and every key that names a model pointed at the copies."""
    cfg = dict(cfg)
    first = dict(next(iter(cfg["embed"]["models"].values())))
    cfg["embed"] = {**cfg["embed"], "models": {f"m{k}": dict(first) for k in range(n_models)}}
    cfg["mining"] = {**cfg.get("mining", {}), "reference_model": "m0"}
    for name in ("evaluate", "fairness", "covariates", "quality", "demographics",
                 "identification"):
        if isinstance(cfg.get(name), dict) and cfg[name].get("models"):
            cfg[name] = {**cfg[name], "models": []}  # [] = every model / evaluate.models
    fair = cfg.get("fairness")
    if isinstance(fair, dict) and isinstance(fair.get("leaderboard"), dict) \
            and fair["leaderboard"].get("baseline"):
        cfg["fairness"] = {**fair, "leaderboard": {**fair["leaderboard"], "baseline": "m0"}}
    audit = cfg.get("audit")
    if isinstance(audit, dict) and isinstance(audit.get("model"), dict) \
            and audit["model"].get("embedding"):
        cfg["audit"] = {**audit, "model": {**audit["model"], "embedding": "m0"}}
    return cfg


def with_cast_scorers(cfg: dict, work: Path) -> tuple[dict, dict[str, str]]:
    """``cfg`` with the attribute scorers the C11 benchmarks read (FairFace, a CelebA-40
    head, pyiqa's PaQ-2-PiQ) and stand-ins for their weight files under ``work``: empty
    files where the checks only look for the file, a checkpoint holding only its label
    list for the CelebA-40 head (the checks read its labels). Returns the config and the
    environment the dry run needs (``TORCH_HOME`` pointing at the stand-ins)."""
    import torch

    from facecast.config.util import module_constant

    torch_home = work / "torch"
    fairface = torch_home / "hub" / "checkpoints" / module_constant(HEADS, "FAIRFACE_FILE")
    required = module_constant("facecast.attributes.iqa", "REQUIRED_FILES")
    for path in [fairface] + [torch_home / rel for rel in required["paq2piq"]]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    celeba = work / "weights" / "celeba40.pt"
    celeba.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"labels": list(module_constant(HEADS, "CELEBA_ATTRIBUTES"))}, celeba)
    attrs = dict(cfg["attributes"])
    attrs["scorers"] = list(dict.fromkeys([*attrs.get("scorers", []), "fairface", "celeba40"]))
    attrs["pyiqa"] = {**attrs.get("pyiqa", {}), "metrics": ["paq2piq"]}
    attrs["celeba40"] = {**attrs.get("celeba40", {}), "weights": str(celeba)}
    return {**cfg, "attributes": attrs}, {"TORCH_HOME": str(torch_home)}


@dataclass
class Setup:
    """The config to time, the label columns its table dataset carries, and the
    environment variables the dry run needs."""

    config: dict[str, Any]
    labels: list[str]
    env: dict[str, str] = field(default_factory=dict)


def build_config(args: argparse.Namespace, work: Path) -> Setup:
    """The config to time: stage settings from ``--config`` + overlays (+ the CAST-sized
    changes), datasets replaced by the benchmark's table dataset, whose header (and the
    weight-file stand-ins of ``--cast``) it writes under ``work``."""
    with open(args.config) as fh:
        cfg = yaml.safe_load(fh)
    overlays = ([str(CAST_OVERLAY)] if args.cast else []) + args.overlay
    for overlay in overlays:
        with open(overlay) as fh:
            cfg = deep_merge(cfg, yaml.safe_load(fh))
    n_models = args.models or (CAST_MODELS if args.cast else 0)
    if n_models:
        cfg = with_models(cfg, n_models)
    env: dict[str, str] = {}
    if args.cast:
        cfg, env = with_cast_scorers(cfg, work)
    # the labels of the config's own datasets (the demo's synthetic ones): every column
    # its benchmarks, fairness groups and covariates name
    found = dataset_labels(cfg)
    labels = sorted(set().union(*(cols for cols in found.values() if cols)))
    table = work / "data" / "webface.parquet"
    (work / "data").mkdir(exist_ok=True)
    write_table_header(table, labels)
    cfg["datasets"] = {DATASET: {"kind": "table", "root": str(work / "data"),
                                 "manifest": str(table), "shard_size": args.shard_size}}
    return Setup(cfg, labels, env)


#: starts a command, waits for it and writes its own rusage as JSON to argv[1]. A child
#: started straight from a large process (a pytest worker) reports that process's peak
#: RSS as its own: Linux keeps the pre-exec memory's high-water mark, and Python's
#: subprocess vforks, so the pre-exec memory is the parent's. Started from this small
#: launcher, the child's figure is its own.
RUSAGE_LAUNCHER = (
    "import json, os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "_, status, u = os.wait4(p.pid, 0)\n"
    "with open(sys.argv[1], 'w') as fh:\n"
    "    json.dump({'rc': os.waitstatus_to_exitcode(status), 'maxrss_kib': u.ru_maxrss,\n"
    "               'cpu_s': u.ru_utime + u.ru_stime}, fh)\n")


def dry_run(work: Path, config_path: Path, env: dict[str, str]
            ) -> tuple[int, str, str, float, float, float]:
    """``snakemake -n`` of ``rule all`` in ``work`` (with ``env`` added to the
    environment): exit code, stdout, stderr, wall seconds, CPU seconds and peak memory
    (GB) of that process alone (measured by :data:`RUSAGE_LAUNCHER`)."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--directory", str(work), "--configfile", str(config_path),
           "-n", "--quiet", "rules", "--cores", "2"]
    out_path, err_path = work / "snakemake.out", work / "snakemake.err"
    usage_path = work / "snakemake.rusage.json"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", RUSAGE_LAUNCHER, str(usage_path), *cmd],
                       stdout=out, stderr=err, cwd=work, env={**os.environ, **env},
                       check=True)
        wall = time.perf_counter() - t0
    usage = json.loads(usage_path.read_text())
    peak_gb = usage["maxrss_kib"] / 1024**2  # KiB on Linux
    return (usage["rc"], out_path.read_text(), err_path.read_text(), wall, usage["cpu_s"],
            peak_gb)


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


def run_benchmark(args: argparse.Namespace) -> DagFigures:
    """Write the manifest and config into a temporary folder and time the dry run."""
    with tempfile.TemporaryDirectory(prefix="facecast-dag-") as tmp:
        work = Path(tmp)
        setup = build_config(args, work)
        cfg = setup.config
        t0 = time.perf_counter()
        shard_size = resolve_shard_size(args.shard_size, args.n_images)
        n_shards = write_manifest(work / "results" / DATASET / "manifest.parquet",
                                  args.n_images, shard_size, setup.labels, args.all_rows)
        t_manifest = time.perf_counter() - t0
        config_path = work / "config.yaml"
        config_path.write_text(yaml.safe_dump(cfg))
        rc, stdout, stderr, wall, cpu, peak_gb = dry_run(work, config_path, setup.env)
    if rc != 0:
        print(stdout[-3000:], stderr[-6000:], file=sys.stderr)
        raise SystemExit(f"dry run failed ({rc})")
    counts = parse_job_counts(stdout)
    if not counts:
        print(stdout[-3000:], stderr[-3000:], file=sys.stderr)
        raise SystemExit("dry run printed no job table")
    plan = [line.removeprefix("facecast plan: ") for line in stderr.splitlines()
            if line.startswith("facecast plan: ")]
    return DagFigures(n_images=args.n_images, n_shards=n_shards, shard_size=shard_size,
                      shard_setting=str(args.shard_size),
                      manifest_s=t_manifest, dag_wall_s=wall, dag_cpu_s=cpu, peak_gb=peak_gb,
                      jobs=counts, slurm_jobs=slurm_job_counts(counts, Path(args.profile_groups)),
                      config=cfg, plan=plan)


def report(fig: DagFigures, args: argparse.Namespace) -> None:
    """Print the figures and the jobs-per-rule table."""
    cfg, total = fig.config, fig.total_jobs
    print(f"config            {len(cfg['embed']['models'])} embed models, "
          f"{len(cfg['attributes'].get('scorers', []))} attribute scorers, "
          f"{len(cfg.get('benchmarks', {}))} benchmarks")
    print(f"images            {fig.n_images:,}")
    print(f"shards            {fig.n_shards:,} x {fig.shard_size:,} "
          f"(shard_size: {fig.shard_setting})")
    print(f"manifest written  {fig.manifest_s:.1f} s "
          f"({'every row' if args.all_rows else 'one row per shard'})")
    print(f"snakemake -n      {fig.dag_wall_s:.1f} s wall, {fig.dag_cpu_s:.1f} s CPU   "
          "(goal at 42M: < 30 s)")
    print(f"peak memory       {fig.peak_gb:.2f} GB (goal at 42M: < 4 GB)")
    print(f"jobs              {total:,} ({total / fig.dag_wall_s:,.0f} jobs per second of "
          "DAG build)")
    print(f"SLURM jobs        {sum(fig.slurm_jobs.values()):,} with the groups of "
          f"{args.profile_groups}")
    for line in fig.plan:
        print(f"plan              {line}")
    print()
    print(f"{'rule':<24}{'jobs':>10}{'share':>8}{'SLURM jobs':>12}")
    for rule, n in sorted(fig.jobs.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{rule:<24}{n:>10,}{n / total:>8.1%}{fig.slurm_jobs[rule]:>12,}")


def _shard_size(text: str) -> int | str:
    """``--shard-size``: a number of images, or ``auto`` (checked as the config's is)."""
    if text == "auto":
        return text
    try:
        return resolve_shard_size(int(text), 1)
    except ValueError as exc:  # not a number, or below 1 (DatasetError)
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--n-images", "--images", dest="n_images", type=int, default=None,
                      help=f"one size: this many images (default: {DEFAULT_IMAGES:,}, then "
                           f"{FULL_IMAGES:,})")
    size.add_argument("--full", dest="n_images", action="store_const", const=FULL_IMAGES,
                      help=f"the goal's size only: {FULL_IMAGES:,} images")
    ap.add_argument("--shard-size", type=_shard_size, default="auto",
                    help="images per shard, or auto (the default, as the config's default: "
                         "10,000, and at most 1,000 shards above 10M images)")
    ap.add_argument("--all-rows", action="store_true",
                    help="write every manifest row (default: one row per shard)")
    ap.add_argument("--config", default=str(REPO / "config.yaml"),
                    help="stage settings to use (datasets are replaced)")
    ap.add_argument("--overlay", action="append", default=[],
                    help="YAML merged over the config (repeatable), e.g. config/cast11.yaml")
    ap.add_argument("--models", type=int, default=0,
                    help="replace embed.models by this many copies of the first model")
    ap.add_argument("--cast", action="store_true",
                    help=f"CAST-sized: the overlay {CAST_OVERLAY.relative_to(REPO)}, its "
                         f"scorers (weight files stood in), {CAST_MODELS} embed models unless "
                         "--models")
    ap.add_argument("--profile-groups", default=str(REPO / "profiles/slurm/profile.yaml"),
                    help="profile whose groups/group-components turn jobs into SLURM jobs")
    args = ap.parse_args(argv)
    args.sizes = [DEFAULT_IMAGES, FULL_IMAGES] if args.n_images is None else [args.n_images]
    args.n_images = args.sizes[0]
    if min(args.sizes) < 1:
        ap.error("--n-images must be positive")
    return args


def main(argv: list[str] | None = None) -> DagFigures:
    """Run the benchmark with command-line ``argv`` at each size; print every figure and
    return those of the last size."""
    args = parse_args(argv)
    fig = None
    for k, n in enumerate(args.sizes):
        if k:
            print("\n" + "=" * 60 + "\n")
        args.n_images = n
        fig = run_benchmark(args)
        report(fig, args)
    assert fig is not None
    return fig


if __name__ == "__main__":
    main()
