"""The real profiles' resource mapping, read from a dry run (no scheduler needed).

`snakemake -n --profile profiles/slurm` prints every job's resources exactly as the SLURM
executor would submit them. On the finished tiny demo, forcing the per-shard stages, the
GPU stages must ask for the GPU partition, one GPU, their threads and memory, and every
other job the CPU defaults (that the shard indexes run on the submit host is checked by
the real SLURM run in test_scale_slurm.py).
"""

from __future__ import annotations

import re

import pytest
from conftest import REPO
from scale_support import reference_run, run, snakemake_cmd

JOB = re.compile(r"^\s*(local)?rule (\w+):\s*$")


def planned_resources(log: str) -> dict[str, list[tuple[bool, dict[str, str]]]]:
    """rule -> [(printed as localrule, {resource: value}), ...] from a run's job blocks."""
    out: dict[str, list[tuple[bool, dict[str, str]]]] = {}
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = JOB.match(line)
        if not m:
            continue
        res: dict[str, str] = {}
        threads = "1"
        for follow in lines[i + 1:i + 20]:
            if JOB.match(follow) or not follow.strip():
                break
            if follow.strip().startswith("threads:"):
                threads = follow.split(":", 1)[1].strip()
            if follow.strip().startswith("resources:"):
                res = dict(kv.split("=", 1) for kv in
                           follow.split(":", 1)[1].strip().split(", "))
        res["threads"] = threads
        out.setdefault(m.group(2), []).append((bool(m.group(1)), res))
    return out


@pytest.mark.slow
def test_slurm_profile_sends_gpu_stages_to_the_gpu_partition(tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    proc = run(snakemake_cmd(ref, "-n", "--forcerun", "faces", "embed", "attributes_score",
                             "--profile", str(REPO / "profiles/slurm"), cores=None))
    jobs = planned_resources(proc.stdout + proc.stderr)
    assert {"faces", "embed", "attributes_score", "faces_index", "embed_index"} <= set(jobs)
    for rule in ("faces", "embed"):
        for local, res in jobs[rule]:
            assert not local
            assert res["slurm_partition"] == "gpu" and res["gpu"] == "1", (rule, res)
            assert res["threads"] == "8", (rule, res)
    assert jobs["faces"][0][1]["mem_mb"] == "32000" and jobs["embed"][0][1]["mem_mb"] == "16000"
    for rule in ("attributes_score", "attributes_merge", "mine_pairs", "evaluate_benchmark"):
        for local, res in jobs[rule]:
            assert not local and res["slurm_partition"] == "cpu", (rule, res)
            assert res["mem_mb"] == "4000" and res["runtime"] == "60", (rule, res)
    # per-shard embed jobs are grouped (4 shards x models per SLURM job)
    assert "Group job embed_shards" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_local_profile_caps_gpu_jobs(tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    proc = run(snakemake_cmd(ref, "-n", "--forcerun", "faces", "--profile",
                             str(REPO / "profiles/local"), cores=None))
    log = proc.stdout + proc.stderr
    assert "Using profile" in log and "faces" in planned_resources(log)
