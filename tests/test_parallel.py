"""No fork after threads (issue 31.1): facecast's worker processes start from a fresh,
single-threaded process, so a lock another thread of the job holds cannot freeze them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from facecast.datasets.synthetic.generate import generate_dataset
from facecast.parallel import (
    START_METHOD,
    check_main_guard,
    ordered_prefetch,
    process_pool,
    unguarded_work,
)

#: held by a background thread for the whole of a test; a forked child would copy it held
HELD = threading.Lock()


def take_held_lock(x: int) -> int:
    """Worker function: needs :data:`HELD` (free in a fresh process, held in a fork)."""
    if not HELD.acquire(timeout=20):
        raise TimeoutError("the lock a background thread held came along into the worker")
    HELD.release()
    return x * x


def test_start_method_never_forks():
    assert START_METHOD in ("forkserver", "spawn")
    with process_pool(1) as pool:
        ctx = pool._mp_context  # the context the pool was built on
    assert ctx.get_start_method() == START_METHOD


def test_pool_workers_do_not_inherit_a_lock_held_by_another_thread():
    release = threading.Event()

    def hold() -> None:
        with HELD:
            release.wait(60)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    time.sleep(0.05)
    assert HELD.locked()
    try:
        with process_pool(2) as pool:
            assert list(pool.map(take_held_lock, range(6))) == [0, 1, 4, 9, 16, 25]
    finally:
        release.set()
        holder.join()


def test_synthetic_pool_path_finishes_beside_a_live_thread(tmp_path):
    """The pool path of generate_dataset (the hang's site), with a busy background thread
    and tqdm's monitor alive, in a fresh interpreter under a hard timeout; its output equals
    the one-process run's."""
    code = textwrap.dedent(f"""
        import threading, time
        from pathlib import Path
        from facecast.datasets.synthetic.generate import generate_dataset
        def busy(stop):
            lock = threading.Lock()
            while not stop.is_set():
                with lock:
                    time.sleep(0.001)
        if __name__ == "__main__":
            stop = threading.Event()
            threading.Thread(target=busy, args=(stop,), daemon=True).start()
            generate_dataset(Path({str(tmp_path / "pool")!r}), seed=3, n_jobs=2,
                             n_identities=6, images_per_identity=2, image_size=64)
            stop.set()
            print("done")
    """)
    script = tmp_path / "run_pool.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=180, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("done")
    serial = generate_dataset(tmp_path / "serial", seed=3, n_jobs=1, n_identities=6,
                              images_per_identity=2, image_size=64)
    pooled = pd.read_parquet(tmp_path / "pool" / "truth.parquet")
    pd.testing.assert_frame_equal(serial.reset_index(drop=True),
                                  pooled.reset_index(drop=True))
    for rel in serial["path"]:
        assert (tmp_path / "pool" / rel).read_bytes() == (tmp_path / "serial" / rel).read_bytes()


def test_unguarded_script_is_refused_with_the_lines_to_guard(tmp_path):
    script = tmp_path / "rule_script.py"
    script.write_text(textwrap.dedent("""
        from facecast.parallel import process_pool
        def square(x):
            return x * x
        with process_pool(2) as pool:
            print(list(pool.map(square, range(3))))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode != 0
    assert "line(s) [5]" in out.stderr and "__main__" in out.stderr


def test_unguarded_work_reads_only_what_a_worker_would_rerun():
    src = textwrap.dedent('''
        """doc"""
        import os
        LIMIT = 3
        def f():
            return 1
        if __name__ == "__main__":
            f()
        print("work")
    ''')
    assert unguarded_work(src) == [9]
    assert unguarded_work("import os\nif __name__ == '__main__':\n    os.getcwd()\n") == []


def test_pytest_itself_passes_the_main_guard_check():
    check_main_guard()  # pytest's entry script keeps its work under the guard


def test_a_worker_that_dies_breaks_the_pool_instead_of_hanging():
    with pytest.raises(BrokenProcessPool), process_pool(1) as pool:
        list(pool.map(_exit_hard, [1]))


def _exit_hard(_: int) -> None:
    import os

    os._exit(3)


def test_ordered_prefetch_keeps_order_bounds_lookahead_and_raises_in_place():
    started: list[int] = []

    def slow(i: int) -> int:
        started.append(i)
        time.sleep(0.002 * (i % 3))
        return i * 10

    gen = ordered_prefetch(slow, range(100), workers=2, depth=2)
    first = next(gen)
    assert first == 0
    time.sleep(0.05)
    assert max(started) < 1 + 2 * 2 + 1  # never more than workers * depth ahead
    assert [first, *gen] == [i * 10 for i in range(100)]
    assert list(ordered_prefetch(slow, range(5), workers=0)) == [0, 10, 20, 30, 40]

    def bad(i: int) -> int:
        if i == 3:
            raise ValueError("item 3")
        return i

    got = []
    with pytest.raises(ValueError, match="item 3"):
        for v in ordered_prefetch(bad, range(10), workers=2):
            got.append(v)
    assert got == [0, 1, 2]


def test_crop_loader_threads_equal_inline_decoding():
    import torch

    from facecast.embed.data import crop_loader
    from facecast.faces.crops import encode_png

    rng = np.random.default_rng(0)
    crops = [encode_png(rng.integers(0, 255, (112, 112, 3), dtype=np.uint8))
             for _ in range(11)]
    crops[4] = b"not a png"
    rows = np.array([0, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    kw = dict(batch_size=3, size=112, device=torch.device("cpu"))
    inline = list(crop_loader(crops, rows, num_workers=0, **kw))
    threaded = list(crop_loader(crops, rows, num_workers=3, **kw))
    assert len(inline) == len(threaded) == 4
    for a, b in zip(inline, threaded, strict=True):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
        assert a[3] == b[3]
    flags = torch.cat([b[2] for b in threaded]).numpy()
    assert flags.tolist() == [r != 4 for r in rows]
    assert "crop does not decode" in threaded[1][3][0]
