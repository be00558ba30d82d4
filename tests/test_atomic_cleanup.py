"""Issue 24.4: atomic writes leave no empty ``.tmp/`` folder behind, even under contention.

A finished or failed write removes its private temp folder and ``.tmp/`` once empty;
writers beside each other in one folder (threads and processes) race on creating and
removing ``.tmp/`` and must never fail; a SIGKILLed writer's leftover goes with the next
write of the same target.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from facecast.io import atomic
from facecast.io.atomic import (
    TEMP_DIR,
    atomic_path,
    discard_temp,
    prepare_temp,
    remove_empty_temp_dir,
    write_bytes,
    write_text,
)
from facecast.io.parquet_io import ParquetStreamWriter, read_parquet, write_parquet

SCHEMA = pa.schema([("image_id", pa.string()), ("v", pa.float32())])


def test_finished_writes_leave_no_tmp(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt", "hello\n")
    write_parquet(pd.DataFrame({"x": [1, 2]}), tmp_path / "b.parquet")
    with ParquetStreamWriter(tmp_path / "c.parquet", SCHEMA) as w:
        w.write(pd.DataFrame({"image_id": ["a"], "v": [1.0]}))
    with atomic_path(tmp_path / "sub" / "d.bin") as tmp:
        tmp.write_bytes(b"\x00\x01")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.parquet", "c.parquet",
                                                          "sub"]
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["d.bin"]
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    assert read_parquet(tmp_path / "c.parquet")["image_id"].tolist() == ["a"]


def test_failed_and_discarded_writes_leave_no_tmp(tmp_path: Path) -> None:
    target = write_text(tmp_path / "t.txt", "before")
    with pytest.raises(RuntimeError, match="boom"), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "before"
    assert not (tmp_path / TEMP_DIR).exists()
    # a failing Parquet write (bad cast) and an aborted stream
    with pytest.raises((pa.ArrowException, TypeError, ValueError)):
        write_parquet(pd.DataFrame({"x": ["no list"]}), tmp_path / "p.parquet",
                      schema=pa.schema([("x", pa.list_(pa.int64()))]))
    with pytest.raises(RuntimeError), ParquetStreamWriter(tmp_path / "s.parquet", SCHEMA) as w:
        w.write(pd.DataFrame({"image_id": ["a"], "v": [1.0]}))
        raise RuntimeError("abort")
    assert not (tmp_path / TEMP_DIR).exists()
    # a stream writer whose file cannot even be opened (schema Parquet cannot store)
    with pytest.raises(pa.ArrowException):
        ParquetStreamWriter(tmp_path / "n.parquet", pa.schema([("n", pa.null())])
                            .append(pa.field("s", pa.struct([]))))
    assert not (tmp_path / TEMP_DIR).exists()
    # discarding an untouched temporary by hand
    discard_temp(prepare_temp(tmp_path / "u.txt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


def test_tmp_of_a_live_writer_is_kept(tmp_path: Path) -> None:
    """The rmdir that ends one write fails harmlessly while another temporary is there."""
    live = prepare_temp(tmp_path / "slow.parquet")
    live.write_bytes(b"PAR1")
    write_text(tmp_path / "fast.txt", "done")
    assert live.read_bytes() == b"PAR1"  # untouched: .tmp/ is not empty
    assert remove_empty_temp_dir(tmp_path) is False
    os.replace(live, tmp_path / "slow.parquet")
    discard_temp(live)
    assert not (tmp_path / TEMP_DIR).exists()
    assert remove_empty_temp_dir(tmp_path) is False  # already gone: no error either


def test_tmp_removed_between_mkdirs_is_created_again(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: a neighbour removes the empty .tmp/ right after this writer created it
    and before it created its private folder in it (three times in a row here)."""
    real_mkdir = os.mkdir
    removed = []

    def racing_mkdir(path, mode=0o777, **kw):
        p = Path(path)
        if p.parent.name == TEMP_DIR and len(removed) < 3 and p.parent.is_dir():
            os.rmdir(p.parent)  # the neighbour's cleanup wins the race
            removed.append(p)
        return real_mkdir(path, mode, **kw)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    write_text(tmp_path / "r.txt", "raced")
    assert len(removed) == 3
    assert (tmp_path / "r.txt").read_text() == "raced"
    assert not (tmp_path / TEMP_DIR).exists()


def test_a_race_that_never_ends_fails_loudly(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real_mkdir = os.mkdir

    def always_removed(path, mode=0o777, **kw):
        p = Path(path)
        if p.parent.name == TEMP_DIR and p.parent.is_dir():
            os.rmdir(p.parent)
        return real_mkdir(path, mode, **kw)

    monkeypatch.setattr(os, "mkdir", always_removed)
    monkeypatch.setattr(atomic, "_MKDIR_ATTEMPTS", 5)
    with pytest.raises(FileNotFoundError):
        write_text(tmp_path / "never.txt", "x")
    assert not (tmp_path / "never.txt").exists()


def _writer_loop(folder: Path, tag: str, iterations: int) -> None:
    """Finished, failed and streamed writes of this writer's own targets in ``folder``."""
    for i in range(iterations):
        target = folder / f"{tag}-{i % 4}.txt"
        if i % 5 == 4:
            try:
                with atomic_path(target) as tmp:
                    tmp.write_text("partial")
                    raise KeyError("fail on purpose")
            except KeyError:
                pass
        elif i % 7 == 6:
            with ParquetStreamWriter(folder / f"{tag}.parquet", SCHEMA) as w:
                w.write(pd.DataFrame({"image_id": [tag], "v": [float(i)]}))
        else:
            write_text(target, f"{tag} {i}\n")


def test_concurrent_threads_never_fail_and_leave_no_tmp(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def run(tag: str) -> None:
        try:
            start.wait()
            _writer_loop(tmp_path, tag, 150)
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"t{k}",)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not (tmp_path / TEMP_DIR).exists()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([f"t{k}-{j}.txt" for k in range(6) for j in range(4)]
                           + [f"t{k}.parquet" for k in range(6)])


_PROCESS_WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from test_atomic_cleanup import _writer_loop
folder, tag, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[1]).parent / "go"
while not go.exists():
    time.sleep(0.005)
_writer_loop(folder, tag, int(sys.argv[3]))
"""


def test_concurrent_processes_never_fail_and_leave_no_tmp(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    here = str(Path(__file__).parent)
    procs = [subprocess.Popen([sys.executable, "-c", _PROCESS_WRITER, str(folder), f"p{k}",
                               "300", here], stderr=subprocess.PIPE, text=True)
             for k in range(4)]
    time.sleep(0.5)  # let them import, then start them together
    (tmp_path / "go").touch()
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in results), [err for _, err in results]
    assert not (folder / TEMP_DIR).exists()
    assert len(list(folder.iterdir())) == 4 * 5  # 4 text targets + 1 Parquet per writer


_KILLED = """
import sys, time
from facecast.io.atomic import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    tmp.write_bytes(b"half")
    print("ready", flush=True)
    time.sleep(60)
"""


def test_sigkilled_writer_leftover_goes_with_the_next_write_of_its_target(tmp_path: Path
                                                                           ) -> None:
    target = tmp_path / "k.parquet"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(target)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    leftover = list((tmp_path / TEMP_DIR).iterdir())
    assert [p.name.startswith(".k.parquet.tmp-") for p in leftover] == [True]
    # a write of another target in the folder leaves it (it may be a live writer's) ...
    write_text(tmp_path / "other.txt", "x")
    assert list((tmp_path / TEMP_DIR).iterdir()) == leftover
    # ... the rerun of the killed job removes it, and the emptied .tmp/ with it
    write_parquet(pd.DataFrame({"x": [1]}), target)
    assert not (tmp_path / TEMP_DIR).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.parquet", "other.txt"]


def test_write_bytes_renames_once_and_clears_a_killed_writers_temporary(tmp_path: Path,
                                                                        monkeypatch) -> None:
    """write_bytes (the synthetic dataset's images): the bytes land under the name, nothing
    else is left; a killed writer's hidden temporary beside the target goes at the next
    write of that target (another target's stays); a failed write keeps the old file."""
    stale = tmp_path / ".0.jpg.tmp-999999-deadbeef"
    other = tmp_path / ".1.jpg.tmp-999999-deadbeef"
    stale.write_bytes(b"half")
    other.write_bytes(b"half")
    assert write_bytes(tmp_path / "0.jpg", b"\xff\xd8jpeg") == tmp_path / "0.jpg"
    assert (tmp_path / "0.jpg").read_bytes() == b"\xff\xd8jpeg"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".1.jpg.tmp-999999-deadbeef",
                                                          "0.jpg"]

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_bytes(tmp_path / "0.jpg", b"new")
    assert (tmp_path / "0.jpg").read_bytes() == b"\xff\xd8jpeg"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".1.jpg.tmp-999999-deadbeef",
                                                          "0.jpg"]
