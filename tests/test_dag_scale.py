"""benchmarks/dag_scale.py keeps working (issue 24 part 1): its config passes the parse-time
checks, and a small run (45k images in 5 shards, the last one partial) dry-runs the whole
DAG with the expected jobs per stage and prints its figures.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import REPO, load_benchmark

from facecast.config.check import check_config
from facecast.config.columns import known_columns
from facecast.config.prepare import resolve_config

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")
N_IMAGES, SHARD_SIZE, N_SHARDS = 45_000, 10_000, 5


dag_scale = load_benchmark("dag_scale")


def enabled(cfg: dict, section: str) -> bool:
    return bool(cfg.get(section, {}).get("enabled", True))


def test_size_options() -> None:
    """The default runs the quick size, then the 42M goal; ``--full`` the goal alone,
    ``--n-images`` anything."""
    both = dag_scale.parse_args([])
    assert both.sizes == [dag_scale.DEFAULT_IMAGES, 42_000_000]
    assert both.n_images == dag_scale.DEFAULT_IMAGES < 10_000_000
    assert dag_scale.parse_args(["--full"]).sizes == [42_000_000]
    assert dag_scale.parse_args(["--n-images", "50000"]).n_images == 50_000
    assert dag_scale.parse_args(["--images", "7"]).n_images == 7  # the old spelling
    with pytest.raises(SystemExit):
        dag_scale.parse_args(["--full", "--n-images", "5"])
    with pytest.raises(SystemExit):
        dag_scale.parse_args(["--n-images", "0"])
    # shards as the config's default (auto) shards them, or a fixed size
    assert both.shard_size == "auto" and dag_scale.parse_args(["--shard-size", "10000"]).shard_size == 10_000
    with pytest.raises(SystemExit):
        dag_scale.parse_args(["--shard-size", "0"])


@pytest.mark.parametrize("argv", [[], ["--cast"]], ids=["demo", "cast-sized"])
def test_config_passes_the_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  argv: list[str]) -> None:
    """The benchmark's configs (the default and the CAST-sized one of docs/SCALE.md) are
    valid: schema, derived defaults and every stage's checks, as the Snakefile runs them."""
    setup = dag_scale.build_config(dag_scale.parse_args(argv), tmp_path)
    cfg = setup.config
    assert {"label_blur", "label_age", "label_male"} <= set(setup.labels)
    assert cfg["datasets"] == {"web": {"kind": "table", "root": str(tmp_path / "data"),
                                       "manifest": str(tmp_path / "data/webface.parquet"),
                                       "shard_size": "auto"}}
    if argv:
        assert list(cfg["embed"]["models"]) == ["m0", "m1", "m2"]
        assert {"fairface", "celeba40"} <= set(cfg["attributes"]["scorers"])
        assert {"black", "glasses_facial_hair", "low_p2p", "blurry"} <= set(cfg["benchmarks"])
        assert set(setup.env) == {"TORCH_HOME"}
    for key, value in setup.env.items():
        monkeypatch.setenv(key, value)
    resolve_config(cfg, SCHEMA)
    check_config(cfg)  # raises ConfigError listing every mistake
    # ... with the columns checked, not skipped as uncertain (an unreadable stand-in)
    known = known_columns(cfg)["web"]
    assert known is not None
    named = {f["attribute"] for b in cfg["benchmarks"].values() for f in b["filters"]}
    assert named <= known


def test_small_run(capsys: pytest.CaptureFixture[str]) -> None:
    """A 45k-image run: exit 0, per-stage job counts that follow from the shard count and
    the config, and the printed figures."""
    fig = dag_scale.main(["--n-images", str(N_IMAGES), "--shard-size", str(SHARD_SIZE)])
    out = capsys.readouterr().out
    cfg = fig.config
    models = list(cfg["embed"]["models"])
    scorers = list(cfg["attributes"]["scorers"])
    benchmarks = list(cfg["benchmarks"])
    assert fig.n_shards == N_SHARDS and fig.n_images == N_IMAGES

    jobs = fig.jobs
    # one job per shard (per model, per scorer) for the per-shard stages
    assert jobs["faces"] == N_SHARDS
    assert jobs["embed"] == N_SHARDS * len(models)
    # one dlib fit per shard (issue 40.7): with the features on, the ofiq scorer's job
    # (attributes_ofiq) writes the landmark shards and no features_shard job runs
    shared = "ofiq" in scorers and enabled(cfg, "features")
    assert jobs["attributes_score"] == N_SHARDS * (len(scorers) - shared)
    assert jobs.get("attributes_ofiq", 0) == N_SHARDS * shared
    if enabled(cfg, "features"):
        assert jobs.get("features_shard", 0) == N_SHARDS * (not shared)
    # one shard index per stage (embed: per model), one merge per dataset
    assert jobs["faces_index"] == 1
    assert jobs["embed_index"] == len(models)
    assert jobs["attributes_merge"] == 1
    # per benchmark, and per evaluated model x benchmark
    assert jobs["benchmark_subset"] == jobs["mine_pairs"] == len(benchmarks)
    evaluated = cfg["evaluate"]["models"] or models
    scored = cfg["evaluate"]["benchmarks"] or benchmarks
    assert jobs["evaluate_benchmark"] == len(evaluated) * len(scored)
    assert jobs["all"] == 1
    for stage, rule in (("fairness", "fairness"), ("covariates", "covariates"),
                        ("quality", "quality_edc"), ("identification", "identification"),
                        ("audit", "audit"), ("describe", "describe")):
        assert (rule in jobs) == enabled(cfg, stage), rule
    # nothing is done yet except the ingest: the manifest is there, its job is not run
    assert "manifest" not in jobs and "synthetic_dataset" not in jobs
    assert fig.slurm_jobs["all"] == 0
    assert 0 < sum(fig.slurm_jobs.values()) < fig.total_jobs

    assert fig.dag_wall_s > 0 and fig.dag_cpu_s > 0
    assert 0.05 < fig.peak_gb < 4  # the Snakemake process itself, not this test's
    assert f"images            {N_IMAGES:,}" in out
    assert f"shards            {N_SHARDS:,} x {SHARD_SIZE:,} (shard_size: {SHARD_SIZE})" in out
    assert re.search(r"snakemake -n +\d+\.\d s wall, \d+\.\d s CPU", out)
    assert re.search(r"peak memory +\d+\.\d\d GB", out)
    assert f"jobs              {fig.total_jobs:,} (" in out
    assert f"SLURM jobs        {sum(fig.slurm_jobs.values()):,} with the groups" in out
    table = {m.group(1): int(m.group(2).replace(",", ""))
             for m in re.finditer(r"^(\w+) +([\d,]+) +[\d.]+% +[\d,]+$", out, re.M)}
    assert table == jobs


def test_peak_memory_is_the_child_s_own(tmp_path: Path) -> None:
    """A pytest worker's own peak RSS must not leak into the measured figure: a child
    vforked from a large process inherits its high-water mark at exec (the dry run of a
    small DAG once reported 6.8 GB); started through the launcher it reports its own."""
    import json
    import subprocess

    ballast = bytearray(600 * 1024**2)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))  # touch every page
    out = tmp_path / "rusage.json"
    subprocess.run([sys.executable, "-c", dag_scale.RUSAGE_LAUNCHER, str(out),
                    sys.executable, "-c", "pass"], check=True)
    usage = json.loads(out.read_text())
    assert usage["rc"] == 0 and 0 < usage["maxrss_kib"] < 200 * 1024, usage
    del ballast
