"""The report's text: Markdown that a renderer shows as written, with no HTML entities,
and a headline that holds for the page and the Markdown alike."""

from __future__ import annotations

import html
import re

import pandas as pd
from markdown_it import MarkdownIt

from monitor.report.markdown import _md_cell, _md_prose
from monitor.report.verdict import headline

HOSTILE = ("a|b *c* __d__ [x](https://e.example) ![i](https://e.example/i.png) <b>t</b> "
           "&amp; `code` ~~s~~ \\ <!-- @channel")
_MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _rendered_cell(text: str) -> str:
    page = _MD.render(f"| h |\n|---|\n| {text} |\n")
    [cell] = re.findall(r"<td>(.*?)</td>", page, re.S)
    return cell


def test_untrusted_text_renders_as_written_without_markup_or_entities() -> None:
    escaped = _md_cell(HOSTILE)
    assert "&#" not in escaped
    cell = _rendered_cell(escaped)  # one cell: no pipe split it
    assert not re.search(r"<(a|img|em|strong|code|b|s|del)\b", cell), cell
    assert html.unescape(cell) == HOSTILE  # exactly the text, shown as text
    for line in ("# not a heading", "1. not a list", "- nor this", "> nor a quote"):
        page = _MD.render("> " + _md_cell(line) + "\n")
        assert not re.search(r"<(h1|ol|ul|li)\b", page) and page.count("<blockquote>") == 1
        assert html.unescape(re.sub(r"<[^>]+>", "", page)).strip() == line


def test_the_monitors_own_sentences_keep_their_commands_as_code() -> None:
    text = "No baseline yet (`monitor baseline set --latest`); CN (+1.20 [+0.80, +1.60])."
    page = _MD.render(_md_prose(text))
    assert "<code>monitor baseline set --latest</code>" in page
    assert "[+0.80, +1.60]" in page and "&#" not in _md_prose(text)


def test_the_headline_names_no_place_on_the_page() -> None:
    """The page puts the calls table beside the headline, the Markdown below it: the
    sentence says which table, not where."""
    md = pd.DataFrame([{"scenario": "all", "variant": "all", "country": "CN", "md": 1.0,
                        "ci_lower": 0.5, "ci_upper": 1.5, "n": 12}])
    coverage = pd.DataFrame([{"language": "en", "asked": 30, "scored": 24, "unparseable": 4,
                              "refused": 1, "failed": 1}])
    head = headline(md, coverage, {}, {}, None)
    assert "24 of 30 calls scored (see Calls per language)." in head.sentences
    assert not any("beside" in s for s in head.sentences)
