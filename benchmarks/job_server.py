"""What the warm job server (facecast.job_server) saves: the same Snakemake run with every job
in its own process (``FACECAST_JOB_SERVER=0``) and with the server, cold and warm.

Prints, per way, the run's wall seconds, the machine's busy CPU-seconds over it (from
/proc/stat: served jobs are not children of Snakemake, so its own rusage would miss them),
and the jobs' bytes compared with the run without the server.

* quick (default): ``--jobs`` (16) small rule jobs of a workflow written to a temporary
  folder; each job does what a small stage does (pandas and pyarrow: a Parquet table;
  matplotlib: a PNG figure through facecast.report.figures) on a few thousand rows. Cold:
  a new server folder, so the run's first job starts the server and runs itself; warm: the
  same folder again, the server already up.
* ``--demo``: the repository's demo (config.yaml, as ``make demo`` runs it) in three fresh
  working folders. About 7 minutes on 2 cores.

Each way gets its own ``FACECAST_JOB_SERVER_DIR`` (a temporary folder), so no server of
another run is used, and each server exits ``FACECAST_JOB_SERVER_IDLE`` (20) seconds
after its run. Linux only (the job server is).

    .venv/bin/python benchmarks/job_server.py [--jobs 16] [--cores 2]
    .venv/bin/python benchmarks/job_server.py --demo
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: what ``make demo`` passes besides ``--cores`` (Makefile: DEMO_THREADS, greedy scheduler)
DEMO_ARGS = ["--scheduler", "greedy", "--set-threads", "faces=1", "embed=1",
             "attributes_score=1", "attributes_ofiq=1", "mine_pairs=1", "mitigation=1"]
#: run records that differ between two runs by nature
SKIP_DIRS = {"logs", "runtime", ".snakemake"}

SNAKEFILE = """
rule all:
    input: expand("out/{{i}}.parquet", i=range({jobs}))

rule small_stage:
    output: table="out/{{i}}.parquet", figure="out/{{i}}.png"
    log: "logs/{{i}}.log"
    script: "small_stage.py"
"""

SCRIPT = """
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    import numpy as np
    import pandas as pd

    from facecast.io.parquet_io import write_parquet
    from facecast.report.figures import pyplot, save_figure

    i = int(ctx.wildcards["i"])
    rng = np.random.default_rng(i)
    table = pd.DataFrame({"score": rng.normal(size=5000), "group": rng.integers(0, 4, 5000)})
    summary = table.groupby("group")["score"].describe().reset_index()
    write_parquet(summary, snakemake.output.table, provenance=ctx.provenance)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.hist(table["score"], bins=40)
    save_figure(fig, snakemake.output.figure)
"""


def busy_cpu_seconds() -> float:
    """CPU-seconds the whole machine spent busy (not idle or waiting on I/O) since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(v) for v in fields]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def run_way(cmd: list[str], work: Path, server: str | None) -> tuple[float, float]:
    """(wall s, machine busy CPU-s) of one Snakemake run; ``server``: its server folder,
    or None for every job in its own process."""
    env = dict(os.environ, FACECAST_JOB_SERVER_IDLE="20")
    if server is None:
        env["FACECAST_JOB_SERVER"] = "0"
    else:
        env["FACECAST_JOB_SERVER_DIR"] = server
    cpu0, t0 = busy_cpu_seconds(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, busy_cpu_seconds() - cpu0
    if proc.returncode != 0:
        sys.exit(f"run in {work} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return wall, cpu


def outputs(work: Path, root: str) -> list[Path]:
    """Every output file under ``work/root``, relative, without run records."""
    base = work / root
    return sorted(p.relative_to(work) for p in base.rglob("*")
                  if p.is_file() and not set(p.relative_to(base).parts[:-1]) & SKIP_DIRS)


def differing(a: Path, b: Path, root: str) -> tuple[int, list[str]]:
    """(files compared, files whose bytes differ or that only one run wrote)."""
    fa, fb = outputs(a, root), set(outputs(b, root))
    bad = sorted(str(p) for p in set(fa) ^ fb)
    bad += [str(p) for p in fa if p in fb and not filecmp.cmp(a / p, b / p, shallow=False)]
    return len(fa), bad


def quick_workflow(folder: Path, jobs: int) -> None:
    folder.mkdir(parents=True)
    (folder / "Snakefile").write_text(SNAKEFILE.format(jobs=jobs))
    (folder / "small_stage.py").write_text(SCRIPT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=16, help="small jobs of the quick run")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--demo", action="store_true", help="the demo instead (~7 min)")
    args = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("the job server (and this benchmark) needs Linux")
    snakemake = [sys.executable, "-m", "snakemake", "--cores", str(args.cores)]
    with tempfile.TemporaryDirectory(prefix="facecast-js-bench-") as tmp:
        tmp_path = Path(tmp)
        server_dir = tmp_path / "server"
        server_dir.mkdir(mode=0o700)
        ways = [("own processes", None), ("server, cold", str(server_dir)),
                ("server, warm", str(server_dir))]
        if args.demo:
            cmd = [*snakemake, "-s", str(REPO / "Snakefile"), *DEMO_ARGS]
            root, what = "results", "the demo (config.yaml)"
        else:
            cmd, root = [*snakemake, "-s", "Snakefile"], "out"
            what = f"{args.jobs} small jobs"
        print(f"{what}, --cores {args.cores}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}")
        works, rows = [], []
        for k, (name, server) in enumerate(ways):
            work = tmp_path / f"run{k}"
            if args.demo:
                work.mkdir()
                shutil.copy(REPO / "config.yaml", work / "config.yaml")
            else:
                quick_workflow(work, args.jobs)
            wall, cpu = run_way(cmd, work, server)
            works.append(work)
            n, bad = differing(works[0], work, root)
            same = "-" if k == 0 else ("all identical" if not bad else
                                       f"{len(bad)} of {n} differ: {bad[:5]}")
            rows.append((name, wall, cpu, same))
        print(f"{'way':15s} {'wall s':>8s} {'machine CPU-s':>14s}  bytes vs own processes")
        for name, wall, cpu, same in rows:
            print(f"{name:15s} {wall:8.1f} {cpu:14.1f}  {same}")
        base_wall, base_cpu = rows[0][1], rows[0][2]
        print(f"warm server: {base_wall / rows[2][1]:.2f}x the wall speed, "
              f"{base_cpu - rows[2][2]:.1f} CPU-s less than own processes")


if __name__ == "__main__":
    main()
