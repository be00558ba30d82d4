"""RFW (Racial Faces in-the-Wild, Wang et al., ICCV 2019): the test release as a dataset.

Layout of the test release (``root``)::

    data/<Set>/<pid>/<pid>_NNNN.jpg        loosely cropped faces, one folder per person
    txts/<Set>/<Set>_pairs.txt             per fold 300 lines ``pid n1 n2`` (genuine) then
                                           300 lines ``pid1 n1 pid2 n2`` (impostor)
    txts/<Set>/<Set>_images.txt            ``<pid>_NNNN.jpg <label>`` per image
    txts/<Set>/<Set>_people.txt            ``<pid> <number of images>`` per person
    txts/<Set>/<Set>_lmk.txt               ``<path> <label> x1 y1 ... x5 y5`` per image

for the sets Caucasian, Indian, Asian, African (the RFW paper's order). Image number ``n``
of person ``pid`` is ``<pid>_<n:04d>.jpg``. The fields are tab-separated; any whitespace is
accepted. Variants of the release are read as they are: set folders and txt files in
another case (``data/african/``, ``txts/african/african_pairs.txt``: :func:`rfw_files`
finds them), images as ``.png`` (or any extension of
:data:`facecast.datasets.folder.DEFAULT_EXTENSIONS`, in any case): a pair or a listed
image named ``<pid>_NNNN.jpg`` is the image on disk with that stem
(:func:`match_disk_extensions`).

``_lmk.txt`` columns: the image path (its last two components are ``<pid>/<file>``), an
integer label (the person's label of ``_images.txt``), then the five points as ten pixel
coordinates of the loose crop, x before y, in insightface's order (left eye, right eye,
nose, left mouth corner, right mouth corner, as seen in the image). Source: public code
that reads the release - FaceX-Zoo ``test_protocol/lfw/face_cropper/crop_rfw_by_arcface.py``
(JDAI-CV/FaceX-Zoo: skips field 1, takes fields 2..11 as the ten coordinates it aligns to
the ArcFace template) and bob.bio.face ``bob/bio/face/database/rfw.py`` (bioidiap: eye
coordinates are fields 2, 3 (x, y of the first eye) and 4, 5 (the second)). The RFW site
(whdeng.cn/RFW) distributes the file without a column description.

Manifest rows (:func:`read_rfw`): every image file under ``data/<Set>/`` and every image
``_images.txt`` lists (a listed image that is not on disk gets status ``missing``), path
``data/<Set>/<pid>/<file>`` (the folder as on disk), identity ``<Set>/<pid>`` (RFW's
person ids are unique within a set only: a few people appear in two sets, and a bare id
would merge them, so a per-identity vote would move their images to one set), label
``label_rfw_set`` (the set's name as RFW spells it). Where the set has a
``_lmk.txt`` its five points become the manifest's ``given_landmarks`` (the faces stage
aligns with them, no detector: status ``landmarks_given``); an image the file has no
readable line for has no landmarks. A line of ``_images.txt`` or ``_lmk.txt`` that cannot
be read is logged and counted, never guessed.

Pairs (:func:`read_rfw_pairs`): one row per line of ``_pairs.txt``, in file order, with
``line``, ``label`` (1 for ``pid n1 n2``, 0 for ``pid1 n1 pid2 n2``) and a status; a line
that is neither gets status ``malformed`` (label -1, no images) and a message naming file
and line, so it is counted among the skipped pairs, never dropped.

Folds (:func:`fold_structure`): insightface takes 10 equal consecutive blocks of the file
(:func:`facecast.evaluate.metrics.default_folds`), and so does facecast. RFW's file holds
exactly that: 10 blocks, each ``k`` genuine lines then ``k`` impostor lines (k = 300). A
file that differs (5,999 lines, a re-sorted file, a block not half genuine) keeps the same
folds, and the structure found is said in the plan, the protocol's fold note and the table.

The insightface ``.bin`` form (``African_test.bin`` ...: :func:`read_rfw_bins`): each file's
images via :func:`facecast.datasets.insightface_bin.read_insightface_bin` (locators
``<bin name>#<i>``), identities ``<Set>/<placeholder>`` (the set named, as above), the same
label.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.datasets.folder import DEFAULT_EXTENSIONS
from facecast.datasets.manifest import DatasetError

log = logging.getLogger(__name__)

#: the manifest label of an image's set
SET_LABEL = "label_rfw_set"
#: status of a pairs line that is not ``pid n1 n2`` nor ``pid1 n1 pid2 n2``
MALFORMED = "malformed"
#: RFW's folds: insightface's ten consecutive blocks
RFW_FOLDS = 10
#: where a protocol's fold note states the pairs file's structure (:func:`fold_structure`)
STRUCTURE_MARK = "pairs file structure: "


def _child(folder: Path, name: str) -> Path:
    """``folder / name``, or the one entry of ``folder`` whose name is ``name`` in another
    case (``african`` for ``African``); ``folder / name`` when there is none or several."""
    exact = folder / name
    if exact.exists() or not folder.is_dir():
        return exact
    hits = [p for p in folder.iterdir() if p.name.lower() == name.lower()]
    return hits[0] if len(hits) == 1 else exact


def rfw_files(root: str | os.PathLike, set_name: str) -> dict[str, Path]:
    """The files of set ``set_name`` under the release ``root``: ``images_dir``, ``pairs``,
    ``images``, ``people``, ``lmk`` - each as on disk where only its case differs."""
    root = Path(root)
    txt = _child(root / "txts", set_name)
    out = {"images_dir": _child(root / "data", set_name)}
    for key in ("pairs", "images", "people", "lmk"):
        out[key] = _child(txt, f"{set_name}_{key}.txt")
    return out


def image_path(folder: str, pid: str, number: int) -> str:
    """``data/<folder>/<pid>/<pid>_<number:04d>.jpg`` (relative to the release root;
    ``folder`` the set's image folder as on disk)."""
    return f"data/{folder}/{pid}/{pid}_{number:04d}.jpg"


def _stem(path: str) -> str:
    """``path`` without an image extension of any case (``a/b_0001.PNG`` -> ``a/b_0001``)."""
    head, dot, ext = path.rpartition(".")
    return head if dot and f".{ext.lower()}" in DEFAULT_EXTENSIONS else path


def match_disk_extensions(paths: pd.Series | list[str], known: pd.Index | list[str]
                          ) -> np.ndarray:
    """``paths`` with each one that is not in ``known`` replaced by the path of ``known``
    with the same stem (``<pid>_0001.jpg`` -> ``<pid>_0001.png``); unchanged when there is
    none or several."""
    paths = pd.Series(paths, dtype=object).astype(str)
    known = pd.Index(known).astype(str)
    out = paths.to_numpy(dtype=object).copy()
    miss = ~paths.isin(known).to_numpy()
    if miss.any():
        stems = pd.Series(known, index=known.map(_stem))
        stems = stems[~stems.index.duplicated(keep=False)]
        alt = paths[miss].map(_stem).map(stems)
        out[miss] = np.where(alt.notna(), alt, paths[miss]).astype(object)
    return out.astype(str)


def _lines(path: Path) -> list[tuple[int, str]]:
    """``(1-based line number, text)`` of the non-blank lines of ``path``."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def _disk_images(folder: Path) -> list[tuple[str, str]]:
    """``(path, pid)`` of every image file in ``data/<Set>/<pid>/`` (any extension case),
    sorted."""
    out = []
    if not folder.is_dir():
        return out
    for person in sorted(p for p in folder.iterdir() if p.is_dir()):
        for f in sorted(person.iterdir()):
            if f.name.lower().endswith(DEFAULT_EXTENSIONS):
                out.append((f"data/{folder.name}/{person.name}/{f.name}", person.name))
    return out


def _listed_images(path: Path, folder: str, bad: list[str]) -> list[tuple[str, str]]:
    """``(path, pid)`` of every image ``_images.txt`` lists (``<pid>_NNNN.jpg <label>``)."""
    out = []
    if not path.is_file():
        return out
    for lineno, line in _lines(path):
        parts = line.split()
        name = parts[0] if parts else ""
        pid, sep, _ = name.rpartition("_")
        if len(parts) != 2 or not sep or not pid:
            bad.append(f"{path}:{lineno}: expected '<pid>_NNNN.jpg <label>', got {line!r}")
            continue
        out.append((f"data/{folder}/{pid}/{name}", pid))
    return out


def read_landmarks(path: Path, folder: str, bad: list[str]) -> dict[str, list[float]]:
    """``data/<Set>/<pid>/<file>`` -> the ten coordinates of its ``_lmk.txt`` line (module
    docstring); unreadable lines go to ``bad``."""
    out: dict[str, list[float]] = {}
    for lineno, line in _lines(path):
        parts = line.split()
        where = f"{path}:{lineno}"
        if len(parts) != 12:
            bad.append(f"{where}: expected '<path> <label> x1 y1 ... x5 y5' (12 fields), "
                       f"got {len(parts)}")
            continue
        tail = parts[0].replace("\\", "/").rstrip("/").split("/")[-2:]
        try:
            coords = [float(v) for v in parts[2:]]
        except ValueError:
            bad.append(f"{where}: a landmark coordinate is not a number: {line!r}")
            continue
        if len(tail) != 2 or not np.isfinite(coords).all():
            bad.append(f"{where}: no '<pid>/<file>' path or a non-finite coordinate")
            continue
        out[f"data/{folder}/{tail[0]}/{tail[1]}"] = coords
    return out


def read_rfw(root: str | os.PathLike, sets: list[str]) -> pd.DataFrame:
    """Raw manifest rows of the RFW test release at ``root`` for ``sets`` (module
    docstring): ``path``, ``identity``, :data:`SET_LABEL` and, when some set has a
    ``_lmk.txt``, ``given_landmarks`` / ``given_score``."""
    root = Path(root)
    frames = []
    have_lmk = False
    for s in sets:
        files = rfw_files(root, s)
        if not files["pairs"].is_file():
            raise DatasetError(f"RFW set {s}: {files['pairs']} does not exist")
        bad: list[str] = []
        folder = files["images_dir"].name
        found = dict(_disk_images(files["images_dir"]))
        listed = _listed_images(files["images"], folder, bad)
        on_disk = match_disk_extensions([p for p, _ in listed], list(found))
        for path, (_, pid) in zip(on_disk, listed, strict=True):
            found.setdefault(path, pid)  # listed but not on disk: finalize says 'missing'
        lmk = read_landmarks(files["lmk"], folder, bad) if files["lmk"].is_file() else {}
        lmk = dict(zip(match_disk_extensions(list(lmk), list(found)), lmk.values(),
                       strict=True))
        have_lmk |= files["lmk"].is_file()
        for msg in bad[:5]:
            log.warning("RFW %s: %s", s, msg)
        if bad:
            log.warning("RFW %s: %d unreadable lines in its txt files (first ones above); "
                        "those lines are not used", s, len(bad))
        paths = sorted(found)
        frames.append(pd.DataFrame({
            "path": paths, "identity": [f"{s}/{found[p]}" for p in paths], SET_LABEL: s,
            "given_landmarks": [lmk.get(p) for p in paths]}))
        log.info("RFW %s: %d images (%d with landmarks)", s, len(paths),
                 sum(p in lmk for p in paths))
    if not frames or not sum(len(f) for f in frames):
        raise DatasetError(f"RFW release {root}: no image under data/<Set>/ for sets {sets}")
    raw = pd.concat(frames, ignore_index=True)
    if have_lmk:
        raw["given_score"] = np.float32(np.nan)
    else:
        raw = raw.drop(columns=["given_landmarks"])
    return raw


def read_rfw_pairs(path: str | os.PathLike, set_name: str, folder: str | None = None
                   ) -> pd.DataFrame:
    """Every line of a set's ``_pairs.txt`` in file order (module docstring): ``line``,
    ``path_a``, ``path_b`` (under ``data/<folder>/``, the set's image folder as on disk;
    ``set_name`` when None), ``identity_a``, ``identity_b`` (``<set_name>/<pid>``),
    ``label``, ``status``, ``message``."""
    path = Path(path)
    folder = folder or set_name
    if not path.is_file():
        raise DatasetError(f"RFW pairs file {path} does not exist")
    rows = []
    for lineno, line in _lines(path):
        parts = line.split()
        try:
            if len(parts) == 3:
                a = image_path(folder, parts[0], int(parts[1]))
                b = image_path(folder, parts[0], int(parts[2]))
                who = f"{set_name}/{parts[0]}"
                rows.append((lineno, a, b, who, who, 1, "ok", ""))
                continue
            if len(parts) == 4:
                a = image_path(folder, parts[0], int(parts[1]))
                b = image_path(folder, parts[2], int(parts[3]))
                rows.append((lineno, a, b, f"{set_name}/{parts[0]}",
                             f"{set_name}/{parts[2]}", 0, "ok", ""))
                continue
        except ValueError:
            pass
        rows.append((lineno, "", "", "", "", -1, MALFORMED,
                     f"{path.name}:{lineno}: expected 'pid n1 n2' or 'pid1 n1 pid2 n2' "
                     f"(n an image number), got {line.strip()!r}"))
    if not rows:
        raise DatasetError(f"{path}: no pairs")
    return pd.DataFrame(rows, columns=["line", "path_a", "path_b", "identity_a",
                                       "identity_b", "label", "status", "message"])


def _folds_list(folds: list[str], show: int = 5) -> str:
    """The first ``show`` items, then how many more."""
    more = len(folds) - show
    return ", ".join(folds[:show]) + (f" and {more} more" if more > 0 else "")


def fold_structure(labels: np.ndarray | list[int], n_folds: int = RFW_FOLDS
                   ) -> tuple[bool, str]:
    """Whether a pairs file's labels (1 genuine, 0 impostor, -1 malformed; file order) are
    in RFW's layout - ``n_folds`` equal consecutive blocks, each ``k`` genuine lines then
    ``k`` impostor lines - and one sentence saying the structure found (module
    docstring). Fold ``f`` is the ``f``-th block, as insightface cuts it."""
    y = np.asarray(labels, dtype=np.int64)
    n = len(y)
    sizes = np.full(n_folds, n // n_folds)
    sizes[: n % n_folds] += 1
    starts = np.r_[0, np.cumsum(sizes)]
    problems = []
    if n % n_folds or not n:
        problems.append(f"{n:,} lines do not split into {n_folds} equal blocks")
    uneven, unordered = [], []
    for f in range(n_folds):
        block = y[starts[f]:starts[f + 1]]
        g, i = int((block == 1).sum()), int((block == 0).sum())
        if g != i:
            uneven.append(f"fold {f} ({g} genuine, {i} impostor)")
        if (np.diff(block[block >= 0]) > 0).any():
            unordered.append(str(f))
    valid = y[y >= 0]
    if uneven and valid.any() and not valid.all() and not (np.diff(valid) > 0).any():
        problems.append("every genuine line comes before every impostor line (a file sorted "
                        f"by label?), so blocks are not half genuine: {_folds_list(uneven)}")
    elif uneven:
        problems.append("blocks not half genuine: " + _folds_list(uneven))
    if unordered:
        problems.append("blocks whose genuine lines do not all come before their impostor "
                        f"lines (a re-sorted file?): folds {_folds_list(unordered, 10)}")
    if (y < 0).any():
        problems.append(f"{int((y < 0).sum())} malformed line(s)")
    if not problems:
        k = int(sizes[0]) // 2
        return True, (f"RFW's layout: {n_folds} consecutive blocks of {2 * k:,} lines, each "
                      f"{k:,} genuine then {k:,} impostor lines")
    cut = (f"{n_folds} blocks of {int(sizes[0]):,} lines" if not n % n_folds else
           f"{n % n_folds} blocks of {int(sizes[0]):,} lines, then {n_folds - n % n_folds} "
           f"of {int(sizes[-1]):,}")
    return False, (f"not RFW's layout ({'; '.join(problems)}): {n:,} lines, "
                   f"{int((y == 1).sum()):,} genuine and {int((y == 0).sum()):,} impostor; "
                   f"the folds stay insightface's consecutive blocks ({cut})")


def read_rfw_bins(bins: Mapping[str, str | os.PathLike]) -> pd.DataFrame:
    """Raw manifest rows of RFW as insightface ``.bin`` files, one per set (module
    docstring)."""
    from facecast.datasets.insightface_bin import read_insightface_bin

    frames = []
    for s, path in bins.items():
        raw = read_insightface_bin(path)
        raw["identity"] = f"{s}/" + raw["identity"].astype(str)
        raw[SET_LABEL] = str(s)
        frames.append(raw)
    if not frames:
        raise DatasetError("RFW as .bin files: no file given (datasets.<ds>.bins)")
    return pd.concat(frames, ignore_index=True)
