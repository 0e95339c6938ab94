"""The report: what it covers (build), and its HTML and Markdown renderings.

    build.py     an endpoint's report from the store: tables, scores, trend, evidence
    html.py      one self-contained page, figures embedded
    markdown.py  the tables for a PR or chat
    figures.py   the only matplotlib user
    common.py    names and orders both renderings use
"""

from monitor.report.build import EndpointReport, Evidence, build, to_json
from monitor.report.common import trend_to, unreadable
from monitor.report.html import render_html
from monitor.report.markdown import render_markdown

__all__ = ["EndpointReport", "Evidence", "build", "render_html", "render_markdown", "to_json",
           "trend_to", "unreadable"]
