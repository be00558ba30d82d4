"""Worker processes and threads that cannot deadlock a job (issue 31).

``fork()`` copies a process together with every lock its other threads held at that
instant, but not the threads that would release them. A job that already runs threads
(tqdm's monitor, torch's and BLAS's pools, pytest-xdist's receiver) and forks a worker
can leave that worker waiting forever on a copied lock - the suite once hung ten minutes
that way inside a ``fork`` pool. Python's own documentation warns about it, and 3.14 moves
Linux off ``fork`` by default. So facecast never forks:

- **Processes** come only from :func:`process_pool`: a
  :class:`~concurrent.futures.ProcessPoolExecutor` on :func:`process_context`
  (``forkserver`` where the platform has it, else ``spawn``), whose workers start from a
  fresh, single-threaded process. A worker that dies makes the pool raise
  ``BrokenProcessPool`` instead of waiting for it (``multiprocessing.Pool`` would respawn
  it forever).
- **Threads** where the work releases the GIL (NumPy sorts, PNG decoding): no process at
  all (:func:`ordered_prefetch`).

A fresh worker imports what it runs, so a worker function lives in an importable module,
and multiprocessing re-runs the top level of the main script in every worker (as
``__mp_main__``): a script that starts workers keeps its work under
``if __name__ == "__main__":`` (the rule scripts that do, do).
"""

from __future__ import annotations

import ast
import multiprocessing
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing.context import BaseContext
from typing import TypeVar

__all__ = ["START_METHOD", "check_main_guard", "ordered_prefetch", "process_context",
           "process_pool", "unguarded_work"]

T = TypeVar("T")
R = TypeVar("R")

#: how facecast starts worker processes: never ``fork``
START_METHOD = ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                else "spawn")


def unguarded_work(source: str) -> list[int]:
    """Line numbers of the top-level statements of a script's ``source`` that a worker
    process would re-run: anything but imports, definitions, docstrings, assignments of
    constants and ``if __name__ == "__main__":`` blocks."""
    lines = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef,
                             ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value,
                                                                         ast.Constant):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        lines.append(node.lineno)
    return lines


def check_main_guard() -> None:
    """Raise when the running main script would redo its work in every worker.

    A worker started by ``forkserver`` or ``spawn`` re-runs the main script's top level;
    a rule script whose work is not under ``if __name__ == "__main__":`` would run the
    job again inside each worker (and crash there). Interactive sessions, ``python -m``
    and pytest have no such script and pass.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        return
    try:
        with open(path, encoding="utf-8") as f:
            lines = unguarded_work(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return
    if lines:
        raise RuntimeError(
            f"{path} starts worker processes, and each worker re-runs its top level: put "
            f"the statements at line(s) {lines} under `if __name__ == \"__main__\":` "
            "(see facecast.parallel)")


def process_context(preload: Sequence[str] = ()) -> BaseContext:
    """The multiprocessing context of every facecast worker process (:data:`START_METHOD`).

    ``preload``: modules the fork server imports once, before it forks any worker (so
    each worker starts with them loaded); it takes effect only when this process starts
    its fork server, i.e. at the first pool. Raises (:func:`check_main_guard`) when the
    running script would redo its work in every worker.
    """
    check_main_guard()
    ctx = multiprocessing.get_context(START_METHOD)
    if START_METHOD == "forkserver" and preload:
        ctx.set_forkserver_preload(["__main__", *preload])
    return ctx


def process_pool(workers: int, preload: Sequence[str] = ()) -> ProcessPoolExecutor:
    """A process pool of ``workers`` processes started by :func:`process_context`."""
    return ProcessPoolExecutor(max_workers=max(1, int(workers)),
                               mp_context=process_context(preload))


def ordered_prefetch(fn: Callable[[T], R], items: Iterable[T], workers: int,
                     depth: int = 4) -> Iterator[R]:
    """``map(fn, items)`` in order, computed ahead by ``workers`` threads.

    At most ``workers * depth`` results wait at any time (memory stays bounded however
    long ``items`` is). ``workers`` 0 computes each item when it is asked for, in the
    calling thread. An exception raised by ``fn`` is raised here, at that item.
    """
    if workers <= 0:
        yield from map(fn, items)
        return
    ahead = max(1, int(workers) * max(1, int(depth)))
    queue: deque[Future[R]] = deque()
    with ThreadPoolExecutor(max_workers=int(workers),
                            thread_name_prefix="facecast-prefetch") as pool:
        try:
            for item in items:
                queue.append(pool.submit(fn, item))
                if len(queue) >= ahead:
                    yield queue.popleft().result()
            while queue:
                yield queue.popleft().result()
        finally:
            for fut in queue:
                fut.cancel()
