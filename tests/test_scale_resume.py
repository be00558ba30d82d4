"""Interrupting a run: SIGKILL the whole Snakemake process tree mid-stage, then resume.

The run (``rule all`` of the tiny demo) is started in its own session; once two jobs
have finished and another is running (at the first moment a hidden ``.tmp-`` Parquet is
being written, if the poll catches one), the session's process group gets SIGKILL, as a
node failure or ``scancel`` would. Then:

- no job process survives the kill;
- every ``*.parquet`` under its real name opens and reads completely: a killed writer
  leaves only a hidden ``.<name>.tmp-...`` file, never a partial Parquet a later stage
  could take as complete;
- ``snakemake --rerun-incomplete`` (after ``snakemake --unlock``: the killed run leaves
  its lock) finishes the run, and the
  outputs equal those of an uninterrupted run (contents of every Parquet, text table and
  PNG; see scale_support.artifact_digest). Leftover ``.tmp-`` files are hidden and no
  output differs because of them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from scale_support import (
    artifact_digest,
    diff_digests,
    reference_run,
    run,
    snakemake_cmd,
    temp_leftovers,
)


def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid="], capture_output=True, text=True)
    return [int(p) for p, s in (ln.split() for ln in out.stdout.splitlines()) if int(s) == sid]


def _start_and_kill(work: Path, timeout: float = 900) -> str:
    """Start ``rule all`` in ``work``, SIGKILL its process group mid-stage; say when."""
    log_path = work / "killed_run.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(snakemake_cmd(work), stdout=log, stderr=subprocess.STDOUT,
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
            if temp_leftovers(work):
                when = f"while writing {temp_leftovers(work)[0].name}"
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
        if not _session_pids(proc.pid):
            break
        time.sleep(0.1)
    assert not _session_pids(proc.pid), "processes survived the kill"
    return when


@pytest.mark.slow
def test_killed_run_resumes_to_identical_outputs(tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    work = tmp_path_factory.mktemp("killed")
    when = _start_and_kill(work)
    print(f"killed {when}")

    # Right after the kill: every Parquet under its real name is complete.
    done = sorted(p for p in (work / "results").rglob("*.parquet") if not p.name.startswith("."))
    assert done, "the kill came before any Parquet was written"
    for path in done:
        pq.read_table(path)  # raises on a truncated or partial file
    leftovers = temp_leftovers(work)
    assert all(p.name.startswith(".") for p in leftovers)

    # The kill leaves Snakemake's lock behind: the resume refuses until --unlock.
    resumed = run(snakemake_cmd(work, "--rerun-incomplete"), check=False)
    if resumed.returncode != 0:
        assert "cannot be locked" in resumed.stdout + resumed.stderr, resumed.stderr[-3000:]
        run(snakemake_cmd(work, "--unlock"))
        resumed = run(snakemake_cmd(work, "--rerun-incomplete"))
    log = resumed.stdout + resumed.stderr
    assert "Finished jobid" in log, "the resumed run had nothing left to do"

    problems = diff_digests(artifact_digest(ref), _without(artifact_digest(work), leftovers))
    assert not problems, "resumed outputs differ:\n" + "\n".join(problems)
    nothing = run(snakemake_cmd(work, "-n"))
    assert "Nothing to be done" in nothing.stdout + nothing.stderr


def _without(digest: dict, leftovers: list[Path]) -> dict:
    names = {p.name for p in leftovers}
    return {k: v for k, v in digest.items() if Path(k).name not in names}
