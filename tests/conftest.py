"""Shared pytest fixtures: paths, real photos, and a runner for the Snakefile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """../shared/fixtures: faces/<person>/1.jpg (four people) and multiface.jpg."""
    assert SHARED_FIXTURES.is_dir(), f"missing {SHARED_FIXTURES}"
    return SHARED_FIXTURES


def tiny_demo_config(**overrides) -> dict:
    """A small synthetic-demo config for integration runs (merged over config.yaml)."""
    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    cfg["datasets"] = {"demo": {"kind": "synthetic", "shard_size": 24,
                                "synthetic": {"n_identities": 12, "images_per_identity": 4,
                                              "image_size": 160}}}
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


def run_snakemake(workdir: Path, config: dict, targets: list[str] | None = None,
                  extra: list[str] | None = None, cores: int = 2,
                  check: bool = True) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile in ``workdir`` with ``config`` (written to a file)."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / "test_config.yaml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(cfg_path),
           "--cores", str(cores), *(extra or []), *(targets or [])]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-8000:]}")
    return proc


@pytest.fixture
def snakemake_runner():
    """``runner(workdir, config, targets, extra)`` -> CompletedProcess; raises on failure."""
    return run_snakemake
