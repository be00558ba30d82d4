"""The one Markdown renderer (facecast.report.markdown): lists, code, links, emphasis,
tables and escaping, as the stages' report pages need them (issue 41.7)."""

from __future__ import annotations

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
        "<td><code>c_d</code></td></tr></tbody></table>\n<p>[figure: fig]</p>")


def test_inline_markup_is_escaped_and_safe():
    assert inline_html("**bold** *em* _em_ label_glasses 2 * 3 `<a>`") == (
        "<strong>bold</strong> <em>em</em> <em>em</em> label_glasses 2 * 3 "
        "<code>&lt;a&gt;</code>")
    assert inline_html("[doc](https://x.org/a_(b)?q=1&r=2) <script>") == (
        '<a href="https://x.org/a_(b)?q=1&amp;r=2">doc</a> &lt;script&gt;')
    # a scheme other than http(s)/mailto never becomes a link
    assert inline_html("[x](javascript:alert(1))") == "x"
    assert inline_html('[x](a.html"onclick=y)') == '<a href="a.html&quot;onclick=y">x</a>'
