"""Column selection by fnmatch patterns: the one rule of every config key that names
attribute columns by pattern (``slices.columns`` / ``slices.exclude``,
``quality.columns`` / ``quality.exclude_columns``, ``analysis.majority_columns``).

Patterns are case-sensitive shell patterns (:func:`fnmatch.fnmatchcase`: ``*``, ``?``,
``[seq]``). A pattern the config asks to *include* must match at least one column; a
pattern that only *excludes* may match none.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

__all__ = ["matches_any", "select_columns", "unmatched"]


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of ``patterns``."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def unmatched(available: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """The ``patterns`` that match none of ``available``, in their order."""
    names = list(available)
    return [p for p in patterns if not any(fnmatch.fnmatchcase(c, p) for c in names)]


def select_columns(available: Sequence[str], include: Iterable[str] = (),
                   exclude: Iterable[str] = (), *, key: str = "columns",
                   order: str = "table", show_available: bool = False) -> list[str]:
    """The columns of ``available`` matched by an ``include`` pattern (none given: every
    column), minus those an ``exclude`` pattern matches; no column twice.

    ``order``: ``table`` keeps the order of ``available``; ``patterns`` lists each
    include pattern's matches in turn. An include pattern that matches nothing raises
    ``KeyError`` naming ``key`` and the pattern (and the available columns when
    ``show_available``).
    """
    cols = list(available)
    wanted = [str(p) for p in include]
    drop = [str(p) for p in exclude]
    for pat in unmatched(cols, wanted):
        extra = f"; available: {sorted(cols)}" if show_available else ""
        raise KeyError(f"{key}: {pat!r} matches no attribute column{extra}")
    if not wanted:
        chosen = cols
    elif order == "patterns":
        chosen = [c for p in wanted for c in cols if fnmatch.fnmatchcase(c, p)]
    elif order == "table":
        chosen = [c for c in cols if matches_any(c, wanted)]
    else:
        raise ValueError(f"order must be 'table' or 'patterns', got {order!r}")
    return [c for c in dict.fromkeys(chosen) if not matches_any(c, drop)]
