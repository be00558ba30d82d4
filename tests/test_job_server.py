"""The warm job server (facecast.job_server): a rule script's job runs as a fork of a
server that imported the heavy libraries once, and sees what a fresh process of its own
would see; a killed caller takes its job along; without a server the job runs in its own
process and starts one.

Each test runs rule-script lookalikes (files under ``.snakemake/scripts/`` that open
``script_context`` on a stand-in ``snakemake`` object) as separate processes, against a
server in a private short folder (a Unix socket path has 108 bytes). The pipeline-level
proof is tests/test_scale_slurm.py: a local run (through the server) and a SLURM run (no
server inside SLURM jobs) give byte-identical files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import process_state

from facecast.job_server import client

#: the stand-in for Snakemake's preamble, then the job body (``{body}``)
SCRIPT = textwrap.dedent("""
    import json, os, sys, types
    snakemake = types.SimpleNamespace(log=[{log!r}], threads={threads}, config={{}},
                                      wildcards={{}}, rule="probe")
    from facecast.workflow_glue import script_context

    with script_context(snakemake) as ctx:
        from facecast.job_server import client
        {body}
""")

#: what a job reports about the process it runs in
PROBE = """
        import random, numpy, torch
        from threadpoolctl import threadpool_info
        os.write(1, b"to stdout\\n")
        report = {"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
                  "mark": os.environ.get("MARK"), "argv": sys.argv,
                  "umask": os.umask(0o022), "in_server": client.IN_SERVER_JOB,
                  "torch_threads": torch.get_num_threads(),
                  "blas_threads": sorted({p["num_threads"] for p in threadpool_info()}),
                  "random": random.random(), "numpy": float(numpy.random.random()),
                  "pgid": os.getpgid(0)}
        with open(os.environ["REPORT"], "w") as fh:
            json.dump(report, fh)
        os.write(2, b"to stderr\\n")
        raise SystemExit(int(os.environ.get("STATUS", "0")))
"""


@pytest.fixture
def jobs_dir():
    """A private, short folder for a server's socket (removed with its server)."""
    folder = Path(tempfile.mkdtemp(prefix="fcjs"))
    yield folder
    for log in folder.glob("*.log"):
        print(log.read_text())
    for pidfile in folder.glob("server.pid"):
        assert not alive(int(pidfile.read_text())), "a test left its server running"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def shared():
    """One server for the tests that do not end it: (its Popen, its folder)."""
    folder = Path(tempfile.mkdtemp(prefix="fcjs"))
    server, _ = start_server(folder, job_env(folder, **{client.IDLE_VAR: "60"}))
    yield server, folder
    server.terminate()
    assert server.wait(timeout=30) == -signal.SIGTERM
    shutil.rmtree(folder, ignore_errors=True)


def make_script(work: Path, name: str, body: str, threads: int = 2) -> Path:
    """A rule-script lookalike at ``work/.snakemake/scripts/<name>.py``."""
    folder = work / ".snakemake" / "scripts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    body = textwrap.indent(textwrap.dedent(body), " " * 4).strip()
    path.write_text(SCRIPT.format(log=str(work / f"{name}.log"), threads=threads, body=body))
    return path


def job_env(jobs_dir: Path, **extra: str) -> dict[str, str]:
    """The environment Snakemake gives a job with 2 threads, pointed at ``jobs_dir``
    (whose server exits after 3 s without a job)."""
    env = {k: v for k, v in os.environ.items()
           if k not in (*client.BATCH_VARS, client.SWITCH_VAR, client.FOLLOW_VAR)}
    env.update({var: "2" for var in client.THREAD_VARS})
    env.update({client.DIR_VAR: str(jobs_dir), client.IDLE_VAR: "3"})
    env.update(extra)
    return env


def start_caller(script: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def start_server(jobs_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    """A server for ``jobs_dir``, started the way a first job starts one; waits until
    its socket is in place."""
    env = client.server_env(env)
    probe = subprocess.run([sys.executable, "-c", "from facecast.job_server import client; "
                            "print(client.socket_path())"],
                           env=env, capture_output=True, text=True, check=True)
    sock = Path(probe.stdout.strip())
    server = subprocess.Popen([sys.executable, "-m", "facecast.job_server.server", str(sock)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    (jobs_dir / "server.pid").write_text(str(server.pid))
    wait_for(sock.exists, 120, "the server's socket")
    return server, sock


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {seconds} s")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """A live process (a zombie waits for the server to reap it: dead for our purposes)."""
    return process_state(pid) not in (None, "Z")


def test_a_job_runs_in_a_fork_of_the_server_and_sees_its_callers_world(tmp_path, shared):
    server, folder = shared
    # one thread when it forks: no lock of another thread comes along (facecast.parallel)
    assert len(os.listdir(f"/proc/{server.pid}/task")) == 1
    work = tmp_path / "work"
    work.mkdir()
    env = job_env(folder, MARK="caller's", REPORT=str(tmp_path / "r.json"), STATUS="3")
    script = make_script(work, "tmpprobe.probe", PROBE)
    reports = []
    for _ in range(2):
        caller = subprocess.Popen(["sh", "-c", f"umask 027; exec {sys.executable} {script}"],
                                  cwd=work, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        out, err = caller.communicate(timeout=120)
        assert caller.returncode == 3, err  # the job's own exit status
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["ppid"] == server.pid and report["pid"] != caller.pid
        assert report["pgid"] == report["pid"]  # its own group: killed as one
        assert report["in_server"] is True
        assert report["cwd"] == str(work) and report["mark"] == "caller's"
        assert report["argv"] == [str(script)] and report["umask"] == 0o027
        assert report["torch_threads"] == 2 and report["blas_threads"] == [2]
        assert "to stdout" in out and "to stderr" in err
        reports.append(report)
    # fresh seeds in each job, as in a fresh process
    assert reports[0]["random"] != reports[1]["random"]
    assert reports[0]["numpy"] != reports[1]["numpy"]
    # script_context ran its body once a job, in the fork (its log line of the exit)
    assert (work / "tmpprobe.probe.log").read_text().count("SystemExit: 3") == 2


def test_without_a_server_the_first_job_runs_itself_and_starts_one(tmp_path, jobs_dir):
    work = tmp_path / "work"
    work.mkdir()
    env = job_env(jobs_dir, REPORT=str(tmp_path / "r.json"))
    script = make_script(work, "tmpfirst.probe", PROBE)
    caller = start_caller(script, env, work)
    assert caller.wait(timeout=120) == 0, caller.stderr.read()
    first = json.loads((tmp_path / "r.json").read_text())
    assert first["in_server"] is False and first["pid"] == caller.pid
    wait_for(lambda: any(jobs_dir.glob("*.sock")), 120, "server started by the first job")
    caller = start_caller(script, env, work)
    assert caller.wait(timeout=120) == 0, caller.stderr.read()
    second = json.loads((tmp_path / "r.json").read_text())
    assert second["in_server"] is True and second["ppid"] != caller.pid
    (jobs_dir / "server.pid").write_text(str(second["ppid"]))
    wait_for(lambda: not alive(second["ppid"]), 60, "idle server exit")
    assert not list(jobs_dir.glob("*.sock"))


@pytest.mark.parametrize("switch", [{client.SWITCH_VAR: "0"}, {"SLURM_JOB_ID": "17"}])
def test_switched_off_or_in_slurm_a_job_runs_in_its_own_process(tmp_path, shared, switch):
    work = tmp_path / "work"
    work.mkdir()
    env = job_env(shared[1], REPORT=str(tmp_path / "r.json"))
    script = make_script(work, "tmpoff.probe", PROBE)
    caller = start_caller(script, dict(env, **switch), work)
    assert caller.wait(timeout=120) == 0, caller.stderr.read()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["pid"] == caller.pid and report["in_server"] is False


def test_a_killed_caller_takes_its_job_along_and_signals_reach_the_job(tmp_path, jobs_dir):
    work = tmp_path / "work"
    work.mkdir()
    env = job_env(jobs_dir)
    server, _ = start_server(jobs_dir, env)
    body = f"""
        import signal, time
        def stop(signum, frame):
            open({str(tmp_path / "got")!r}, "w").write(str(signum))
            raise SystemExit(7)
        signal.signal(signal.SIGTERM, stop)
        note = {str(tmp_path / "pid")!r} + os.environ["N"]
        open(note + ".tmp", "w").write(str(os.getpid()))
        os.replace(note + ".tmp", note)  # whole: the test reads it once it exists
        time.sleep(120)
    """
    script = make_script(work, "tmpsleep.probe", body)
    # SIGTERM to the caller (Snakemake cancelling a job) reaches the job: its status
    caller = start_caller(script, dict(env, N="1"), work)
    wait_for((tmp_path / "pid1").exists, 60, "job start")
    caller.send_signal(signal.SIGTERM)
    assert caller.wait(timeout=30) == 7
    assert (tmp_path / "got").read_text() == str(int(signal.SIGTERM))
    # SIGKILL to the caller (a killed run): the server kills the job
    caller = start_caller(script, dict(env, N="2"), work)
    wait_for((tmp_path / "pid2").exists, 60, "job start")
    job = int((tmp_path / "pid2").read_text())
    assert alive(job)
    caller.kill()
    caller.wait(timeout=30)
    wait_for(lambda: not alive(job), 30, "end of the orphaned job")
    # a job whose server dies is killed, and its caller fails saying so
    caller = start_caller(script, dict(env, N="3"), work)
    wait_for((tmp_path / "pid3").exists, 60, "job start")
    job = int((tmp_path / "pid3").read_text())
    server.kill()
    server.wait(timeout=30)
    assert caller.wait(timeout=30) == 1
    assert "lost job" in caller.stderr.read()
    wait_for(lambda: not alive(job), 30, "end of the job of a dead server")


def test_a_failing_job_fails_with_its_traceback(tmp_path, shared):
    work = tmp_path / "work"
    work.mkdir()
    env = job_env(shared[1])
    script = make_script(work, "tmpfail.probe", 'raise ValueError("no such column: age")')
    caller = start_caller(script, env, work)
    _out, err = caller.communicate(timeout=120)
    assert caller.returncode == 1
    log = (work / "tmpfail.probe.log").read_text()
    assert "job failed" in log and "ValueError: no such column: age" in log
    assert "ValueError: no such column: age" in err  # and on the job's stderr, as Python does


def test_only_rule_scripts_on_linux_outside_slurm_are_handed_on(tmp_path):
    rule_script = str(tmp_path / ".snakemake" / "scripts" / "tmpab12.faces.py")
    assert client.wanted(rule_script, {})
    assert not client.wanted(rule_script, {client.SWITCH_VAR: "off"})
    for var in client.BATCH_VARS:
        assert not client.wanted(rule_script, {var: "3"})
    assert not client.wanted(str(tmp_path / "scripts" / "faces.py"), {})
    assert not client.wanted(None, {})


def test_the_server_folder_must_be_private(tmp_path):
    private = tmp_path / "jobs"
    assert client.server_dir({client.DIR_VAR: str(private)}) == private
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    private.chmod(0o770)  # a group could connect and run code as us
    assert client.server_dir({client.DIR_VAR: str(private)}) is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    assert client.server_dir({client.DIR_VAR: str(link)}) is None


def test_a_job_ends_as_python_ends_a_script(tmp_path, shared):
    """Threads joined and atexit functions run before the fork exits (os._exit after)."""
    work = tmp_path / "work"
    work.mkdir()
    body = f"""
        import atexit, threading, time
        atexit.register(lambda: open({str(tmp_path / "atexit")!r}, "w").write("ran"))
        def late():
            time.sleep(0.5)
            open({str(tmp_path / "thread")!r}, "w").write("joined")
        threading.Thread(target=late).start()
    """
    caller = start_caller(make_script(work, "tmpend.probe", body), job_env(shared[1]), work)
    assert caller.wait(timeout=120) == 0, caller.stderr.read()
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"


@pytest.mark.parametrize(("exc", "status", "said"), [
    (None, 0, ""), (SystemExit(), 0, ""), (SystemExit(4), 4, ""),
    (SystemExit("bad config: faces.detector"), 1, "bad config: faces.detector"),
    (ValueError("no such column"), 1, "ValueError: no such column"),
    (KeyboardInterrupt(), 130, "KeyboardInterrupt")])
def test_exit_status_is_the_interpreters(exc, status, said, capsys):
    from facecast.job_server.server import exit_status

    assert exit_status(exc) == status
    err = capsys.readouterr().err
    assert (said in err) if said else err == ""


def test_rule_scripts_import_their_stage_inside_the_context():
    """A rule script's process imports only the standard library and workflow_glue before
    script_context hands its job on: a stage import above it would pay the very imports
    the server saves (pandas, torch) in the caller too."""
    import ast

    from conftest import REPO

    heavy = {}
    for script in sorted((REPO / "scripts").glob("*.py")):
        for node in ast.parse(script.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            top = [n for n in names if n != "facecast.workflow_glue"
                   and n.split(".")[0] not in sys.stdlib_module_names]
            if top:
                heavy[script.name] = top
    assert len(list((REPO / "scripts").glob("*.py"))) >= 50
    assert heavy == {}


BENCH_SNAKEFILE = """
{follow}
rule busy:
    output: "served.txt"
    benchmark: "busy.tsv"
    log: "busy.log"
    script: "busy.py"
"""

BENCH_SCRIPT = """
import time
import numpy as np
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.job_server import client

    end = time.process_time() + 2.0
    while time.process_time() < end:  # 2 CPU-seconds
        pass
    held = np.ones(300 * 2**20 // 8)  # 300 MB the job alone holds, for 2.5 s
    time.sleep(2.5)
    open(snakemake.output[0], "w").write(str(client.IN_SERVER_JOB))
"""


@pytest.mark.parametrize("follow", [True, False])
def test_benchmark_records_measure_the_served_job(tmp_path, shared, follow):
    """With the Snakefile's follow_served_jobs() the job runs in the server and its
    benchmark TSV counts the job's CPU and memory; without it, a job with a benchmark
    runs in its own process (measured as ever)."""
    import pandas as pd

    work = tmp_path / "work"
    work.mkdir()
    line = ("from facecast.job_server.benchmarks import follow_served_jobs\n"
            "follow_served_jobs()") if follow else ""
    (work / "Snakefile").write_text(BENCH_SNAKEFILE.format(follow=line))
    (work / "busy.py").write_text(BENCH_SCRIPT)
    env = job_env(shared[1])
    run = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-d", str(work),
                          "-s", str(work / "Snakefile")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (work / "served.txt").read_text() == str(follow)
    record = pd.read_csv(work / "busy.tsv", sep="\t").iloc[0]
    assert record["s"] >= 4.5
    assert record["cpu_time"] >= 1.8  # the job's 2 CPU-s, not the waiting process's 0.1
    assert record["max_uss"] >= 300  # MB: the job's own 300 MB array


def test_a_server_whose_imports_started_cuda_does_not_serve():
    """A fork of a process that started the CUDA driver cannot use the GPU: the server
    checks its own memory map after preloading (torch's runtime libcudart is fine)."""
    from facecast.job_server.server import cuda_driver_loaded

    runtime = ("7f00-7f10 r-xp 00000000 08:01 12 /venv/torch/lib/libcudart.so.13\n"
               "7f20-7f30 r--p 00000000 08:01 13 /venv/nvidia/cudnn/lib/libcudnn.so.9\n"
               "7f40-7f50 rw-p 00000000 00:00 0\n")
    assert not cuda_driver_loaded(runtime)
    assert cuda_driver_loaded(runtime + "7f60-7f70 r-xp 0 08:01 14 "
                                        "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06\n")


def test_a_malformed_request_is_refused_and_its_streams_let_go():
    """A request cut short, of bad JSON or with one stream fd: ValueError, and the fds it
    carried are closed in the server (the caller then runs its job itself)."""
    import socket

    from facecast.job_server.server import read_request

    for payload, n_fds in ((b"\x00\x00\x00\x10{\"scr", 3), (b"\x00\x00\x00\x02{]", 3),
                           (b"\x00\x00\x00\x02{}", 1)):
        ours, theirs = socket.socketpair()
        with ours, theirs:
            streams = [os.open(os.devnull, os.O_RDONLY) for _ in range(n_fds)]
            socket.send_fds(ours, [payload], streams)
            ours.shutdown(socket.SHUT_WR)
            before = set(os.listdir("/proc/self/fd"))
            with pytest.raises(ValueError, match="job request"):
                read_request(theirs)
            assert set(os.listdir("/proc/self/fd")) == before  # received copies closed
            for fd in streams:
                os.close(fd)
