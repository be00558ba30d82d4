"""Every HTML page the session demo run writes reads as a person reads it (issue 41.7),
shows its figures wherever it is opened and links the glossary (issues 47.8, 50.4).

Each page is parsed with Python's ``html.parser`` (no browser): its tags must nest and
close; no paragraph may hold what its source meant as list items (``- For dlib ...``
flattened into one ``<p>``) or Markdown left unrendered (a pipe table, a code fence); no
block of running text (``<p>``, ``<li>``, text straight in ``<body>``/``<div>``) may pass
:data:`MAX_TEXT` characters, and no list item :data:`MAX_ITEM` (one or two short
sentences; the full figures live in the tables). Each ``<img>`` must resolve relative to
the page's file (or be a ``data:`` URI of an image), no ``[figure: ...]`` placeholder may be
left, every page links the glossary at its foot (``#glossary``), and the fairness,
mitigation, slices, quality-bias and estimator pages open with their generated verdict.
"""

from __future__ import annotations

import base64
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
#: The leading bytes of the image formats a page may embed.
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF8", b"<svg", b"<?xml")
#: Pages that open with a generated verdict (issues 47.8, 50.4), under results/<ds>/, and
#: whether the demo run writes them (it has no attribute benchmark: no estimator report).
VERDICT_PAGES = {"fairness/*/*/report.html": True, "mitigation/*/*/report.html": True,
                 "slices/*/*/report.html": True, "quality/*/*/bias.html": True,
                 "labels/estimators.html": False}
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
        self.images: list[str] = []  # every <img> src
        self.links: list[str] = []  # every <a> href
        self.ids: list[str] = []  # every id attribute

    def handle_starttag(self, tag: str, attrs) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
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


def image_problems(src: str, page: Path) -> list[str]:
    """Why an ``<img src>`` of ``page`` would not show (empty when it shows): a ``data:``
    URI must decode to an image; any other source must be a file relative to the page."""
    if src.startswith("data:"):
        head, _, data = src.partition(",")
        try:
            raw = base64.b64decode(data, validate=True) if head.endswith(";base64") else b""
        except ValueError:
            raw = b""
        return [] if raw.startswith(IMAGE_MAGIC) else [f"data: URI is no image: {src[:60]!r}"]
    if re.match(r"^[a-z][a-z0-9+.-]*:|^/", src, re.I):
        return [f"image outside the page's folder: {src!r}"]
    return [] if (page.parent / src).is_file() else [f"image not found beside the page: {src!r}"]


def figure_problems(text: str, page: Path) -> list[str]:
    """Images that would not show, ``[figure:`` placeholders and a missing glossary."""
    parser = _Page()
    parser.feed(text)
    parser.close()
    problems = [p for src in parser.images for p in image_problems(src, page)]
    if "[figure:" in text:
        problems.append("a [figure: ...] placeholder instead of the figure")
    if "glossary" not in parser.ids or "#glossary" not in parser.links:
        problems.append("no glossary linked (#glossary)")
    return problems


def test_the_figure_checker_resolves_images_from_the_page(tmp_path):
    """An image shows as a data: URI of an image, or as a file beside the page (a moved
    folder keeps it); the glossary must be on the page and linked."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.png").write_bytes(b"\x89PNG\r\n\x1a\nrest")
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nrest").decode()
    ok = ('<p><a href="#glossary">g</a><img src="f.png" alt="a">'
          f'<img src="data:image/png;base64,{png}" alt="b"></p><section id="glossary"></section>')
    assert figure_problems(ok, tmp_path / "sub" / "p.html") == []
    assert figure_problems(ok, tmp_path / "p.html") == [
        "image not found beside the page: 'f.png'"]
    bad = ('<p>[figure: rates] <img src="data:image/png;base64,eHh4" alt="x">'
           '<img src="/abs/f.png" alt="y"></p>')
    assert figure_problems(bad, tmp_path / "p.html") == [
        "data: URI is no image: 'data:image/png;base64,eHh4'",
        "image outside the page's folder: '/abs/f.png'",
        "a [figure: ...] placeholder instead of the figure", "no glossary linked (#glossary)"]


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
    wall of text (issue 41.7); its images show relative to the page, no ``[figure:`` is
    left, it links the glossary, and the verdict pages open with their verdict (issues
    47.8, 50.4)."""
    work, _ = demo_run
    pages = sorted((Path(work) / "results").rglob("*.html"))
    assert len(pages) >= 20, f"the demo run wrote only {len(pages)} HTML pages"
    failures = {}
    for p in pages:
        text = p.read_text(encoding="utf-8")
        failures[str(p.relative_to(work))] = page_problems(text) + figure_problems(text, p)
    results = Path(work) / "results"
    for pattern, required in VERDICT_PAGES.items():
        found = sorted(results.glob(f"*/{pattern}"))
        assert found or not required, f"the demo run wrote no {pattern}"
        for p in found:
            if "<strong>In short</strong> (generated from this page" not in p.read_text():
                failures.setdefault(str(p.relative_to(work)), []).append("no verdict")
    failures = {k: v for k, v in failures.items() if v}
    assert not failures, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items())
