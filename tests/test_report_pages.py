"""Every HTML page the session demo run writes reads as a person reads it (issue 41.7).

Each page is parsed with Python's ``html.parser`` (no browser): its tags must nest and
close; no paragraph may hold what its source meant as list items (``- For dlib ...``
flattened into one ``<p>``) or Markdown left unrendered (a pipe table, a code fence); no
block of running text (``<p>``, ``<li>``, text straight in ``<body>``/``<div>``) may pass
:data:`MAX_TEXT` characters, and no list item :data:`MAX_ITEM` (one or two short
sentences; the full figures live in the tables).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

#: The most characters one paragraph (or text straight in the body) may hold.
MAX_TEXT = 1500
#: The most characters one list item may hold: one or two short sentences.
MAX_ITEM = 300
#: Elements that need no end tag.
VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr"})
#: Elements whose end tag HTML lets one leave out (none of ours does, but a page may).
OPTIONAL_END = frozenset({"li", "p", "td", "th", "tr", "thead", "tbody", "option"})
#: Where running text is measured; other elements (tables, code, headings) are structure.
TEXT_BLOCKS = frozenset({"p", "li", "body", "div"})
#: Elements inside running text.
INLINE = frozenset({"a", "b", "i", "em", "strong", "code", "span", "sub", "sup", "small"})

#: A list marker at the start of a line or of the paragraph (``- x``, ``* x``, ``1. x``).
_MARKER_AT_LINE = re.compile(r"(?:^|\n)[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+\S")
#: A list marker right after a sentence or an introducing colon, as a flattened list reads
#: (``... effect. - For dlib on fair_pool, ...``).
_MARKER_IN_TEXT = re.compile(r"[.:;!?)]\s+(?:[-*+•]|\d{1,3}[.)])\s+[A-Za-z`(\"']")
_MARKER_AFTER_COLON = re.compile(r":\s+[-*+•]\s+[A-Za-z`(\"']")
_UNRENDERED = re.compile(r"\|\s*:?-{3,}|```|^#{1,6}\s", re.M)


class _Page(HTMLParser):
    """Collects the text of each text block and any nesting error."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.blocks: list[tuple[str, str]] = []  # (tag, text) of every closed text block
        self.text: list[list[str]] = []  # open text blocks' text, innermost last
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in VOID:
            return
        if tag == "p" and self.stack and self.stack[-1] == "p":
            self._close("p")  # an unclosed <p> before another <p>
        self.stack.append(tag)
        if tag in TEXT_BLOCKS:
            self.text.append([])

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag not in VOID:
            self.errors.append(f"<{tag}/> is not a void element")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if tag not in self.stack:
            self.errors.append(f"</{tag}> closes nothing (open: {self.stack})")
            return
        while self.stack[-1] != tag:
            if self.stack[-1] not in OPTIONAL_END:
                self.errors.append(f"</{tag}> closes <{self.stack[-1]}> (open: {self.stack})")
            self._close(self.stack[-1])
        self._close(tag)

    def _close(self, tag: str) -> None:
        self.stack.pop()
        if tag in TEXT_BLOCKS:
            self.blocks.append((tag, "".join(self.text.pop())))

    def handle_data(self, data: str) -> None:
        for tag in reversed(self.stack):  # the innermost block around the text
            if tag in TEXT_BLOCKS:
                self.text[-1].append(data)
                return
            if tag not in INLINE:
                return  # a table cell, heading, caption, code block, title ...

    def close(self) -> None:
        super().close()
        for tag in reversed(self.stack):
            if tag not in OPTIONAL_END and tag not in ("html", "body", "head"):
                self.errors.append(f"<{tag}> never closed")


def page_problems(text: str) -> list[str]:
    """What keeps a page from reading as a page (empty when it reads well)."""
    parser = _Page()
    parser.feed(text)
    parser.close()
    problems = list(parser.errors)
    for tag, block in parser.blocks:
        words = " ".join(block.split())
        head = words[:120]
        if tag == "p" and (_MARKER_AT_LINE.search(block)
                           or len(_MARKER_IN_TEXT.findall(block)) >= 2
                           or _MARKER_AFTER_COLON.search(block)):
            problems.append(f"list items flattened into a paragraph: {head!r}")
        if tag == "p" and _UNRENDERED.search(block):
            problems.append(f"Markdown left unrendered in a paragraph: {head!r}")
        limit = MAX_ITEM if tag == "li" else MAX_TEXT
        if len(words) > limit:
            problems.append(f"<{tag}> of {len(words)} characters (limit {limit}) without "
                            f"structure: {head!r}")
    return problems


def test_the_checker_fails_on_flattened_lists_and_walls_of_text():
    """The checker names the faults of issue 41.7 and passes a page that reads well."""
    flat = ("<p>Each method against raw. - For dlib on fair_pool, FSN lowers bias. "
            "- For lbp, FairCal does.</p>")
    assert any("flattened" in p for p in page_problems(flat))
    assert any("flattened" in p for p in page_problems("<p>- fairness: skipped</p>"))
    assert any("flattened" in p for p in page_problems("<p>Notes: - a was dropped</p>"))
    assert any("unrendered" in p for p in page_problems("<p>| a | b | |---|---|</p>"))
    wall = "<p>" + "A sentence of the wall. " * 80 + "</p>"
    assert any("without structure" in p for p in page_problems(wall))
    assert any("without structure" in p
               for p in page_problems("<ul><li>" + "long " * 200 + "</li></ul>"))
    assert any("closes" in p for p in page_problems("<ul><li>a</ul><p>b</div>"))
    good = ("<h1>T</h1><p>Differences are A - B: accuracy. Values -0.5 to 0.5.</p>"
            "<ul><li>For dlib on fair_pool, FSN lowers bias.</li><li>b</li></ul>"
            "<table><tr><td>x</td></tr></table><p><img src='a.png' alt='a'></p>")
    assert page_problems(good) == []


def test_every_demo_page_reads_as_a_page(demo_run):
    """Every .html the demo run writes parses cleanly and has no flattened list and no
    wall of text (issue 41.7)."""
    work, _ = demo_run
    pages = sorted((Path(work) / "results").rglob("*.html"))
    assert len(pages) >= 20, f"the demo run wrote only {len(pages)} HTML pages"
    failures = {str(p.relative_to(work)): page_problems(p.read_text(encoding="utf-8"))
                for p in pages}
    failures = {k: v for k, v in failures.items() if v}
    assert not failures, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items())
