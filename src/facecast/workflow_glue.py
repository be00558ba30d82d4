"""Glue between Snakemake rule scripts and the facecast library.

A rule script is three lines: open :func:`script_context` on the ``snakemake`` object,
then import and call one facecast function with ``ctx`` values. The context sends stdout, stderr,
``logging`` and tqdm progress to the rule's ``log:`` file, caps torch/BLAS threads at the
job's ``threads``, and builds the provenance dict every Parquet of the job carries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def config_hash(config: Mapping[str, Any]) -> str:
    """Stable sha256 (hex, 16 chars) of a config mapping (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class ScriptContext:
    """What a rule script needs besides its inputs and outputs."""

    config: dict[str, Any]
    threads: int
    rule: str
    wildcards: dict[str, str]
    provenance: dict[str, Any] = field(default_factory=dict)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("facecast"))

    def dataset(self) -> dict[str, Any]:
        """The config block of the dataset named by the job's ``ds`` wildcard."""
        return self.config["datasets"][self.wildcards["ds"]]


#: Snakemake's progress line, e.g. ``38 of 47 steps (81%) done``
PROGRESS = re.compile(r"^(\d+) of (\d+) steps \(\d+%\) done\s*$", re.M)


def early_finish_message(log_path: str | os.PathLike | list | None) -> str | None:
    """What to tell the user when a run Snakemake calls successful left jobs undone.

    Snakemake can end a run that combines group jobs and checkpoints before its last
    jobs, and report success (snakemake/snakemake#823; seen here with the SLURM profile:
    ``38 of 47 steps``). The Snakefile's ``onsuccess`` turns that into an error with this
    message: the outputs written are complete, and the same command finishes the rest.
    None when the last progress line of the run's log reads N of N (or there is none).
    ``log_path``: the log file, or Snakemake's list of them (what ``onsuccess`` gets).
    """
    paths = [log_path] if isinstance(log_path, (str, os.PathLike)) else list(log_path or [])
    found = []
    for path in paths:
        if path and os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                found += PROGRESS.findall(f.read())
    if not found:
        return None
    done, total = (int(x) for x in found[-1])
    if done >= total:
        return None
    return (f"facecast: Snakemake ended this run after {done} of {total} jobs and called it "
            f"a success (a known Snakemake bug with group jobs and checkpoints, "
            f"snakemake/snakemake#823). Every output written is complete; run the same "
            f"command again to run the other {total - done} job(s).")


def set_threads(threads: int) -> None:
    """Cap torch and BLAS threads at ``threads`` (a job must not oversubscribe the node)."""
    threads = max(1, int(threads))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)


@contextlib.contextmanager
def script_context(smk: Any) -> Iterator[ScriptContext]:
    """Run a rule script body with logging to ``smk.log[0]`` and provenance set up.

    Exceptions are logged with their traceback (so the log says why a job failed) and
    re-raised so Snakemake marks the job failed. Where a warm job server takes the job
    (:mod:`facecast.job_server.client`), this process only waits for it: the body runs in
    the server's fork, and this raises ``SystemExit`` with the job's exit status.
    """
    from facecast.job_server.client import run_in_server

    status = run_in_server(benchmarked=getattr(smk, "bench_iteration", None) is not None)
    if status is not None:
        raise SystemExit(status)
    log_path = smk.log[0] if len(smk.log) else None
    stream = open(log_path, "a", buffering=1) if log_path else sys.stderr  # noqa: SIM115
    old_out, old_err = sys.stdout, sys.stderr
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    if log_path:
        sys.stdout = sys.stderr = stream
    try:
        set_threads(getattr(smk, "threads", 1))
        config = dict(smk.config)
        wildcards = {k: str(v) for k, v in dict(smk.wildcards).items()}
        ctx = ScriptContext(
            config=config,
            threads=int(getattr(smk, "threads", 1)),
            rule=str(getattr(smk, "rule", "")),
            wildcards=wildcards,
            provenance={
                "config_hash": config_hash(config),
                "seed": config.get("seed"),
                "rule": str(getattr(smk, "rule", "")),
                "wildcards": wildcards,
            },
        )
        try:
            yield ctx
        except BaseException:
            logging.getLogger("facecast").exception("job failed")
            raise
    finally:
        root.removeHandler(handler)
        sys.stdout, sys.stderr = old_out, old_err
        if log_path:
            stream.close()
