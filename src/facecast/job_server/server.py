"""The warm job server: one process that imports the heavy libraries once and runs each
rule script's job as a fork of itself (see :mod:`facecast.job_server.client` for when and why).

``python -m facecast.job_server.server SOCKET`` takes the lock beside ``SOCKET`` (a second
server exits at once), imports :data:`PRELOAD`, then listens. For each job it checks the
caller is its own user, forks, and the fork becomes the job: the caller's streams,
working directory, environment, umask, ``argv`` and ``sys.path``; fresh random seeds and
the job's thread limits; its own process group; killed if the server dies. The server
answers ``S <pid>`` when the job starts and ``X <status>`` when it ends, kills the job's
process group when the caller goes away, and exits after its idle time without a job.

The server never runs a thread of its own and starts with one BLAS/OpenMP thread, so a
fork copies no lock another thread holds (the hazard :mod:`facecast.parallel` avoids).
No facecast stage is imported here: a job imports the stage code as it is on disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from facecast.job_server import client

#: what the server imports once for every job (a missing optional one is skipped)
PRELOAD = ("numpy", "pandas", "pyarrow.parquet", "scipy.stats", "matplotlib.pyplot",
           "torch", "torchvision", "sklearn.linear_model", "PIL.Image", "tqdm", "yaml",
           "pyro", "facenet_pytorch", "snakemake.iocontainers", "snakemake.logging",
           "snakemake.shell")
#: seconds the server waits for a job's request once the job connected
REQUEST_SECONDS = 10.0
#: the largest request the server reads (environment and ``sys.path`` included)
MAX_REQUEST = 4 << 20
_PR_SET_PDEATHSIG = 1


@dataclass
class JobRequest:
    """What a job must see, as the caller sent it, and the caller's three stream fds."""

    script: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    path: list[str]
    fds: list[int]


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules`` (matplotlib on its file backend); the ones that are missing."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def cuda_driver_loaded(maps: str | None = None) -> bool:
    """Whether the CUDA driver (``libcuda.so``) is mapped into this process
    (``/proc/self/maps``). Once an import has started it, a fork cannot use the GPU, so
    such a server must not serve (torch's own runtime, ``libcudart``, is harmless)."""
    if maps is None:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    return any(os.path.basename(line.split()[-1]).startswith("libcuda.so")
               for line in maps.splitlines() if "/" in line)


def read_request(conn: socket.socket) -> JobRequest:
    """Read one job request from ``conn`` (ValueError on a malformed one)."""
    conn.settimeout(REQUEST_SECONDS)
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    try:
        if len(fds) != 3 or len(data) < 4:
            raise ValueError("a job request carries its length and three stream fds")
        size = struct.unpack("!I", data[:4])[0]
        if size > MAX_REQUEST:
            raise ValueError(f"job request of {size} bytes")
        body = bytearray(data[4:])
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("job request cut short")
            body += chunk
        fields = json.loads(bytes(body))
        return JobRequest(script=str(fields["script"]), argv=list(fields["argv"]),
                          cwd=str(fields["cwd"]), env=dict(fields["env"]),
                          umask=int(fields["umask"]), path=list(fields["path"]), fds=fds)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        for fd in fds:  # the caller keeps its streams; the server must not hold them
            os.close(fd)
        raise ValueError(f"malformed job request: {exc}") from exc


def same_user(conn: socket.socket) -> bool:
    """Whether the process at the other end of ``conn`` runs as this server's user."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def job_threads(env: dict[str, str]) -> int:
    """The threads a fresh process of this job would start with: ``OMP_NUM_THREADS``
    (Snakemake sets it to the job's ``threads``), else the CPUs it may use."""
    try:
        return max(1, int(env["OMP_NUM_THREADS"]))
    except (KeyError, ValueError):
        return max(1, len(os.sched_getaffinity(0)))


def become_job(request: JobRequest) -> None:
    """Turn this fork into the caller's job (everything but running its script)."""
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request.cwd)
    os.umask(request.umask)
    os.environ.clear()
    os.environ.update(request.env)
    sys.argv = list(request.argv)
    sys.path[:] = request.path
    importlib.invalidate_caches()  # modules added on disk since the server started
    import tempfile

    tempfile.tempdir = None  # TMPDIR is the job's (Snakemake's tmpdir resource)
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    threads = job_threads(request.env)
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    client.IN_SERVER_JOB = True


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when the server dies (and die now if it has)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


@dataclass
class RunningJob:
    """A forked job as the server tracks it: its caller's connection, its script's file
    name and when it started (for the log line)."""

    conn: socket.socket
    script: str
    since: float


class Server:
    """The accept loop: one selector over the listening socket, the callers of running
    jobs and a wake-up pipe for SIGCHLD. :meth:`serve` returns ``None`` when the server
    is done, and a :class:`JobRequest` in a fork that is to become that job."""

    def __init__(self, listener: socket.socket, idle_seconds: float) -> None:
        self.listener = listener
        self.idle_seconds = idle_seconds
        self.jobs: dict[int, RunningJob] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "child")

    def serve(self) -> JobRequest | None:
        """Run jobs until idle for ``idle_seconds``; see the class docstring."""
        last_busy = time.monotonic()
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                if key.data == "accept":
                    request = self.accept()
                    if request is not None:
                        return request
                elif key.data == "child":
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self.wake_r, 512):
                            pass
                else:
                    self.caller_left(key.data)
            self.reap()
            if self.jobs:
                last_busy = time.monotonic()
            elif time.monotonic() - last_busy > self.idle_seconds:
                return None

    def accept(self) -> JobRequest | None:
        """Take one caller's job: fork it, answer ``S <pid>``; the request in the fork."""
        try:
            conn, _ = self.listener.accept()
        except OSError as exc:  # out of file descriptors, a caller gone: not fatal here
            print(f"job server: accept failed: {exc}")
            return None
        try:
            if not same_user(conn):
                raise ValueError("caller of another user")
            request = read_request(conn)
        except (OSError, ValueError) as exc:
            print(f"job server: refused a job: {exc}")
            conn.close()  # the caller runs the job itself
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"job server: fork failed: {exc}")
            for fd in request.fds:
                os.close(fd)
            conn.close()  # the caller runs the job itself
            return None
        if pid == 0:
            self.close_in_job(conn)
            os.setpgid(0, 0)
            _die_with_parent(server)
            return request
        for fd in request.fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # either side may win the race; both set the same group
        try:
            conn.settimeout(None)
            conn.sendall(f"S {pid}\n".encode())
        except OSError:
            self.kill(pid)
        self.jobs[pid] = RunningJob(conn, Path(request.script).name, time.monotonic())
        self.selector.register(conn, selectors.EVENT_READ, pid)
        return None

    def close_in_job(self, conn: socket.socket) -> None:
        """In the fork: drop the server's sockets, pipe and signal set-up."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.selector.close()
        for sock in (self.listener, conn, *(job.conn for job in self.jobs.values())):
            sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)

    def caller_left(self, pid: int) -> None:
        """The caller of job ``pid`` closed its end (it was killed): end the job (its
        status is collected by :meth:`reap`; nobody is left to tell)."""
        self.kill(pid)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(self.jobs[pid].conn)

    @staticmethod
    def kill(pid: int) -> None:
        """SIGKILL job ``pid``'s process group (its workers too)."""
        for target in (lambda: os.killpg(pid, signal.SIGKILL),
                       lambda: os.kill(pid, signal.SIGKILL)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                target()

    def reap(self) -> None:
        """Collect ended jobs, tell each one's caller ``X <status>`` and log the job's
        seconds, CPU seconds and peak memory."""
        while self.jobs:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = self.jobs.pop(pid, None)
            if job is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(job.conn)
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                job.conn.sendall(f"X {code}\n".encode())
            job.conn.close()
            print(f"job {pid} {job.script}: exit {code}, "
                  f"{time.monotonic() - job.since:.1f} s, "
                  f"{usage.ru_utime + usage.ru_stime:.1f} CPU-s, "
                  f"{usage.ru_maxrss / 1024:.0f} MB")


def listen(path: Path) -> socket.socket:
    """A listening socket at ``path``, bound beside it and renamed into place (a caller
    never connects to a server that is still importing)."""
    staging = path.with_name(f"{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        staging.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.fspath(staging))
    sock.listen(64)
    os.replace(staging, path)
    return sock


def run_server(path: Path) -> JobRequest | None:
    """Hold the lock, preload, serve; remove the socket when done. None in the server,
    a :class:`JobRequest` in a fork that must run that job."""
    lock = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        return None
    missing = preload()
    if cuda_driver_loaded():
        print(f"job server {os.getpid()}: an import started the CUDA driver, and a fork "
              "could not use the GPU: not serving (jobs run in their own processes)")
        os.close(lock)
        return None
    # Out of the collector's sight: a job's collections would otherwise walk (and so
    # copy, page by page) every object the server imported
    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task"))
    print(f"job server {os.getpid()} at {path}: ready, {threads} thread(s); not "
          f"installed: {missing or 'none'}")
    idle = float(os.environ.get(client.IDLE_VAR, "60"))
    listener = listen(path)
    inode = os.stat(path).st_ino
    request = Server(listener, idle).serve()
    if request is not None:
        os.close(lock)
        return request
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_ino == inode:
            path.unlink()
    listener.close()
    print(f"job server {os.getpid()}: idle for {idle:g} s, exiting")
    return None


def exit_status(exc: BaseException | None) -> int:
    """The exit status Python gives a script that ended with ``exc`` (None: it returned),
    reporting it on stderr the way the interpreter does."""
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    sys.excepthook(type(exc), exc, exc.__traceback__)
    if isinstance(exc, KeyboardInterrupt):
        return 128 + signal.SIGINT
    return 1


def run_job(request: JobRequest) -> None:
    """Become the job, run its script as ``__main__`` and end the process with its status.

    The end is Python's own (threads joined, ``atexit`` functions, streams flushed) but
    without tearing down the interpreter: that would touch, and so copy, every object
    the server imported, for nothing.
    """
    import atexit
    import runpy
    import threading

    try:
        become_job(request)
        runpy.run_path(request.script, run_name="__main__")
        status = exit_status(None)
    except BaseException as exc:  # the job's end, whatever it is, becomes its status
        status = exit_status(exc)
    with contextlib.suppress(BaseException):
        threading._shutdown()  # what the interpreter does first at exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status & 0xFF)


def main(argv: list[str] | None = None) -> int:
    """``python -m facecast.job_server.server SOCKET``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m facecast.job_server.server SOCKET", file=sys.stderr)
        return 2
    request = run_server(Path(args[0]))
    if request is not None:
        run_job(request)
    return 0


if __name__ == "__main__":
    sys.exit(main())
