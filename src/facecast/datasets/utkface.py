"""UTKFace (Zhang, Song and Qi, CVPR 2017): the labels are in the file names.

``root`` holds the images (``UTKFace/`` of the aligned-and-cropped release, or the
in-the-wild ``part1/`` ... folders; images are found in sub-folders too). Each name is
``[age]_[gender]_[race]_[date&time].jpg`` (the aligned release adds ``.chip.jpg``):
age an integer 0-116, gender 0 (male) or 1 (female), race 0-4 = White, Black, Asian,
Indian, Others ("like Hispanic, Latino, Middle Eastern"), date&time digits
(``yyyymmddHHMMSSFFF``; checked to be digits; with the labels it names the photo).

Rows: ``path`` relative to the root, ``identity`` = the path (UTKFace has no identities:
each image stands alone and nothing verifies it), ``label_age`` (years), ``label_age_bin``
(FairFace's bin of that age, :func:`facecast.datasets.fairface.age_bin`, so both
benchmarks share age groups), ``label_male`` (1.0 / 0.0), ``label_gender`` (``Male`` /
``Female``, FairFace's spelling) and ``label_race`` (the name). A name without the four
fields gets status ``bad_name`` (the release has a few, e.g. ``61_1_20170109142408075
.jpg.chip.jpg`` without a race); a field outside its range gets ``bad_label``; the message
says which. UTKFace is often downloaded as several overlapping folders (``UTKFace/``,
``crop_part1/``, ``part1/`` ... ``part3/``): the same photo (the same labels and date&time
stamp, :func:`photo_key`) counts once - the first copy in path order is kept, every other
gets status ``duplicate`` with the kept path in its message. Every image is kept as a row.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import PurePosixPath

import numpy as np
import pandas as pd

from facecast.datasets.fairface import age_bin
from facecast.datasets.folder import read_folder

UTK_RACES = ("White", "Black", "Asian", "Indian", "Others")
UTK_GENDERS = ("Male", "Female")
#: FairFace's seven races onto UTKFace's five (its README: Others "like Hispanic, Latino,
#: Middle Eastern"), to score a seven-class estimator on UTKFace
RACE_FROM_FAIRFACE = {"White": "White", "Black": "Black", "East Asian": "Asian",
                      "Southeast Asian": "Asian", "Indian": "Indian",
                      "Latino_Hispanic": "Others", "Middle Eastern": "Others"}
MAX_AGE = 116
#: the four fields, then .jpg (and the aligned release's .chip.jpg)
NAME = re.compile(r"^(?P<age>[^_]*)_(?P<gender>[^_]*)_(?P<race>[^_]*)_(?P<date>[^_.]*)"
                  r"\.jpg(?:\.chip\.jpg)?$", re.IGNORECASE)
LABEL_COLUMNS = ("label_age", "label_age_bin", "label_gender", "label_male", "label_race")
_FORM = "[age]_[gender]_[race]_[date&time].jpg"


def parse_name(name: str) -> tuple[str, str, tuple[int, int, int] | None]:
    """``(status, message, (age, gender, race))`` of one file name (base name)."""
    m = NAME.match(name)
    if m is None:
        return "bad_name", f"file name {name!r} is not {_FORM}", None
    fields = m.groupdict()
    not_int = [k for k in ("age", "gender", "race", "date") if not fields[k].isdigit()]
    if not_int:
        return ("bad_name", f"file name {name!r} is not {_FORM}: "
                f"{', '.join(f'{k} {fields[k]!r}' for k in not_int)} not a whole number", None)
    age, gender, race = int(fields["age"]), int(fields["gender"]), int(fields["race"])
    problems = []
    if age > MAX_AGE:
        problems.append(f"age {age} is outside UTKFace's 0-{MAX_AGE}")
    if gender not in (0, 1):
        problems.append(f"gender {gender} is not 0 (male) or 1 (female)")
    if not 0 <= race < len(UTK_RACES):
        problems.append(f"race {race} is not 0-4 ({', '.join(UTK_RACES)})")
    if problems:
        return "bad_label", f"{name}: " + "; ".join(problems), None
    return "ok", "", (age, gender, race)


def photo_key(name: str) -> str:
    """The photo a well-formed file name shows: its labels and date&time stamp
    (``25_0_2_20170116174525125``), the same in every folder of the release."""
    m = NAME.match(name)
    if m is None:
        raise ValueError(f"file name {name!r} is not {_FORM}")
    return "_".join(str(int(m[k])) for k in ("age", "gender", "race")) + f"_{m['date']}"


def read_utkface(root: str | os.PathLike, extensions: Iterable[str] | None = None
                 ) -> pd.DataFrame:
    """Raw manifest rows of a UTKFace folder (sorted by path; see the module docstring).

    The walk is :func:`facecast.datasets.folder.read_folder`'s (symlinks, unreadable
    entries and undecodable names get their statuses there); images directly in the
    root are what UTKFace ships, so they are not ``no_identity`` here.
    """
    rows = read_folder(root, extensions)
    status = rows["status"].to_numpy(dtype=object)
    message = rows["message"].to_numpy(dtype=object)
    loose = status == "no_identity"
    status[loose], message[loose] = "ok", ""
    n = len(rows)
    age, male, race = np.full(n, np.nan), np.full(n, np.nan), np.full(n, None, dtype=object)
    kept: dict[str, str] = {}
    for i, path in enumerate(rows["path"].tolist()):
        if status[i] != "ok":
            continue
        name = PurePosixPath(path).name
        st, msg, parsed = parse_name(name)
        if parsed is None:
            status[i], message[i] = st, msg
            continue
        key = photo_key(name)
        if key in kept:
            status[i] = "duplicate"
            message[i] = (f"{path}: the same photo as {kept[key]} (labels and date&time "
                          f"{key}); that copy is kept")
            continue
        kept[key] = path
        age[i], male[i], race[i] = parsed[0], 1.0 - parsed[1], UTK_RACES[parsed[2]]
    gender = np.where(male == 1.0, "Male", np.where(male == 0.0, "Female", None)).astype(object)
    return pd.DataFrame({
        "path": rows["path"].to_numpy(dtype=object),
        "identity": rows["path"].to_numpy(dtype=object),
        "status": status, "message": message,
        "label_age": age, "label_age_bin": age_bin(age), "label_gender": gender,
        "label_male": male, "label_race": race,
    })
