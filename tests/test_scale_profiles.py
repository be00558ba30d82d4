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


RULE_HEADER = re.compile(r"^\s*(?:rule|checkpoint) (\w+):", re.M)
#: profile keys that name rules (Snakemake ignores a name that is no rule, silently)
RULE_KEYS = ("groups", "set-resources", "set-threads", "group-components")


def workflow_rules() -> set[str]:
    """Every rule and checkpoint name of the workflow's rule files."""
    return {name for path in (REPO / "workflow" / "rules").glob("*.smk")
            for name in RULE_HEADER.findall(path.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("profile", sorted(p.parent.name for p in
                                           (REPO / "profiles").glob("*/profile.yaml")))
def test_every_rule_a_profile_names_is_a_rule_of_the_workflow(profile):
    """A profile that groups or sizes a renamed rule does nothing for it (Snakemake says
    nothing). Groups named under group-components must be groups the profile assigns."""
    import yaml

    cfg = yaml.safe_load((REPO / "profiles" / profile / "profile.yaml").read_text())
    rules = workflow_rules()
    assert {"faces", "embed", "attributes_ofiq", "attributes_ofiq_run"} <= rules
    named = {key: set(cfg.get(key) or {}) for key in RULE_KEYS}
    unknown = {key: sorted(names - rules) for key, names in named.items()
               if key != "group-components" and names - rules}
    assert not unknown, f"profiles/{profile}: no such rule: {unknown}"
    groups = set((cfg.get("groups") or {}).values())
    assert named["group-components"] <= groups, (named["group-components"], groups)


def test_make_demo_sets_threads_of_real_rules_only():
    """`make demo` runs its small jobs one thread each (`DEMO_THREADS`, rule=N pairs): a
    renamed rule would silently keep its two threads, so every name must be a rule, and
    the synthetic renderer (two processes) is not among them."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    line = next(row for row in text.splitlines() if row.startswith("DEMO_THREADS"))
    pairs = dict(item.split("=") for item in line.split("?=", 1)[1].split())
    assert set(pairs.values()) == {"1"}
    assert set(pairs) <= workflow_rules(), set(pairs) - workflow_rules()
    assert {"faces", "embed", "attributes_score", "mine_pairs", "mitigation"} <= set(pairs)
    assert "synthetic_dataset" not in pairs
    assert "--scheduler greedy --set-threads $(DEMO_THREADS)" in text
