"""The one Markdown renderer of facecast: the subset its reports write, as HTML.

Blocks: ATX headings (``#``..``######``), paragraphs, bullet lists (``-``, ``*``, ``+``)
and ordered lists (``1.``, ``1)``) nested by indentation, with continuation lines, fenced
code (```` ``` ````), pipe tables (header, separator, rows) and thematic breaks (``---``).
Inline: code spans, links ``[text](url)``, ``**strong**``, ``*emphasis*`` / ``_emphasis_``
(an underscore inside a word, as in ``label_glasses``, stays an underscore), images
``![alt](file)``. Given ``base`` (the folder the Markdown's image paths are relative to),
:func:`markdown_html` embeds each image found there as a ``data:`` URI, so the page shows
its figures opened as a file, offline, moved or inside ``snakemake --report``; an image
not (yet) there, or over :data:`EMBED_LIMIT` bytes, is linked relatively to ``page``
(the HTML file's folder, default ``base``).

Rules follow CommonMark where the subset meets it: a bullet item may interrupt a
paragraph, an ordered item only when it starts at 1; an item's content is the lines
indented at least to its text; a blank line between items makes the list loose (items
in ``<p>``). Everything is escaped (raw HTML in the text is shown, never interpreted); a
link whose target has a scheme other than http(s) or mailto is rendered as its text.
The output is deterministic.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EMBED_LIMIT", "embed_images", "markdown_html", "inline_html", "table_head"]

#: The largest image (bytes) embedded in a page; a larger one is linked beside it.
EMBED_LIMIT = 3_000_000
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
         ".svg": "image/svg+xml", ".gif": "image/gif", ".webp": "image/webp"}
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^()\s]+)\)")
_IMG_TAG = re.compile(r'<img src="([^"]*)" alt="')
_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_ITEM = re.compile(r"^( *)([-*+]|\d{1,9}[.)])( +|$)(.*)$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_INLINE = re.compile(r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
                     r"|\[(?P<text>[^\]]+)\]\((?P<url>(?:[^()\s]|\([^()\s]*\))+)\)")
# the shortest span first (``??``): ``**p** and **q**`` is two strong words, not one
_STRONG = re.compile(r"\*\*(\S(?:.*?\S)??)\*\*|(?<!\w)__(\S(?:.*?\S)??)__(?!\w)")
_EMPH = re.compile(r"\*(\S(?:[^*]*?\S)??)\*|(?<!\w)_(\S(?:[^_]*?\S)??)_(?!\w)")
_SAFE_URL = re.compile(r"^(https?://|mailto:|[^:]*$)", re.I)


@dataclass(frozen=True)
class _Block:
    kind: str  # "p", "list" or "other"
    html: str


def _emphasis(escaped: str) -> str:
    out = _STRONG.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _EMPH.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", out)


def _token(m: re.Match) -> str:
    if m.group("code") is not None:
        return f"<code>{html.escape(m.group('code').strip(), quote=False)}</code>"
    text, url = _emphasis(html.escape(m.group("text"), quote=False)), m.group("url")
    return f'<a href="{html.escape(url)}">{text}</a>' if _SAFE_URL.match(url) else text


def _text_html(text: str) -> str:
    """Escaped text with code spans, links and emphasis (no images)."""
    parts, last = [], 0
    for m in _INLINE.finditer(text):
        parts.append(_emphasis(html.escape(text[last:m.start()], quote=False)))
        parts.append(_token(m))
        last = m.end()
    parts.append(_emphasis(html.escape(text[last:], quote=False)))
    return "".join(parts)


def _image(m: re.Match) -> str:
    url = m.group(2)
    if not _SAFE_URL.match(url):
        return html.escape(m.group(1), quote=False)
    return f'<img src="{html.escape(url)}" alt="{html.escape(m.group(1))}">'


def inline_html(text: str) -> str:
    """One line of Markdown text as escaped HTML with code spans, links, emphasis and
    images (``<img>`` whose ``src`` is the path as written)."""
    parts, last = [], 0
    for m in _IMAGE.finditer(text):
        parts.append(_text_html(text[last:m.start()]))
        parts.append(_image(m))
        last = m.end()
    parts.append(_text_html(text[last:]))
    return "".join(parts)


def _image_src(src: str, base: Path, page: Path) -> str:
    """``src`` (relative to ``base``) as a ``data:`` URI, or relative to ``page``."""
    url = html.unescape(src)
    if re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I) or url.startswith("/"):
        return src  # an absolute URL stays as written
    path = base / url
    mime = _MIME.get(path.suffix.lower())
    if mime and path.is_file() and path.stat().st_size <= EMBED_LIMIT:
        return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
    return html.escape(Path(os.path.relpath(path, page)).as_posix())


def embed_images(body: str, base: str | os.PathLike, page: str | os.PathLike | None = None
                 ) -> str:
    """Rewrite every ``<img src>`` of rendered ``body`` (paths relative to ``base``): an
    image file there becomes a ``data:`` URI, any other is linked relative to ``page``."""
    b = Path(base)
    p = Path(page) if page is not None else b
    return _IMG_TAG.sub(lambda m: f'<img src="{_image_src(m.group(1), b, p)}" alt="', body)


def _split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _item(line: str) -> tuple[int, str, int, str] | None:
    """(indent, marker, content indent, text) of a list item line, or None."""
    m = _ITEM.match(line.expandtabs(4))
    if m is None or _RULE.match(line):
        return None
    spaces = len(m.group(3)) if m.group(4) else 1
    spaces = 1 if spaces > 4 else spaces
    return len(m.group(1)), m.group(2), len(m.group(1)) + len(m.group(2)) + spaces, m.group(4)


def _same_list(a: str, b: str) -> bool:
    if a[-1].isdigit() or b[-1].isdigit():
        return False
    if a[0].isdigit() and b[0].isdigit():
        return a[-1] == b[-1]
    return a == b


def _is_table(lines: list[str], i: int) -> bool:
    return (lines[i].strip().startswith("|") and i + 1 < len(lines)
            and _SEPARATOR.match(lines[i + 1].strip()) is not None)


def _interrupts(lines: list[str], i: int) -> bool:
    """Whether line ``i`` ends a running paragraph (starts another block)."""
    line = lines[i]
    if (not line.strip() or _HEADING.match(line) or _FENCE.match(line) or _RULE.match(line)
            or _is_table(lines, i)):
        return True
    item = _item(line)
    if item is None or not item[3].strip():
        return False
    return not item[1][0].isdigit() or int(item[1][:-1]) == 1


def _table(lines: list[str], i: int) -> tuple[_Block, int]:
    header = _split_row(lines[i])
    rows, i = [], i + 2
    while i < len(lines) and lines[i].strip().startswith("|"):
        rows.append(_split_row(lines[i]))
        i += 1
    head = "".join(f"<th>{inline_html(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return _Block("other", f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
                  "</table>"), i


def _fence(lines: list[str], i: int) -> tuple[_Block, int]:
    opener = _FENCE.match(lines[i]).group(1)
    code, i = [], i + 1
    while i < len(lines) and not lines[i].lstrip().startswith(opener):
        code.append(lines[i])
        i += 1
    text = html.escape("\n".join(code), quote=False)
    return _Block("other", f"<pre><code>{text}</code></pre>"), i + 1


def _item_lines(lines: list[str], i: int, marker: str, content: int
                ) -> tuple[list[str], int, bool]:
    """The lines of one list item from line ``i`` (its first line already taken), the index
    after it, and whether a blank line separates it from a following sibling."""
    body, blank = [], False
    while i < len(lines):
        line = lines[i].expandtabs(4)
        if not line.strip():
            body.append("")
            blank = True
            i += 1
            continue
        if _indent(line) >= content:
            body.append(line[content:])
            blank = False
        elif blank or _item(line) is not None or _interrupts(lines, i):
            break
        else:  # a lazy continuation of the item's last paragraph
            body.append(line.strip())
        i += 1
    trailing = 0
    while body and not body[-1]:
        body.pop()
        trailing += 1
    nxt = _item(lines[i]) if i < len(lines) else None
    loose = bool(trailing) and nxt is not None and _same_list(nxt[1], marker)
    return body, i, loose


def _list(lines: list[str], i: int) -> tuple[_Block, int]:
    indent, marker, content, first = _item(lines[i])
    items, loose = [], False
    while i < len(lines):
        found = _item(lines[i])
        if found is None or not _same_list(found[1], marker) or found[0] >= content:
            break
        _, _, content, first = found
        body, i, gap = _item_lines(lines, i + 1, marker, content)
        blocks = _blocks([first, *body])
        loose = loose or gap or "" in body
        items.append(blocks)
    tag = "ol" if marker[0].isdigit() else "ul"
    start = int(marker[:-1]) if tag == "ol" else 1
    rendered = []
    for blocks in items:
        parts = [b.html if loose or b.kind != "p" else b.html[3:-4] for b in blocks]
        rendered.append("<li>" + "\n".join(parts) + "</li>")
    attr = f' start="{start}"' if start != 1 else ""
    return _Block("list", f"<{tag}{attr}>\n" + "\n".join(rendered) + f"\n</{tag}>"), i


def _blocks(lines: list[str]) -> list[_Block]:
    out: list[_Block] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            i += 1
        elif _FENCE.match(line):
            block, i = _fence(lines, i)
            out.append(block)
        elif (m := _HEADING.match(line)) is not None:
            level = len(m.group(1))
            out.append(_Block("other", f"<h{level}>{inline_html(m.group(2))}</h{level}>"))
            i += 1
        elif _RULE.match(line):
            out.append(_Block("other", "<hr>"))
            i += 1
        elif _is_table(lines, i):
            block, i = _table(lines, i)
            out.append(block)
        elif _item(line) is not None:
            block, i = _list(lines, i)
            out.append(block)
        else:
            para = [line.strip()]
            i += 1
            while i < len(lines) and not _interrupts(lines, i):
                para.append(lines[i].strip())
                i += 1
            out.append(_Block("p", "<p>" + inline_html(" ".join(para)) + "</p>"))
    return out


def markdown_html(text: str, *, base: str | os.PathLike | None = None,
                  page: str | os.PathLike | None = None) -> str:
    """The subset of Markdown facecast writes (module docstring), as HTML body elements.

    ``base``: the folder image paths are relative to (their files are embedded, see
    :func:`embed_images`); ``page``: the folder the page is written to (default ``base``).
    Without ``base`` an image's ``src`` is the path as written."""
    out = "\n".join(b.html for b in _blocks(text.splitlines()))
    return out if base is None else embed_images(out, base, page)


def table_head(title: str, prose: str, columns: Sequence[str]) -> list[str]:
    """The first lines of a one-table Markdown page: ``# title``, a paragraph, and the
    header and rule rows of a table whose first column is ``model``, then ``columns``."""
    return [f"# {title}", "", prose, "", "| model | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns)]
