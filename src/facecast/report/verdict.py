"""The opening sentences of a report page (issues #47 item 8 and #50 item 4): helpers the
stages' ``verdict`` modules share to write figures with their intervals, and to put the
sentences under the page's title.

A page's verdict is generated from its own tables, never written by hand: a figure the
table lacks reads ``n/a (reason)``, an interval it lacks ``no interval``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["PARAGRAPH", "VERDICT_HEAD", "interval_text", "num", "verdict_markdown", "with_verdict"]

#: The words that introduce a verdict paragraph.
VERDICT_HEAD = "**In short** (generated from this page's tables):"
#: The most characters a verdict paragraph takes before the next sentence starts another.
PARAGRAPH = 700


def num(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits (``n/a`` when not finite)."""
    v = float(value)
    return f"{v:.{digits}g}" if math.isfinite(v) else "n/a"


def _finite(x: object) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def interval_text(value: float | str | None, lo: float | str | None = None,
                  hi: float | str | None = None, confidence: float = 0.95,
                  digits: int = 3) -> str:
    """``0.979, 95 % CI 0.951 to 0.992``; ``0.979, no interval`` when the table has no
    finite interval; ``n/a`` when the value is not a finite number (the value itself when
    it is an ``n/a (...)`` note)."""
    if not _finite(value):
        return str(value) if isinstance(value, str) and value.startswith("n/a") else "n/a"
    v = num(float(value), digits)
    if not (_finite(lo) and _finite(hi)):
        return f"{v}, no interval"
    return (f"{v}, {confidence * 100:g} % CI {num(float(lo), digits)} to "
            f"{num(float(hi), digits)}")


def verdict_markdown(sentences: Sequence[str], width: int = PARAGRAPH) -> str:
    """The verdict as Markdown: ``**In short** ...: s1 s2 ...``, a new paragraph whenever
    the next sentence would take one past ``width`` characters, then a blank line; empty
    when there is nothing to say."""
    paragraphs = [VERDICT_HEAD]
    for s in (s.strip() for s in sentences):
        if len(paragraphs[-1]) + 1 + len(s) > width and paragraphs[-1] != VERDICT_HEAD:
            paragraphs.append(s)
        else:
            paragraphs[-1] += " " + s
    return "\n\n".join(paragraphs) + "\n" if sentences else ""


def with_verdict(markdown: str, sentences: Sequence[str]) -> str:
    """``markdown`` with the verdict paragraph right under its first ``# `` heading (at
    its top without one)."""
    block = verdict_markdown(sentences)
    if not block:
        return markdown
    lines = markdown.split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
    return "\n".join([*lines[:at], *([""] if at else []), block, *lines[at:]])
