"""Glue between Snakemake rule scripts and the facecast library.

A rule script is three lines: open :func:`script_context` on the ``snakemake`` object,
then call one facecast function with ``ctx`` values. The context sends stdout, stderr,
``logging`` and tqdm progress to the rule's ``log:`` file, caps torch/BLAS threads at the
job's ``threads``, and builds the provenance dict every Parquet of the job carries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
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
