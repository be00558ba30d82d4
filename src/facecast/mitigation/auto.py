"""Whether the mitigation stage runs when the config leaves ``mitigation.enabled`` out: by the
identities on each side of the calibration split, counted before any job.

The stage learns on calibration identities and evaluates on the others
(:mod:`facecast.mitigation.split`); its tests are identity-clustered Wald tests with t on
G - 1 degrees of freedom, which keep their level with some 50 clusters and more (Cameron &
Miller, "A practitioner's guide to cluster-robust inference", J. Human Resources 2015),
and FSN / FairCal need calibration identities enough to form clusters. So, left out,
mitigation runs on a dataset when the split ``mitigation.calibration.fraction`` of its
identities leaves at least :data:`MIN_SIDE_IDENTITIES` on **each** side (100 identities at
the default fraction 0.5). RFW (~3,000 people per set), BFW (800) and the demo (240) pass;
a folder of a few people (the README's two-line config) does not. A calibration source
(``mitigation.calibration.benchmark`` / ``.dataset``) is the user's choice of the
calibration side: the stage runs. ``mitigation.enabled: true`` / ``false`` decide
whatever the counts.

Counts come from what each dataset kind declares, read once at parse time and only until
enough identities are seen (:func:`identity_count`): the synthetic generator's
``n_identities``, the identity folders of a ``folder``/``lfw`` root, the ``identity``
column of a ``table`` manifest, CelebA's ``identity_CelebA.txt``, RFW's
``txts/<Set>/<Set>_people.txt`` (or its ``data/<Set>/`` folders), BFW's ``id1``/``id2``
columns. Kinds whose identities are unknown before a job (RecordIO, ``.bin`` files,
IJB) keep the stage off, and the plan says so. A count is the dataset's identities: a
protocol that uses some of them has at most that many.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from facecast.config.fair_sets import rfw_sets

__all__ = ["MIN_SIDE_IDENTITIES", "decide", "identity_count", "needed_identities",
           "side_counts"]

#: identities each side of the calibration split needs for the stage to run by default
MIN_SIDE_IDENTITIES = 50
#: rows read from a table at a time while counting
_ROWS = 50_000


def side_counts(n: int, fraction: float) -> tuple[int, int]:
    """``(calibration, evaluated)`` identities of ``n`` at ``fraction`` (the split's own
    rounding, :func:`facecast.mitigation.split.split_by_fraction`)."""
    cal = int(min(max(round(float(fraction) * n), 0), n))
    return cal, n - cal


def needed_identities(fraction: float, per_side: int = MIN_SIDE_IDENTITIES) -> int:
    """The fewest identities whose split leaves ``per_side`` on each side."""
    n = 2 * per_side
    while min(side_counts(n, fraction)) < per_side:
        n += 1
    return n


def _distinct(values: Iterable[Iterable[str]], need: int) -> tuple[int, bool]:
    """Distinct values over the batches ``values``, stopping once ``need`` are seen:
    ``(count, stopped early)``."""
    seen: set[str] = set()
    it = iter(values)
    for batch in it:
        seen.update(str(v) for v in batch if str(v).strip())
        if len(seen) >= need:
            return len(seen), next(it, None) is not None
    return len(seen), False


def _subfolders(root: Path) -> Iterator[list[str]]:
    """Batches of the names of ``root``'s folders (symlinks to folders included)."""
    batch: list[str] = []
    with os.scandir(root) as it:
        for e in it:
            if e.is_dir(follow_symlinks=True):
                batch.append(e.name)
            if len(batch) >= 1000:
                yield batch
                batch = []
    yield batch


def _csv_columns(path: Path, columns: tuple[str, ...]) -> Iterator[list[str]]:
    """Batches of the values of ``columns`` of a CSV file with a header (none without
    those columns: the config checks name the file)."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        idx = [header.index(c) for c in columns if c in header]
        if not idx:
            return
        batch: list[str] = []
        for row in reader:
            batch += [row[i] for i in idx if i < len(row)]
            if len(batch) >= _ROWS:
                yield batch
                batch = []
        yield batch


def _whitespace_column(path: Path, field: int) -> Iterator[list[str]]:
    """Batches of one whitespace-separated field of every line of a text file."""
    batch: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > field:
                batch.append(parts[field])
            if len(batch) >= _ROWS:
                yield batch
                batch = []
    yield batch


def _table_identities(path: Path) -> Iterator[list[str]]:
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        for b in pq.ParquetFile(path).iter_batches(batch_size=_ROWS, columns=["identity"]):
            yield b.column(0).to_pylist()
        return
    yield from _csv_columns(path, ("identity",))


def _rfw_people(spec: Mapping[str, Any]) -> Iterator[list[str]]:
    """Each set's people file, else its image folders (the release layout of
    :func:`facecast.datasets.rfw.rfw_files`)."""
    from facecast.datasets.rfw import rfw_files

    for s in rfw_sets(spec):
        files = rfw_files(str(spec.get("root", "")), s)
        if files["people"].is_file():
            yield from _whitespace_column(files["people"], 0)
        elif files["images_dir"].is_dir():
            yield from _subfolders(files["images_dir"])


def _celeba(root: Path) -> Iterator[list[str]]:
    from facecast.datasets.celeba import find_file
    from facecast.datasets.manifest import DatasetError

    try:
        path = find_file(root, "identity_CelebA.txt", ("Anno",))
    except DatasetError:
        return
    yield from _whitespace_column(path, 1)


def _batches(spec: Mapping[str, Any]) -> tuple[Iterable[Iterable[str]] | None, str]:
    """The identity batches of a dataset block and where they come from (None: unknown)."""
    kind = str(spec.get("kind", ""))
    root = Path(str(spec.get("root", "")))
    if kind in ("folder", "lfw") and root.is_dir():
        return _subfolders(root), f"identity folders of {root}"
    if kind == "table" and spec.get("manifest") and Path(str(spec["manifest"])).is_file():
        return _table_identities(Path(str(spec["manifest"]))), "its manifest's identity column"
    if kind == "celeba" and root.is_dir():
        return _celeba(root), "identity_CelebA.txt"
    if kind == "rfw" and not spec.get("bins") and root.is_dir():
        return _rfw_people(spec), "RFW's people files"
    if kind == "bfw" and spec.get("table") and Path(str(spec["table"])).is_file():
        return _csv_columns(Path(str(spec["table"])), ("id1", "id2")), "BFW's id1/id2"
    why = {"rfw": "the .bin form names no identities", "recordio": "read by a job",
           "insightface_bin": "a .bin file names no identities", "ijb": "templates"}
    return None, why.get(kind, f"kind {kind or '?'}")


def identity_count(spec: Mapping[str, Any], need: int) -> tuple[int | None, str]:
    """``(identities, how counted)`` of a dataset block, counting stops at ``need``
    (then "at least"); ``(None, why)`` where the kind does not say before a job."""
    if spec.get("kind") == "synthetic":
        n = int(dict(spec.get("synthetic") or {}).get("n_identities", 240))
        return n, "synthetic.n_identities"
    batches, how = _batches(spec)
    if batches is None:
        return None, how
    try:
        n, early = _distinct(batches, need)
    except (OSError, ValueError, csv.Error) as exc:
        return None, f"unreadable ({exc})"
    return n, ("at least " if early else "") + how


def decide(config: Mapping[str, Any], datasets: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(datasets the stage runs on, plan lines)`` when ``mitigation.enabled`` is left
    out (module docstring)."""
    mit = dict(config.get("mitigation") or {})
    cal = dict(mit.get("calibration") or {})
    specs = dict(config.get("datasets") or {})
    if cal.get("benchmark") or cal.get("dataset"):
        return list(datasets), ["mitigation: on (mitigation.enabled left out; "
                                "mitigation.calibration names the calibration source)"]
    fraction = float(cal.get("fraction", 0.5))
    need = needed_identities(fraction)
    on, lines = [], []
    for ds in datasets:
        n, how = identity_count(dict(specs.get(ds) or {}), need)
        if n is None:
            lines.append(f"mitigation: off for {ds} (mitigation.enabled left out; its "
                         f"identities are unknown before any job: {how}; "
                         "mitigation.enabled: true runs it)")
            continue
        n_cal, n_ev = side_counts(n, fraction)
        counts = (f"{'at least ' if how.startswith('at least') else ''}{n} identities "
                  f"({how.removeprefix('at least ')}) -> {n_cal} calibration / {n_ev} "
                  f"evaluated at calibration.fraction {fraction:g}")
        if min(n_cal, n_ev) >= MIN_SIDE_IDENTITIES:
            on.append(ds)
            lines.append(f"mitigation: on for {ds} (mitigation.enabled left out; {counts}: "
                         f"at least {MIN_SIDE_IDENTITIES} on each side; "
                         "mitigation.enabled: false turns it off)")
        else:
            lines.append(f"mitigation: off for {ds} (mitigation.enabled left out; {counts}: "
                         f"fewer than {MIN_SIDE_IDENTITIES} on a side; "
                         "mitigation.enabled: true runs it anyway)")
    return on, lines
