"""The Snakefile: config validation, a dry run through the Python API, the ingest stage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from conftest import REPO, run_snakemake, tiny_demo_config

from facecast.io.parquet_io import read_provenance


def _dry_run_api(workdir: Path, config: dict) -> None:
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
        WorkflowSettings,
    )

    cfg_path = workdir / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    with SnakemakeApi(OutputSettings()) as api:
        wf = api.workflow(
            snakefile=REPO / "Snakefile",
            workdir=workdir,
            config_settings=ConfigSettings(configfiles=[cfg_path]),
            resource_settings=ResourceSettings(cores=1),
            storage_settings=StorageSettings(),
            workflow_settings=WorkflowSettings(),
        )
        dag = wf.dag(dag_settings=DAGSettings())
        dag.execute_workflow(executor="dryrun")


def test_dry_run_of_the_whole_dag_through_the_api(tmp_path: Path) -> None:
    _dry_run_api(tmp_path, tiny_demo_config())


def _validate_cli(tmp_path: Path, config: dict) -> subprocess.CompletedProcess:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(cfg), "-n"],
                          capture_output=True, text=True)


def test_wrong_key_fails_before_any_job_naming_the_key(tmp_path: Path) -> None:
    cfg = tiny_demo_config()
    cfg["datasets"]["demo"]["shard_sise"] = 10
    proc = _validate_cli(tmp_path, cfg)
    assert proc.returncode != 0
    assert "shard_sise" in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


def test_wrong_value_fails_naming_the_key(tmp_path: Path) -> None:
    cfg = tiny_demo_config()
    cfg["datasets"]["demo"]["kind"] = "flickr"
    proc = _validate_cli(tmp_path, cfg)
    assert proc.returncode != 0
    out = proc.stderr + proc.stdout
    assert "flickr" in out and "kind" in out


def test_schema_fills_defaults() -> None:
    from facecast.config.schema import validate_config as validate

    cfg = {"datasets": {"x": {"kind": "folder", "root": "/data"}}}
    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert cfg["seed"] == 20231
    assert cfg["datasets"]["x"]["shard_size"] == "auto"
    assert cfg["datasets"]["x"]["check_files"] is True


def test_default_config_is_valid() -> None:
    from facecast.config.schema import validate_config as validate

    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))


def test_ingest_stage_on_tiny_demo(tmp_path: Path) -> None:
    run_snakemake(tmp_path, tiny_demo_config(), ["results/demo/manifest.parquet"])
    man = pd.read_parquet(tmp_path / "results/demo/manifest.parquet")
    assert len(man) == 12 * 4
    assert (man["status"] == "ok").all()
    assert man["shard"].nunique() == 2
    assert any(c.startswith("label_") for c in man.columns)
    assert read_provenance(tmp_path / "results/demo/manifest.parquet")["stage"] == "manifest"
    assert (tmp_path / "results/demo/logs/manifest.log").exists()


def test_facecast_inspect_on_a_real_artifact(tmp_path: Path) -> None:
    run_snakemake(tmp_path, tiny_demo_config(), ["results/demo/manifest.parquet"])
    proc = subprocess.run([sys.executable, "-m", "facecast.cli", "inspect",
                           str(tmp_path / "results/demo/manifest.parquet")],
                          capture_output=True, text=True, check=True)
    out = proc.stdout
    assert "rows: 48" in out and "config_hash" in out and "image_id: large_string" in out
    assert "facecast.shards" in out and "status:" in out
    bad = subprocess.run([sys.executable, "-m", "facecast.cli", "inspect",
                          str(tmp_path / "nope.parquet")], capture_output=True, text=True)
    assert bad.returncode == 2 and "does not exist" in bad.stderr
