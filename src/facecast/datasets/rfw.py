"""RFW (Racial Faces in-the-Wild, Wang et al., ICCV 2019): the test release as a dataset.

Layout of the test release (``root``)::

    data/<Set>/<pid>/<pid>_NNNN.jpg        loosely cropped faces, one folder per person
    txts/<Set>/<Set>_pairs.txt             per fold 300 lines ``pid n1 n2`` (genuine) then
                                           300 lines ``pid1 n1 pid2 n2`` (impostor)
    txts/<Set>/<Set>_images.txt            ``<pid>_NNNN.jpg <label>`` per image
    txts/<Set>/<Set>_people.txt            ``<pid> <number of images>`` per person
    txts/<Set>/<Set>_lmk.txt               ``<path> <label> x1 y1 ... x5 y5`` per image

for the sets African, Asian, Caucasian, Indian. Image number ``n`` of person ``pid`` is
``<pid>_<n:04d>.jpg``. The fields are tab-separated; any whitespace is accepted.

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
``data/<Set>/<pid>/<file>``, identity ``pid``, label ``label_rfw_set``. Where the set has a
``_lmk.txt`` its five points become the manifest's ``given_landmarks`` (the faces stage
aligns with them, no detector: status ``landmarks_given``); an image the file has no
readable line for has no landmarks. A line of ``_images.txt`` or ``_lmk.txt`` that cannot
be read is logged and counted, never guessed.

Pairs (:func:`read_rfw_pairs`): one row per line of ``_pairs.txt``, in file order, with
``line``, ``label`` (1 for ``pid n1 n2``, 0 for ``pid1 n1 pid2 n2``) and a status; a line
that is neither gets status ``malformed`` (label -1, no images) and a message naming file
and line, so it is counted among the skipped pairs, never dropped.

The insightface ``.bin`` form (``African_test.bin`` ...: :func:`read_rfw_bins`): each file's
images via :func:`facecast.datasets.insightface_bin.read_insightface_bin` (locators
``<bin name>#<i>``), identities ``<Set>/<placeholder>``, the same label.
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


def rfw_files(root: str | os.PathLike, set_name: str) -> dict[str, Path]:
    """The files of set ``set_name`` under the release ``root``: ``images_dir``, ``pairs``,
    ``images``, ``people``, ``lmk``."""
    root = Path(root)
    txt = root / "txts" / set_name
    return {"images_dir": root / "data" / set_name,
            "pairs": txt / f"{set_name}_pairs.txt",
            "images": txt / f"{set_name}_images.txt",
            "people": txt / f"{set_name}_people.txt",
            "lmk": txt / f"{set_name}_lmk.txt"}


def image_path(set_name: str, pid: str, number: int) -> str:
    """``data/<Set>/<pid>/<pid>_<number:04d>.jpg`` (relative to the release root)."""
    return f"data/{set_name}/{pid}/{pid}_{number:04d}.jpg"


def _lines(path: Path) -> list[tuple[int, str]]:
    """``(1-based line number, text)`` of the non-blank lines of ``path``."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def _disk_images(folder: Path, set_name: str) -> list[tuple[str, str]]:
    """``(path, pid)`` of every image file in ``data/<Set>/<pid>/``, sorted."""
    out = []
    if not folder.is_dir():
        return out
    for person in sorted(p for p in folder.iterdir() if p.is_dir()):
        for f in sorted(person.iterdir()):
            if f.name.lower().endswith(DEFAULT_EXTENSIONS):
                out.append((f"data/{set_name}/{person.name}/{f.name}", person.name))
    return out


def _listed_images(path: Path, set_name: str, bad: list[str]) -> list[tuple[str, str]]:
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
        out.append((f"data/{set_name}/{pid}/{name}", pid))
    return out


def read_landmarks(path: Path, set_name: str, bad: list[str]) -> dict[str, list[float]]:
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
        out[f"data/{set_name}/{tail[0]}/{tail[1]}"] = coords
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
        found = dict(_disk_images(files["images_dir"], s))
        for path, pid in _listed_images(files["images"], s, bad):
            found.setdefault(path, pid)  # listed but not on disk: finalize says 'missing'
        lmk = read_landmarks(files["lmk"], s, bad) if files["lmk"].is_file() else {}
        have_lmk |= files["lmk"].is_file()
        for msg in bad[:5]:
            log.warning("RFW %s: %s", s, msg)
        if bad:
            log.warning("RFW %s: %d unreadable lines in its txt files (first ones above); "
                        "those lines are not used", s, len(bad))
        paths = sorted(found)
        frames.append(pd.DataFrame({
            "path": paths, "identity": [found[p] for p in paths], SET_LABEL: s,
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


def read_rfw_pairs(path: str | os.PathLike, set_name: str) -> pd.DataFrame:
    """Every line of a set's ``_pairs.txt`` in file order (module docstring): ``line``,
    ``path_a``, ``path_b``, ``identity_a``, ``identity_b``, ``label``, ``status``,
    ``message``."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"RFW pairs file {path} does not exist")
    rows = []
    for lineno, line in _lines(path):
        parts = line.split()
        try:
            if len(parts) == 3:
                a = image_path(set_name, parts[0], int(parts[1]))
                b = image_path(set_name, parts[0], int(parts[2]))
                rows.append((lineno, a, b, parts[0], parts[0], 1, "ok", ""))
                continue
            if len(parts) == 4:
                a = image_path(set_name, parts[0], int(parts[1]))
                b = image_path(set_name, parts[2], int(parts[3]))
                rows.append((lineno, a, b, parts[0], parts[2], 0, "ok", ""))
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
