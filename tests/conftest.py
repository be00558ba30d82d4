"""Shared pytest fixtures: paths, real photos, and a runner for the Snakefile."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
#: Test photos vendored into the repository (see tests/data/README.md for their source).
TEST_DATA = REPO / "tests" / "data"
#: The project's one-node SLURM helper (documented in docs/SCALE.md).
LOCAL_SLURM = REPO / "tests" / "slurm" / "local-slurm"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as module ``name`` (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """tests/data: faces/<person>/1.jpg (four people) and multiface.jpg, at most 640 px.

    The name is historical (the photos used to live outside the repository); everything
    the tests read is inside it.
    """
    assert TEST_DATA.is_dir(), f"missing {TEST_DATA}"
    return TEST_DATA


def tiny_demo_config(**overrides) -> dict:
    """A small synthetic-demo config for integration runs (merged over config.yaml)."""
    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    cfg["datasets"] = {"demo": {"kind": "synthetic", "shard_size": 24,
                                "synthetic": {"n_identities": 12, "images_per_identity": 4,
                                              "image_size": 160}}}
    # slice discovery, model comparisons and mitigation have their own tests on the
    # session demo run (demo_test_config); the other small runs leave them out
    for section in ("slices", "compare", "mitigation"):
        cfg[section] = {**cfg.get(section, {}), "enabled": False}
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


def keep_benchmarks(cfg: dict, names: list[str]) -> dict:
    """Keep only the benchmarks ``names`` of ``cfg`` (mined and evaluated); the others are
    the same code path on another filter, and each costs a few jobs per model."""
    cfg["benchmarks"] = {k: v for k, v in cfg["benchmarks"].items() if k in names}
    listed = cfg.get("evaluate", {}).get("benchmarks")
    if listed:
        cfg["evaluate"]["benchmarks"] = [b for b in listed if b in names]
    return cfg


#: Snakemake's greedy job selection for the tests' runs, as `make demo` uses: its default
#: (an ILP solved by CBC at every scheduling round) cost the demo 40 CPU-s of 300 and
#: changes no output
SCHEDULER = ("--scheduler", "greedy")


def run_snakemake(workdir: Path, config: dict, targets: list[str] | None = None,
                  extra: list[str] | None = None, cores: int = 2,
                  check: bool = True) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile in ``workdir`` with ``config`` (written to a file)."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / "test_config.yaml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    # targets before ``extra``: an option taking a list (--forcerun, --until) swallows
    # the words after it, and the run would fall back to the default target
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(cfg_path),
           "--cores", str(cores), *SCHEDULER, *(targets or []), *(extra or [])]
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


def demo_test_config() -> dict:
    """The shared end-to-end demo: 64 identities x 6 images, every stage, CPU-cheap.

    Both embedders (lbp, dlib), native + age_gender + celeba40 scorers with a one-epoch
    trainer, the demo benchmarks and the fairness protocol from config.yaml.
    """
    cfg = tiny_demo_config()
    cfg["datasets"] = {"demo": {"kind": "synthetic", "shard_size": 200, "synthetic": {
        "n_identities": 64, "images_per_identity": 6, "image_size": 160}}}
    cfg["embed"]["models"] = {"lbp": {"backend": "lbp", "pca_dim": 32},
                              "dlib": {"backend": "dlib_resnet"}}
    cfg["embed"]["batch_size"] = 32
    cfg["attributes"]["scorers"] = ["native", "ofiq", "age_gender", "celeba40"]
    cfg["attributes"]["trainer"] = {"enabled": True, "epochs": 1, "input_size": 32,
                                    "labels": ["glasses", "hat"]}
    cfg["correlations"]["methods"] = ["pearson"]
    cfg["fairness"]["n_boot"] = 20
    # the fairness protocol: more pairs, one legitimate attribute, so every group has cells
    cfg["benchmarks"]["fair_pool"]["mining"].update({"n_impostor": 4000})
    # the planted effects the tests look for (blur, the low-contrast group), the
    # unfiltered pool and the fairness protocol; `old` and `glasses` add only jobs
    keep_benchmarks(cfg, ["blurry", "low_contrast", "random", "fair_pool"])
    for section in ("slices", "compare", "mitigation"):
        cfg[section]["enabled"] = True
    cfg["fairness"]["legitimate"] = {"glasses": {"column": "label_glasses", "bins": [0.5],
                                                 "labels": ["G0", "G1"]}}
    return cfg


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> tuple[Path, dict]:
    """Run `rule all` once per test session on :func:`demo_test_config`.

    Returns (workdir, config). Tests must not change the workdir; copy it
    (:func:`copy_workdir`) to rerun anything.
    """
    work = tmp_path_factory.mktemp("demo_run")
    cfg = demo_test_config()
    run_snakemake(work, cfg)
    return work, cfg


def torch_modules_after(code: str) -> list[str]:
    """The torch modules a fresh Python process has loaded after running ``code`` (which
    must succeed): a job that needs no torch should not pay its ~3 CPU-s import."""
    probe = ("\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules "
             "if m == 'torch' or m.startswith('torch.'))))")
    proc = subprocess.run([sys.executable, "-c", code + probe], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def process_state(pid: int | str) -> str | None:
    """The state letter of process ``pid`` from /proc (``R``, ``S``, ``Z`` for a zombie that
    waits to be reaped, ...); None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return None


def copy_workdir(src: Path, dst: Path) -> Path:
    """Copy a finished workdir (timestamps kept, so nothing looks out of date)."""
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    return dst


def _slurm_starting() -> bool:
    """Whether ``local-slurm start`` is running now (its daemons are not all up yet: a
    session starting meanwhile must not stop them)."""
    marker = Path("/run/facecast-local-slurm/starting")
    try:
        pid = int(marker.read_text().strip())
    except (OSError, ValueError):
        return False
    return Path(f"/proc/{pid}").exists()


def pytest_sessionstart(session):
    """Park a stale config of the project's test SLURM cluster before any Snakemake start.

    With /etc/slurm/slurm.conf from ``tests/slurm/local-slurm`` in place but its daemons
    down (a machine where the SLURM test ran before, killed or from an older checkout),
    every Snakemake start waits out a 10 s `scontrol` timeout in the SLURM executor
    plugin. ``local-slurm stop`` parks that file (``start`` writes it again). A config of
    any other cluster is left alone.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller does it once
    conf = Path("/etc/slurm/slurm.conf")
    try:
        ours = "ClusterName=facecast" in conf.read_text()
    except OSError:
        return
    running = subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode == 0
    if ours and not running and not _slurm_starting():
        subprocess.run([str(LOCAL_SLURM), "stop"], capture_output=True, timeout=120)


#: Test files that share one session-cached run (scale_support.reference_run): the scale
#: tests and any other file that uses that run, found by name once.
_SCALE_FILES = frozenset(p.name for p in Path(__file__).parent.glob("test_*.py")
                         if p.name.startswith("test_scale_")
                         or re.search(r"\breference_run\b", p.read_text(encoding="utf-8")))
#: Files with a test on the session demo run (:func:`demo_run`), found by name once.
_DEMO_FILES = frozenset(p.name for p in Path(__file__).parent.glob("test_*.py")
                        if re.search(r"\bdemo_run\b", p.read_text(encoding="utf-8")))


def _worker_group(path: str) -> str:
    """The pytest-xdist work unit of a test file: files sharing a session run go together.

    The session demo run and the scale tests' reference run are each made once, by one
    worker; every other file is its own unit (its module fixtures run once).
    """
    name = Path(path).name
    if name in _DEMO_FILES:
        return "demo_run"
    if name in _SCALE_FILES:
        return "scale"
    return path


#: Rough seconds of the longest work units on two busy cores (from `make test`'s
#: --durations). Only the order of hand-out uses them: longest first, so that no long unit
#: starts last and runs alone while the other workers idle. Units not named are short.
_UNIT_SECONDS = {"demo_run": 260, "scale": 420, "test_covariates_fit.py": 120,
                 "test_embed_arcface.py": 70, "test_recordio_workflow.py": 60,
                 "test_hostile_inputs.py": 50, "test_job_server.py": 40,
                 "test_templates_workflow.py": 30, "test_bin_workflow.py": 30,
                 "test_newcomer_config.py": 25, "test_attributes_trainer.py": 25,
                 "test_cast_arrays.py": 20, "test_workflow.py": 20, "test_embed_sface.py": 15}


def _unit_seconds(unit: str) -> int:
    return _UNIT_SECONDS.get(unit, _UNIT_SECONDS.get(Path(unit).name, 0))


def pytest_xdist_make_scheduler(config, log):
    """`make test` runs `pytest -n 3 --dist loadscope`: work units from :func:`_worker_group`,
    handed out in collection order (see :func:`pytest_collection_modifyitems`), a new unit
    to a worker only once it runs the last test of its current one.

    (xdist's own `loadgroup` marks do not reach its scheduler under pytest 9.2, which
    ignores the node id suffix xdist writes, so the grouping is done here. xdist's default
    re-sorts units by test count and tops a worker up while it still has two tests to run:
    a worker starting a six-minute test would hold the next unit hostage meanwhile.)
    """
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class FileGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _worker_group(nodeid.split("::", 1)[0])

        def _reschedule(self, node) -> None:
            # one pending test (the running one) is the least a worker needs: it runs a
            # test only once it knows the next one (or is told to shut down)
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

        def remove_node(self, node) -> str | None:
            # xdist re-queues a crashed worker's unit with the crashing test still pending,
            # so a test that pytest-timeout ends (its worker exits) would run again on every
            # replacement worker; it is reported once, and the rest of its unit goes on
            workload = self.assigned_work.pop(node)
            pending = [(unit, nodeid) for unit in workload.values()
                       for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            unit, crashitem = pending[0]
            unit[crashitem] = True
            self.workqueue.update({scope: u for scope, u in workload.items()
                                   if self._pending_of({scope: u})})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

    return FileGroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Order work units longest first (:data:`_UNIT_SECONDS`), the SLURM test first in its
    unit (its cluster start and run are the unit's longest part).

    Workers take units in collection order, so the longest start at once instead of
    forming a tail. The SLURM test need not be last: `local-slurm stop` parks slurm.conf,
    so later Snakemake starts do not wait out `scontrol`'s 10 s timeout.
    """
    position = {id(item): k for k, item in enumerate(items)}

    def key(item):
        unit = _worker_group(item.nodeid.split("::", 1)[0])
        return (-_unit_seconds(unit), unit if _unit_seconds(unit) else "",
                "slurm_cluster" not in getattr(item, "fixturenames", ()), position[id(item)])

    items.sort(key=key)
