"""An estimated race as a group: ``fairface_race`` from the FairFace head's seven
probabilities (issue 50, item 5).

The ``fairface`` scorer writes one probability per race of FairFace's seven
(``fairface_white`` ... ``fairface_middle_eastern``; Kärkkäinen and Joo, "FairFace: Face
Attribute Dataset for Balanced Race, Gender, and Age", WACV 2021). A protected or
legitimate attribute may name three derived columns, computed where the attribute rows are
read (:func:`add_race_columns`, called by
:func:`facecast.fairness.assess.load_attributes`), never stored:

- ``fairface_race``: the argmax of the seven, named as the scorer names them (``white``,
  ``black``, ``latino_hispanic``, ``east_asian``, ``southeast_asian``, ``indian``,
  ``middle_eastern``); missing when a probability is;
- ``fairface_race4``: the paper's four-race grouping (its ``race4`` model's classes):
  ``white``, ``black``, ``asian`` (East and Southeast Asian), ``indian``; Latino/Hispanic
  and Middle Eastern are in none of the four, so missing;
- ``fairface_race5``: UTKFace's five (``white``, ``black``, ``asian``, ``indian``,
  ``others`` = Latino/Hispanic and Middle Eastern), as
  :data:`facecast.datasets.utkface.RACE_FROM_FAIRFACE` collapses them.

Each is categorical: ``{column: fairface_race}`` makes its values the groups;
``values`` renames or merges them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.attributes.estimates import FAIRFACE_RACE_COLUMNS

__all__ = ["COLLAPSE", "RACES", "RACE_COLUMNS", "add_race_columns", "race_sources",
           "source_columns"]

#: FairFace's seven races as the scorer names its columns (facecast.attributes.heads,
#: read through facecast.attributes.estimates: one list of the head's classes)
RACES = tuple(c.removeprefix("fairface_") for c in FAIRFACE_RACE_COLUMNS)
#: the derived column -> how the seven collapse (None: as they are)
COLLAPSE: dict[str, dict[str, str] | None] = {
    "fairface_race": None,
    "fairface_race4": {"white": "white", "black": "black", "east_asian": "asian",
                       "southeast_asian": "asian", "indian": "indian"},
    "fairface_race5": {"white": "white", "black": "black", "east_asian": "asian",
                       "southeast_asian": "asian", "indian": "indian",
                       "latino_hispanic": "others", "middle_eastern": "others"},
}
RACE_COLUMNS = tuple(COLLAPSE)


def race_sources() -> list[str]:
    """The seven probability columns a derived race column is computed from."""
    return list(FAIRFACE_RACE_COLUMNS)


def source_columns(columns: Sequence[str]) -> list[str]:
    """``columns`` with every derived race column replaced by its seven sources (order
    kept, no duplicates)."""
    out: list[str] = []
    for c in columns:
        for s in (race_sources() if c in COLLAPSE else [c]):
            if s not in out:
                out.append(s)
    return out


def add_race_columns(attrs: pd.DataFrame, wanted: Sequence[str]) -> pd.DataFrame:
    """``attrs`` with each derived race column of ``wanted`` added (object dtype, None
    where a probability is missing or the grouping has no class for the argmax)."""
    wanted = [c for c in wanted if c in COLLAPSE and c not in attrs.columns]
    if not wanted:
        return attrs
    probs = attrs[race_sources()].to_numpy(dtype=np.float64)
    ok = np.isfinite(probs).all(axis=1)
    top = np.asarray(RACES, dtype=object)[np.argmax(np.where(ok[:, None], probs, 0.0), axis=1)]
    out = attrs.copy()
    for col in wanted:
        mapping = COLLAPSE[col]
        names = top if mapping is None else np.array([mapping.get(t) for t in top],
                                                     dtype=object)
        out[col] = np.where(ok, names, None)
    return out
