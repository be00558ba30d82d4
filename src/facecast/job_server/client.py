"""Hand a rule script's job to the warm job server (:mod:`facecast.job_server.server`).

Most of a small job's seconds are imports: pandas, SciPy, matplotlib and torch cost a
fresh process 1-3 CPU-seconds before it reads a byte, and a run of a hundred jobs pays it
a hundred times. On a workstation the job server imports them once and starts each job as
a fork of itself (from a single-threaded process, as ``multiprocessing``'s ``forkserver``
does); the rule script's own process only forwards its job and waits for its exit status.

What a job sees is what a fresh process would see: the script's own file run as
``__main__`` with its ``argv``, working directory, environment, umask, ``sys.path``,
stdin/stdout/stderr and thread limits (the job's ``threads``, as Snakemake sets them).
Signals sent to the script's process reach the job; a script process that dies (killed
run) takes its job with it; a job whose server dies fails.

Off (every job in its own fresh process, as Snakemake alone would run it) where
``FACECAST_JOB_SERVER=0``, inside a SLURM (PBS, LSF, Flux) job or a container (each
job is its own allocation there: a server would live in one job's),
off Linux, outside a Snakemake rule script, and whenever no server answers: the first
job of a run starts one in the background and runs in its own process, so a server never
delays a job. The server lives in ``$FACECAST_JOB_SERVER_DIR`` (default
``$XDG_RUNTIME_DIR`` or ``/tmp``, in a folder only its user can open), one per Python
environment and facecast checkout, and exits after ``FACECAST_JOB_SERVER_IDLE`` seconds
(default 60) without a job. Everything here is standard library: the script's process
must stay cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path

#: "0", "off", "false" or "no" turns the job server off
SWITCH_VAR = "FACECAST_JOB_SERVER"
#: folder of the server's socket, lock and log (default ``$XDG_RUNTIME_DIR`` or ``/tmp``)
DIR_VAR = "FACECAST_JOB_SERVER_DIR"
#: seconds the server waits for a job before it exits
IDLE_VAR = "FACECAST_JOB_SERVER_IDLE"
#: the thread variables Snakemake sets for a job (``snakemake.shell``); the server itself
#: starts with 1 (and pyarrow's jemalloc without its background thread), so that it is
#: one thread when it forks
THREAD_VARS = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
#: set inside a batch-scheduler job or a container: a server started there would live in
#: that one job's allocation (and die with it), so each job runs in its own process
BATCH_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
              "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")
#: "1" where Snakemake's benchmark sampler follows served jobs (set in the Snakemake
#: process by :func:`facecast.job_server.benchmarks.follow_served_jobs`); without it a
#: job with a ``benchmark:`` runs in its own process, so its runtime record measures it
FOLLOW_VAR = "FACECAST_JOB_SERVER_BENCHMARKS"
#: seconds the script waits for the server to take its job before running it itself
ACCEPT_SECONDS = 60.0
#: longest socket path a Unix socket takes (108 bytes with the terminating NUL on Linux)
MAX_SOCKET_PATH = 100

#: set in a job the server forked: its script must run, not be handed on again
IN_SERVER_JOB = False


def wanted(main_file: str | None, environ: dict[str, str] | None = None) -> bool:
    """Whether the job of the script ``main_file`` may go to a job server.

    Only a Snakemake rule script (a file Snakemake wrote under ``.snakemake/scripts/``),
    on Linux, outside a batch job or container (:data:`BATCH_VARS`), with
    :data:`SWITCH_VAR` not off, and not a job already running inside the server.
    """
    env = os.environ if environ is None else environ
    if IN_SERVER_JOB or not sys.platform.startswith("linux") or not main_file:
        return False
    if env.get(SWITCH_VAR, "1").strip().lower() in {"0", "off", "false", "no"}:
        return False
    if any(var in env for var in BATCH_VARS):
        return False
    parent = Path(main_file).parent
    return parent.name == "scripts" and parent.parent.name == ".snakemake"


def server_dir(environ: dict[str, str] | None = None) -> Path | None:
    """The private folder of this user's job servers, made if missing; None where it is
    not private (another owner, a group or world bit set, a link) or cannot be made."""
    env = os.environ if environ is None else environ
    base = env.get(DIR_VAR) or os.path.join(env.get("XDG_RUNTIME_DIR") or "/tmp",
                                            f"facecast-jobs-{os.getuid()}")
    path = Path(base)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    private = (st.st_uid == os.getuid() and (st.st_mode & 0o077) == 0
               and os.path.isdir(path) and not os.path.islink(path))
    return path if private else None


def server_key() -> str:
    """Which server a job may use: the same interpreter, installed packages and facecast
    source folder (a server imports them once; another environment needs its own)."""
    import sysconfig

    import facecast

    site = sysconfig.get_paths()["purelib"]
    try:
        installed = os.stat(site).st_mtime_ns
    except OSError:
        installed = 0
    blob = json.dumps([os.path.realpath(sys.executable), sys.version,
                       os.path.dirname(os.path.realpath(facecast.__file__)), site, installed])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def socket_path(environ: dict[str, str] | None = None) -> Path | None:
    """The socket of this environment's server, or None where no private folder exists
    or the path is too long for a Unix socket."""
    folder = server_dir(environ)
    if folder is None:
        return None
    path = folder / f"{server_key()}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def encode_request(main_file: str) -> bytes:
    """The job as the server reads it: a 4-byte length, then JSON of what the job must
    see (script, argv, working directory, environment, umask, ``sys.path``)."""
    umask = os.umask(0)
    os.umask(umask)
    body = json.dumps({"script": os.path.abspath(main_file), "argv": sys.argv,
                       "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask,
                       "path": sys.path}).encode()
    return struct.pack("!I", len(body)) + body


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
    except OSError:
        sock.close()
        return None
    return sock


def start_server(path: Path) -> None:
    """Start a server for ``path`` in the background unless one holds its lock (running
    or starting). Its output goes to ``<key>.log`` beside the socket, never to this job's
    streams (a run's pipes would otherwise stay open until the server exits)."""
    import fcntl
    import subprocess

    lock = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return
    finally:
        os.close(lock)
    with open(path.with_suffix(".log"), "wb") as log:  # this server's log only
        subprocess.Popen([sys.executable, "-m", "facecast.job_server.server", os.fspath(path)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                         env=server_env(os.environ), close_fds=True,
                         start_new_session=True)


def server_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment a server starts with: ``environ`` with one BLAS/OpenMP thread and
    pyarrow's jemalloc without its background thread (one thread when it forks)."""
    env = dict(environ, PYTHONUNBUFFERED="1", **{var: "1" for var in THREAD_VARS})
    env.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    return env


def _read_line(stream) -> str | None:
    """One message line from the server; None on end of stream or timeout."""
    try:
        line = stream.readline()
    except (TimeoutError, OSError):
        return None
    return line.decode().strip() if line else None


def served_job_record(folder: Path, caller: int) -> Path:
    """Where the caller process ``caller`` notes the pid of the job the server runs for
    it, while it runs (read by :mod:`facecast.job_server.benchmarks`)."""
    return folder / "jobs" / str(caller)


def _note_job(record: Path, job: int) -> None:
    with contextlib.suppress(OSError):
        record.parent.mkdir(mode=0o700, exist_ok=True)
        staging = record.with_name(f".{record.name}")
        staging.write_text(str(job))
        os.replace(staging, record)


def run_job(sock: socket.socket, main_file: str, folder: Path) -> int | None:
    """Send the job over ``sock`` and wait for its exit status (128 + N for a job ended
    by signal N). None when the server did not take the job (run it here instead);
    signals this process gets meanwhile go to the job's process group, and the job's pid
    is noted in ``folder`` (:func:`served_job_record`) while it runs."""
    try:
        socket.send_fds(sock, [encode_request(main_file)], [0, 1, 2])
        sock.settimeout(ACCEPT_SECONDS)
        stream = sock.makefile("rb")
        started = _read_line(stream)
    except OSError:
        return None
    if not started or not started.startswith("S "):
        return None
    job = int(started.split()[1])
    sock.settimeout(None)
    record = served_job_record(folder, os.getpid())
    _note_job(record, job)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(job, signum)

    caught = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
    previous = {sig: signal.signal(sig, forward) for sig in caught}
    try:
        ended = _read_line(stream)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with contextlib.suppress(OSError):
            record.unlink()
    if not ended or not ended.startswith("X "):
        print(f"facecast job server: lost job {job} (the server ended)", file=sys.stderr)
        return 1
    status = int(ended.split()[1])
    return status if status >= 0 else 128 - status


def run_in_server(benchmarked: bool = False) -> int | None:
    """Run this rule script's job in the job server; its exit status, or None where the
    job is to run in this process (server off, absent, busy starting, or refusing; a
    ``benchmarked`` job whose Snakemake does not follow served jobs)."""
    # the file Snakemake runs (its preamble, then the rule script): sys.argv[0]; the
    # preamble points __main__.__file__ at the rule script itself
    main_file = sys.argv[0] if sys.argv else None
    if not wanted(main_file):
        return None
    if benchmarked and os.environ.get(FOLLOW_VAR) != "1":
        return None
    try:
        path = socket_path()
    except OSError:
        return None
    if path is None:
        return None
    sock = _connect(path)
    if sock is None:
        with contextlib.suppress(OSError):
            start_server(path)
        return None
    with sock:
        return run_job(sock, main_file, path.parent)
