"""The one Markdown renderer (facecast.report.markdown): lists, code, links, emphasis,
tables and escaping, as the stages' report pages need them (issue 41.7)."""

from __future__ import annotations

import base64
from pathlib import Path

from test_report_pages import page_problems

from facecast.report import markdown
from facecast.report.glossary import GLOSSARY, glossary_html
from facecast.report.html_tables import GLOSSARY_LINK, html_page, write_markdown_html
from facecast.report.html_tables import markdown_html as twin
from facecast.report.markdown import inline_html, markdown_html


def test_bullets_after_a_paragraph_are_a_list_not_part_of_it():
    md = ("Each method against raw:\n- For dlib on fair_pool, FSN lowers bias.\n"
          "- For lbp, FairCal does.\n\nAfter the list.")
    assert markdown_html(md) == (
        "<p>Each method against raw:</p>\n<ul>\n<li>For dlib on fair_pool, FSN lowers bias.</li>"
        "\n<li>For lbp, FairCal does.</li>\n</ul>\n<p>After the list.</p>")
    assert twin is markdown_html  # html_tables renders through the same function


def test_nested_ordered_and_continued_items():
    md = ("1. first\n   more of first\n   - sub a\n   - sub b\n2. second\n\n"
          "* star\n+ plus starts another list\n\n3) three")
    out = markdown_html(md)
    assert out.startswith("<ol>\n<li>first more of first\n<ul>\n<li>sub a</li>\n"
                          "<li>sub b</li>\n</ul></li>\n<li>second</li>\n</ol>")
    assert "<ul>\n<li>star</li>\n</ul>\n<ul>\n<li>plus starts another list</li>\n</ul>" in out
    assert out.endswith('<ol start="3">\n<li>three</li>\n</ol>')


def test_loose_items_keep_their_paragraphs_and_lazy_lines_join_the_item():
    assert markdown_html("- a\n\n- b\n\n  more b") == (
        "<ul>\n<li><p>a</p></li>\n<li><p>b</p>\n<p>more b</p></li>\n</ul>")
    assert markdown_html("- a\nlazy line") == "<ul>\n<li>a lazy line</li>\n</ul>"


def test_what_is_not_a_list_stays_text():
    # an ordered item interrupts a paragraph only at 1; a dash needs a space; a rule
    assert markdown_html("in\n2019. The year") == "<p>in 2019. The year</p>"
    assert markdown_html("-0.5 lower; A - B") == "<p>-0.5 lower; A - B</p>"
    assert markdown_html("text\n\n---\n\n- - -") == "<p>text</p>\n<hr>\n<hr>"


def test_code_fences_headings_and_tables():
    md = ("## Set <b>\n\n```\n<x> & y\n- not an item\n```\n\n| a | b |\n|---|:---:|\n"
          "| 1 \\| 2 | `c_d` |\n![fig](f.png)")
    assert markdown_html(md) == (
        "<h2>Set &lt;b&gt;</h2>\n<pre><code>&lt;x&gt; &amp; y\n- not an item</code></pre>\n"
        "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1 | 2</td>"
        "<td><code>c_d</code></td></tr></tbody></table>\n"
        '<p><img src="f.png" alt="fig"></p>')


def test_inline_markup_is_escaped_and_safe():
    assert inline_html("**bold** *em* _em_ label_glasses 2 * 3 `<a>`") == (
        "<strong>bold</strong> <em>em</em> <em>em</em> label_glasses 2 * 3 "
        "<code>&lt;a&gt;</code>")
    assert inline_html("[doc](https://x.org/a_(b)?q=1&r=2) <script>") == (
        '<a href="https://x.org/a_(b)?q=1&amp;r=2">doc</a> &lt;script&gt;')
    # one-letter spans close at their own markers (the estimator page's column list)
    assert inline_html("**p** the group (**p_mae**). *q* and _r_") == (
        "<strong>p</strong> the group (<strong>p_mae</strong>). <em>q</em> and <em>r</em>")
    # a scheme other than http(s)/mailto never becomes a link
    assert inline_html("[x](javascript:alert(1))") == "x"
    assert inline_html('[x](a.html"onclick=y)') == '<a href="a.html&quot;onclick=y">x</a>'


PNG = b"\x89PNG\r\n\x1a\nfacecast"


def test_images_are_embedded_from_base_or_linked_relative_to_the_page(tmp_path, monkeypatch):
    """Issue 47.8: a figure the Markdown names is in the page (a data: URI) when its file
    exists, else linked relative to where the page is written; never ``[figure: ...]``."""
    (tmp_path / "f.png").write_bytes(PNG)
    (tmp_path / "html").mkdir()
    md = "![rates <1>](f.png) ![late](late.png) ![web](https://x.org/a.png) ![js](javascript:x)"
    assert markdown_html(md, base=tmp_path, page=tmp_path / "html") == (
        '<p><img src="data:image/png;base64,iVBORw0KGgpmYWNlY2FzdA==" alt="rates &lt;1&gt;">'
        ' <img src="../late.png" alt="late"> <img src="https://x.org/a.png" alt="web"> js</p>')
    assert markdown_html(md).startswith('<p><img src="f.png" alt="rates &lt;1&gt;">')
    monkeypatch.setattr(markdown, "EMBED_LIMIT", len(PNG) - 1)  # too big: linked beside
    assert markdown_html("![a](f.png)", base=tmp_path) == '<p><img src="f.png" alt="a"></p>'


def test_markdown_twin_embeds_its_figures_and_links_the_glossary(tmp_path):
    """write_markdown_html: the page shows the .md's figure wherever the page is written,
    links the glossary under its title and carries it at its foot."""
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "fig.png").write_bytes(PNG)
    (tmp_path / "md" / "r.md").write_text("# Report\n\nText.\n\n![fig](fig.png)\n")
    write_markdown_html(tmp_path / "md" / "r.md", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "[figure:" not in page and page.count("<img ") == 1
    src = page.split('<img src="')[1].split('"')[0]
    assert base64.b64decode(src.removeprefix("data:image/png;base64,")) == PNG
    assert f"<h1>Report</h1>\n{GLOSSARY_LINK}\n<p>Text.</p>" in page
    assert page.index('<section id="glossary">') > page.index("<img ")
    assert page.endswith(glossary_html() + "\n</body></html>\n")
    assert html_page("T", "<p>no title</p>").split("<body>\n")[1].startswith(GLOSSARY_LINK)
    assert page_problems(page) == []


def test_the_glossary_is_docs_reading_md_and_names_every_term():
    """Issue 50.4: docs/reading.md and the pages' glossary are one text, and it explains
    each term the issue lists."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reading.md").read_text()
    assert GLOSSARY in doc
    for term in ("Bias+ / Bias-", "d(a; x_L)", "A7", "A9-A14", "FDR (fairness)", "1 = fair",
                 "False-discovery rate", "GARBE", "0 = fair", "KS", "ECE", "AAD / MAD / STD",
                 "SER", "Identity-clustered interval", "Holm", "10-fold", "EER"):
        assert term in GLOSSARY, term
    assert glossary_html().startswith('<section id="glossary">\n<h2>')
    assert "<h3>Fairness figures</h3>" in glossary_html()
