"""The report: what it covers (build), and its HTML and Markdown renderings.

    build.py       an endpoint's report from the store: tables, scores, trend, evidence
    verdict.py     the headline: a status and a few sentences
    plots.py       which numbers go in which figure
    figures.py     the figures drawn (the only matplotlib user)
    html.py        one self-contained page, figures embedded
    html_parts.py  the page's shared parts: a statistic cell, an embedded figure
    fleet.py       the fleet page opening a report of several endpoints
    markdown.py    the tables for a PR or chat
    common.py      names and orders both renderings use
    ports.py       what the report reads from the store
"""

from monitor.report.build import EndpointReport, Evidence, build, to_json
from monitor.report.common import latest_runs, trend_to, unreadable
from monitor.report.html import render_html
from monitor.report.markdown import render_markdown

__all__ = ["EndpointReport", "Evidence", "build", "latest_runs", "render_html", "render_markdown",
           "to_json", "trend_to", "unreadable"]
