"""Paths in whitespace-separated pair lists (CAST ``.list``, LFW ``pairs.txt``).

Both formats split a line on whitespace, so a path holding a space, tab, newline or
carriage return cannot be written as it is. facecast's rule: such characters, and ``%``
itself, are percent-encoded (``%20``, ``%09``, ``%0A``, ``%0D``, ``%25``) on export, and
the importers decode them. A path without those characters is written unchanged, so
ordinary exports stay byte-identical to CAST's layout.
"""

from __future__ import annotations

import re

_ENCODE = {"%": "%25", " ": "%20", "\t": "%09", "\n": "%0A", "\r": "%0D"}
_DECODE = {v: k for k, v in _ENCODE.items()}
_NEEDS = re.compile(r"[% \t\n\r]")
_CODE = re.compile(r"%(?:25|20|09|0A|0D)", re.IGNORECASE)


def escape_list_path(path: str) -> str:
    """``path`` with ``%``, space, tab, newline and CR percent-encoded (else unchanged)."""
    if not _NEEDS.search(path):
        return path
    return "".join(_ENCODE.get(ch, ch) for ch in path)


def unescape_list_path(token: str) -> str:
    """Reverse :func:`escape_list_path` (other ``%`` sequences are left as they are)."""
    if "%" not in token:
        return token
    return _CODE.sub(lambda m: _DECODE[m.group(0).upper()], token)
