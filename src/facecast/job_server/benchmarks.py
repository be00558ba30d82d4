"""Snakemake's ``benchmark:`` records of jobs the job server runs.

Snakemake measures a job (``results/{ds}/runtime/*.tsv``: seconds, memory, CPU time) by
sampling the process it started and that process's children. A served job is a child of
the job server, not of that process, so the samples would describe only the script
process waiting for it. :func:`follow_served_jobs`, called in the Snakemake process (the
Snakefile), makes the sampler add the served job and its workers: each waiting script
notes its job's pid (:func:`facecast.job_server.client.served_job_record`). Then

- ``s``, ``cpu_time``, ``io_in``/``io_out``, ``max_uss`` and ``max_pss`` measure the job as
  they would measure a job in its own process (its CPU counters start at the fork;
  ``max_uss`` is the memory only the job holds);
- ``max_rss`` and ``max_vms`` also count the libraries the job shares with the server
  (about 0.8 GB that every served job maps), so they read higher than for a fresh process
  that imports less: size a cluster request on ``max_uss``, or on a SLURM run (the server
  is off there) or ``FACECAST_JOB_SERVER=0``.

Where Snakemake's sampler is not the one this patches (a future release), nothing is
patched and :data:`~facecast.job_server.client.FOLLOW_VAR` stays unset: jobs with a
``benchmark:`` then run in their own processes, measured as before.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from facecast.job_server import client

__all__ = ["follow_served_jobs", "served_jobs_of"]


def served_jobs_of(pids: list[int], folder: Path) -> list[int]:
    """The served jobs that callers among ``pids`` wait for (pids noted in ``folder``)."""
    jobs = []
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            jobs.append(int(client.served_job_record(folder, pid).read_text()))
    return jobs


def _process_class(folder: Path):
    import psutil

    class WithServedJobs(psutil.Process):
        """A psutil process whose children include the served jobs of its tree."""

        def children(self, recursive: bool = False):
            kids = super().children(recursive=recursive)
            for job in served_jobs_of([self.pid, *(k.pid for k in kids)], folder):
                with contextlib.suppress(psutil.Error):
                    served = psutil.Process(job)
                    kids += [served, *served.children(recursive=True)]
            return kids

    return WithServedJobs


def follow_served_jobs() -> bool:
    """Patch Snakemake's benchmark sampler to follow served jobs and set
    :data:`~facecast.job_server.client.FOLLOW_VAR` for the jobs; whether it did."""
    try:
        import psutil
        from snakemake import benchmark
    except ImportError:
        return False
    timer = getattr(benchmark, "BenchmarkTimer", None)
    if timer is None or not isinstance(getattr(timer, "__init__", None), type(lambda: 0)):
        return False
    if not getattr(timer, "_facecast_follows", False):
        folder = client.server_dir()
        if folder is None:
            return False
        process = _process_class(folder)
        original = timer.__init__

        def init(self, pid, *args, **kwargs):
            original(self, pid, *args, **kwargs)
            if type(getattr(self, "main", None)) is psutil.Process:
                self.main = process(self.main.pid)

        timer.__init__ = init
        timer._facecast_follows = True
    os.environ[client.FOLLOW_VAR] = "1"
    return True
