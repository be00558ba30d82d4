"""The SLURM profile on a real scheduler: a one-node SLURM cluster on this machine.

``tests/slurm/local-slurm start`` (the project's one-node SLURM helper) installs (first time, via apt-get) and starts
munge, MariaDB, slurmdbd, slurmctld and slurmd with one partition ``cpu``; the test runs
``rule all`` of the tiny demo with ``--profile profiles/slurm --profile
profiles/test-slurm`` and checks that

- every job except the workflow's local rules (``all`` and the shard indexes, which only
  read shard footers) went through ``sbatch``: ``sacct`` lists, for this working
  directory, SLURM jobs whose submit lines name exactly the Snakemake jobs the run printed
  (``--target-jobs rule:wildcards``), all COMPLETED, with group jobs (several Snakemake
  jobs in one SLURM job, as the profiles' ``groups`` ask);
- the same jobs ran as in an uninterrupted local run (the scale tests' shared reference
  run), and every output file is byte-identical to that run's: Parquet (data and
  provenance), PNG, SVG, Markdown, HTML, CSV, TSV, text, lists, JSON and JPEG crops. Only run
  records are left out (``logs/`` and the ``runtime/`` benchmark timings differ by
  nature). Two runs from scratch, in two folders, on two executors: this is the suite's
  proof of issue 16.11's first claim, that the same config gives the same bytes in every
  file (tests/test_determinism.py proves the second, that a killed run resumes to them).
  Where bytes differ, the failure says what differs inside the files
  (:func:`scale_support.artifact_digest`: tables, provenance, pixels).

The daemons are stopped afterwards unless they were already running before the test.
Needs root (CI has it).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import LOCAL_SLURM, REPO
from scale_support import (
    artifact_digest,
    byte_differences,
    diff_digests,
    reference_run,
    run,
    snakemake_cmd,
)

LOCAL_RULES = {"all", "faces_index", "embed_index", "plan"}   # localrules of the workflow
JOB_HEADER = re.compile(r"^\s*(local)?(rule|checkpoint) (\w+):\s*$")


def _slurm_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return proc.returncode == 0 and bool(re.search(r"idle|mixed|alloc", proc.stdout))


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running one-node SLURM cluster (started here; stopped again if we started it)."""
    assert LOCAL_SLURM.is_file(), f"missing {LOCAL_SLURM}"
    was_up = _slurm_up()
    t0 = time.perf_counter()
    # two job slots per core: the overlay's group jobs run their members one at a time,
    # and two of them side by side share the cores (profiles/test-slurm)
    env = dict(os.environ, LOCAL_SLURM_CPUS=str(2 * (os.cpu_count() or 1)))
    proc = subprocess.run([str(LOCAL_SLURM), "start"], capture_output=True, text=True,
                          timeout=1200, env=env)
    assert proc.returncode == 0, (f"local-slurm start failed ({proc.returncode}):\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"local SLURM up in {time.perf_counter() - t0:.1f} s")
    yield
    if not was_up:
        subprocess.run([str(LOCAL_SLURM), "stop"], capture_output=True, text=True, timeout=300)


def printed_jobs(log: str) -> dict[str, set[tuple[str, str]]]:
    """Jobs a Snakemake run printed: {'local': {(rule, wildcards)}, 'remote': {...}}."""
    out: dict[str, set[tuple[str, str]]] = {"local": set(), "remote": set()}
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = JOB_HEADER.match(line)
        if not m:
            continue
        wildcards = ""
        for follow in lines[i + 1:i + 30]:
            if not follow.strip() or JOB_HEADER.match(follow):
                break
            w = re.match(r"^\s*wildcards: (.*)$", follow)
            if w:
                wildcards = ",".join(sorted(p.strip() for p in w.group(1).split(", ")))
        out["local" if m.group(1) else "remote"].add((m.group(3), wildcards))
    return out


def sacct_jobs(workdir: Path, since: str) -> list[dict]:
    """SLURM jobs submitted from ``workdir`` since ``since``: id, state, Snakemake jobs."""
    proc = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "--delimiter", "\t",
                           "-S", since, "--format", "JobID,JobName,State,WorkDir,SubmitLine"],
                          capture_output=True, text=True, check=True)
    jobs = []
    for line in proc.stdout.splitlines():
        parts = line.split("\t", 4)
        if len(parts) < 5 or parts[3] != str(workdir):
            continue
        # SubmitLine shows --wrap's command unquoted: its words follow "--wrap" inline.
        argv = shlex.split(parts[4].replace("--wrap=", "--wrap "))
        wrapped = argv[argv.index("--wrap") + 1:] if "--wrap" in argv else []
        targets = []
        if "--target-jobs" in wrapped:
            for arg in wrapped[wrapped.index("--target-jobs") + 1:]:
                if arg.startswith("--"):
                    break
                rule, _, wc = arg.partition(":")
                targets.append((rule, ",".join(sorted(wc.split(","))) if wc else ""))
        comment = argv[argv.index("--comment") + 1] if "--comment" in argv else ""
        jobs.append({"id": parts[0], "state": parts[2], "comment": comment,
                     "targets": targets})
    return jobs


@pytest.mark.slow
def test_demo_runs_through_sbatch_and_matches_a_local_run(slurm_cluster, tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    ref_jobs = printed_jobs((ref / "run.log").read_text())
    work = tmp_path_factory.mktemp("slurm")
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    cmd = snakemake_cmd(work, "--profile", str(REPO / "profiles/slurm"),
                        "--profile", str(REPO / "profiles/test-slurm"), cores=None)
    proc = run(cmd, check=False, timeout=1500)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 and "Snakemake ended this run after" in log:
        # Snakemake's early end with groups and checkpoints (snakemake/snakemake#823):
        # the Snakefile failed the run saying so; its advice, the same command again,
        # must run exactly the jobs left (the job checks below cover both runs)
        print("SLURM run ended early (snakemake#823); running it again")
        proc = run(cmd, check=False, timeout=1500)
        log += proc.stdout + proc.stderr
    (work / "run.log").write_text(log)
    assert proc.returncode == 0, f"SLURM run failed:\n{log[-6000:]}"
    assert "Using profiles" in log and "submitted with SLURM jobid" in log

    jobs = printed_jobs(log)
    # Only the workflow's local rules run on the submit host; everything else is sbatch.
    assert {rule for rule, _ in jobs["local"]} <= LOCAL_RULES, jobs["local"]
    assert not {rule for rule, _ in jobs["remote"]} & LOCAL_RULES, jobs["remote"]
    submitted = sacct_jobs(work, since)
    assert submitted, "sacct lists no job for this working directory"
    bad = [j for j in submitted if j["state"] != "COMPLETED"]
    assert not bad, f"SLURM jobs not COMPLETED: {bad}"
    ran_in_slurm = [t for j in submitted for t in j["targets"]]
    assert len(ran_in_slurm) == len(set(ran_in_slurm)), "a job was submitted twice"
    assert set(ran_in_slurm) == jobs["remote"], (
        f"printed but not in sacct: {jobs['remote'] - set(ran_in_slurm)}; "
        f"in sacct but not printed: {set(ran_in_slurm) - jobs['remote']}")
    assert all(j["comment"].startswith("rule_") for j in submitted)
    # The profile groups per-shard jobs: some SLURM job must have run several of them.
    assert max(len(j["targets"]) for j in submitted) > 1, submitted

    # Same jobs as the local run (which ran everything locally), the same bytes in every
    # output file: two runs from scratch in two folders, on two executors (issue 16.11).
    local_all = ref_jobs["local"] | ref_jobs["remote"]
    assert jobs["remote"] | jobs["local"] == local_all
    compared, problems = byte_differences(ref, work)
    suffixes = {Path(name).suffix for name in compared}
    assert {".parquet", ".png", ".svg", ".md", ".csv", ".tsv", ".txt", ".html"} <= suffixes
    if problems:  # say what differs inside the files (tables, provenance, pixels)
        detail = diff_digests(artifact_digest(ref), artifact_digest(work))
        raise AssertionError(f"{len(problems)} of {len(compared)} SLURM outputs are not "
                             "byte-identical to the local run's:\n" + "\n".join(problems[:30])
                             + "\nwhere they differ:\n" + "\n".join(detail[:30]))
