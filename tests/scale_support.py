"""Helpers shared by the run-at-scale tests (tests/test_scale_*.py).

- :func:`snakefile` is the repository's Snakefile.
- :func:`snakemake_cmd` builds a Snakemake command line for a test working directory.
- :func:`reference_run` runs the tiny demo once per test session (uninterrupted, local)
  and returns its working directory; tests compare their runs against it.
- :func:`artifact_digest` reduces every output under ``results/`` to comparable values:
  Parquet by table *contents* (column names, types, rows) plus the provenance metadata
  (with the run's own absolute folder replaced by ``<workdir>``: two runs in two folders
  legitimately record different dataset roots), JSON by parsed contents (same folder
  rule; any wall-clock timing field dropped), text tables and lists by bytes, PNG images
  by decoded pixels.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from conftest import REPO, SCHEDULER, keep_benchmarks, process_state, tiny_demo_config

# Run records and timings that differ between two runs of the same config by design.
SKIP_DIRS = {"logs", "runtime"}
TEXT_SUFFIXES = {".txt", ".list", ".tsv", ".csv", ".md", ".yaml"}
IMAGE_SUFFIXES = {".png"}


def snakefile(workdir: Path) -> Path:
    """The Snakefile to run (``workdir`` kept for callers; every run uses the repo's)."""
    return REPO / "Snakefile"


def scale_config() -> dict:
    """The smallest config that still runs every stage: 16 identities x 5 images in 2
    shards, shared by the scale tests (SLURM, profiles, report, reruns) and the
    determinism test (issue 49: one config, a fraction of the demo's images).

    Every stage of the demo is on (label audit, landmark features, descriptions, covariate
    models, EDC and quality bias, cross-group matrices, 1:N, slices, compare, mitigation);
    what is cut is size: two small embedders, the weight-free attribute scorer only, Pearson only, 10
    bootstrap replicates per stage, and 100 SVI steps per covariate fit (the fits say they have not
    settled; these runs prove the same bytes, not the statistics), and the per-model stages
    that need one model only (demographics, 1:N, quality, slices, mitigation) run for dlib.
    16 x 5 images give the fairness protocol 160 genuine pairs, above
    ``covariates.min_pairs``. 47 jobs (the SLURM test submits 42 of them, as 22 SLURM jobs).
    """
    # two benchmarks: a mined one (random) and the fairness protocol (fair_pool); a
    # filtered benchmark is the same jobs again (the demo-run tests cover filters)
    cfg = keep_benchmarks(tiny_demo_config(), ["random", "fair_pool"])
    cfg["datasets"]["demo"]["shard_size"] = 40
    cfg["datasets"]["demo"]["synthetic"].update(n_identities=16, images_per_identity=5)
    # two embedders, so that compare and mitigation's fusion run: dlib's (no fitting; the
    # mining reference) and a 16-D lbp (its PCA fit is the embed_fit job)
    cfg["embed"]["models"] = {"dlib": {"backend": "dlib_resnet"},
                              "lbp": {"backend": "lbp", "pca_dim": 16}}
    cfg["mining"]["reference_model"] = "dlib"
    cfg["evaluate"]["models"] = ["dlib", "lbp"]
    if "scorers" in cfg.get("attributes", {}):
        cfg["attributes"]["scorers"] = ["native"]
    cfg["correlations"]["methods"] = ["pearson"]
    # a few bootstrap replicates each: seeded draws are what a determinism test must see
    for section in ("fairness", "quality", "demographics", "slices", "compare", "mitigation"):
        if "n_boot" in cfg.get(section, {}):
            cfg[section]["n_boot"] = 10
    cfg["covariates"]["steps"] = 100
    # one model per stage that runs per model, where a second model adds only the same
    # jobs again: the evaluations (compare), mitigation's fusion partner and the fairness
    # leaderboard's baseline read lbp, so those keep both
    for stage in ("demographics", "identification", "quality", "slices", "mitigation"):
        cfg[stage] = {**cfg.get(stage, {}), "models": ["dlib"]}
    for stage in ("audit", "features", "describe", "covariates", "quality", "demographics",
                  "identification", "slices", "compare", "mitigation"):
        if stage in cfg:
            cfg[stage] = {**cfg[stage], "enabled": True}
    return cfg


def write_config(workdir: Path, config: dict | None = None) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "test_config.yaml"
    path.write_text(yaml.safe_dump(config or scale_config(), sort_keys=False))
    return path


def snakemake_cmd(workdir: Path, *extra: str, config: dict | None = None,
                  cores: int | None = 2) -> list[str]:
    """``python -m snakemake`` for ``workdir`` with the scale config and ``extra`` args."""
    cfg = write_config(workdir, config)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile(workdir)),
           "--directory", str(workdir), "--configfile", str(cfg)]
    if cores is not None:
        cmd += ["--cores", str(cores), *SCHEDULER]
    return cmd + list(extra)


def run(cmd: list[str], check: bool = True, cwd: Path | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


_REFERENCE: dict[str, Path] = {}


def reference_run(tmp_path_factory) -> Path:
    """Working directory of one uninterrupted local run of ``rule all`` (once per session).

    Its Snakemake output is kept in ``run.log`` there.
    """
    if "local" not in _REFERENCE:
        work = tmp_path_factory.mktemp("reference")
        proc = run(snakemake_cmd(work))
        (work / "run.log").write_text(proc.stdout + proc.stderr)
        _REFERENCE["local"] = work
    return _REFERENCE["local"]


def result_files(workdir: Path) -> list[Path]:
    """Every output file under results/, relative, skipping logs and timings."""
    root = workdir / "results"
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not (set(rel.parts[1:-1]) & SKIP_DIRS):
            out.append(rel)
    return out


def byte_differences(first: Path, second: Path) -> tuple[list[str], list[str]]:
    """``(compared, problems)`` of two runs' outputs, file by file and byte by byte.

    ``compared`` names every file under ``first``'s results/ (run records - ``logs/``,
    ``runtime/`` - and hidden files left out: the leftovers of killed atomic writes, which
    no stage reads); ``problems`` lists each file that differs or is in one run only.
    """
    def files(workdir: Path) -> dict[str, Path]:
        return {rel.as_posix(): workdir / "results" / rel for rel in result_files(workdir)
                if not any(part.startswith(".") for part in rel.parts)}

    a, b = files(first), files(second)
    problems = [f"only in the first run: {k}" for k in sorted(set(a) - set(b))]
    problems += [f"only in the second run: {k}" for k in sorted(set(b) - set(a))]
    problems += [f"differs: {k}" for k in sorted(set(a) & set(b))
                 if a[k].read_bytes() != b[k].read_bytes()]
    return sorted(a), problems


def temp_leftovers(workdir: Path) -> list[Path]:
    """Hidden temporary files of interrupted atomic writes (``.<name>.tmp-...``)."""
    # os.walk, not rglob: a running job removes its emptied `.tmp/` folder while we look
    return sorted(Path(top) / name for top, dirs, files in os.walk(workdir / "results")
                  for name in dirs + files if name.startswith(".") and ".tmp-" in name)


def session_pids(sid: int) -> list[int]:
    """Processes of session ``sid`` (a run started with ``start_new_session=True``)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid="], capture_output=True, text=True)
    return [int(p) for p, s in (ln.split() for ln in out.stdout.splitlines()) if int(s) == sid]


def processes_in(work: Path) -> list[int]:
    """Live processes whose working directory lies in ``work``: the run's jobs, including
    those the job server forked (they are in the server's session, not the run's)."""
    root = os.path.realpath(work)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if process_state(entry.name) not in (None, "Z") and (
                cwd == root or cwd.startswith(root + os.sep)):
            found.append(int(entry.name))
    return found


def start_and_kill(work: Path, cmd: list[str], timeout: float = 900) -> str:
    """Start Snakemake ``cmd`` in its own session and SIGKILL the whole process group
    mid-stage: once two jobs have finished and another is running (at the first moment a
    hidden ``.tmp-`` Parquet is being written, if the poll catches one). Says when; fails
    if the run ends first or a process of it survives the kill."""
    log_path = work / "killed_run.log"
    work.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(os.environ,
                                                                 PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + timeout
    when = ""
    running_since = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("the run finished before it could be interrupted:\n"
                                 + log_path.read_text()[-3000:])
        text = log_path.read_text()
        finished = text.count("Finished jobid")
        started = len(re.findall(r"^\s+jobid: \d+\s*$", text, re.M))
        if finished >= 2 and started > finished:
            writing = temp_leftovers(work)  # once: a write may end between two looks
            if writing:
                when = f"while writing {writing[0].name}"
            elif running_since is None:
                running_since = time.monotonic()
            elif time.monotonic() - running_since > 1.0:
                when = f"with {started - finished} job(s) running"
        if when:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(0.02)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("no job ever ran to interrupt:\n" + log_path.read_text()[-3000:])
    for _ in range(50):  # SIGKILL is asynchronous; give the kernel a moment
        if not session_pids(proc.pid) and not processes_in(work):
            break
        time.sleep(0.1)
    assert not session_pids(proc.pid), "processes survived the kill"
    assert not processes_in(work), "jobs of the job server survived the kill"
    return when


def _parquet_digest(path: Path, workdir: Path | None = None) -> dict:
    table = pq.read_table(path)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    raw = meta.pop("facecast", "{}")
    if workdir is not None:  # absolute paths inside the run's own folder legitimately differ
        for w in {str(workdir), os.path.realpath(workdir)}:
            raw = raw.replace(json.dumps(w)[1:-1], "<workdir>")
    prov = json.loads(raw)
    plain = table.replace_schema_metadata(None)
    sink = io.BytesIO()
    import pyarrow as pa

    with pa.ipc.new_stream(sink, plain.schema) as writer:
        writer.write_table(plain)
    return {"schema": str(plain.schema), "rows": plain.num_rows,
            "data_sha256": hashlib.sha256(sink.getvalue()).hexdigest(),
            "provenance": prov, "metadata": meta}


def _drop_timings(value):
    """JSON without wall-clock timings (``seconds``, ``*_seconds``, ``elapsed*``)."""
    if isinstance(value, dict):
        return {k: _drop_timings(v) for k, v in value.items()
                if not (k == "seconds" or k.endswith("_seconds") or k.startswith("elapsed"))}
    if isinstance(value, list):
        return [_drop_timings(v) for v in value]
    return value


def _image_digest(path: Path) -> str:
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        return hashlib.sha256(np.asarray(im.convert("RGBA")).tobytes()).hexdigest()


def artifact_digest(workdir: Path) -> dict[str, object]:
    """Comparable digest of every output of a run (see the module docstring)."""
    digest: dict[str, object] = {}
    root = workdir / "results"
    for rel in result_files(workdir):
        path = root / rel
        if path.name.startswith("."):
            digest[str(rel)] = "hidden file"
        elif path.suffix == ".parquet":
            digest[str(rel)] = _parquet_digest(path, workdir)
        elif path.suffix == ".json":
            text = path.read_text()
            for w in {str(workdir), os.path.realpath(workdir)}:
                text = text.replace(json.dumps(w)[1:-1], "<workdir>")
            value = _drop_timings(json.loads(text))
            digest[str(rel)] = value if isinstance(value, dict) else {"value": value}
        elif path.suffix in TEXT_SUFFIXES:
            digest[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.suffix in IMAGE_SUFFIXES:
            digest[str(rel)] = _image_digest(path)
        else:
            digest[str(rel)] = "present"
    return digest


def diff_digests(a: dict, b: dict) -> list[str]:
    """Human-readable differences between two :func:`artifact_digest` results."""
    lines = [f"only in first: {k}" for k in sorted(set(a) - set(b))]
    lines += [f"only in second: {k}" for k in sorted(set(b) - set(a))]
    for k in sorted(set(a) & set(b)):
        if a[k] == b[k]:
            continue
        if isinstance(a[k], dict) and isinstance(b[k], dict):
            for part in sorted(set(a[k]) | set(b[k])):
                x, y = a[k].get(part), b[k].get(part)
                if x == y:
                    continue
                if isinstance(x, dict) and isinstance(y, dict):
                    keys = sorted(kk for kk in set(x) | set(y) if x.get(kk) != y.get(kk))
                    detail = "; ".join(f"{kk}: {x.get(kk)!r:.80} != {y.get(kk)!r:.80}"
                                       for kk in keys)
                    lines.append(f"differs: {k} {part}: {detail}")
                else:
                    lines.append(f"differs: {k} {part}: {x!r:.120} != {y!r:.120}")
        else:
            lines.append(f"differs: {k}: {a[k]!r:.120} != {b[k]!r:.120}")
    return lines
