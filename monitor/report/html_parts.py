"""The report page's parts shared by its sections: a statistic cell, an embedded
figure, escaping; and the evidence sections (weakness shares, alert history,
movers, example answers). monitor.report.html assembles the page."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any

from monitor.config import schema_advice
from monitor.report.build import EndpointReport, own_run
from monitor.report.common import stat
from monitor.stats import nullable

__all__ = ["CODE", "alerts", "bidi", "cell", "esc", "examples", "movers", "numbers", "png",
           "weakness"]


CODE = re.compile(r"`([^`]+)`")


def cell(value: Any, lo: Any, hi: Any, n: Any, *, fmt: str = "{:+.2f}",
         signed_test: bool = True, sig: bool | None = None, extra: str = "") -> str:
    """A statistic with its CI and n; significant cells are marked (MD: the CI
    excludes 0; JSD: `sig`, its permutation test); thin cells are greyed."""
    st = stat(value, lo, hi, n, test=signed_test, sig=sig)
    if st is None:
        return '<td class="na">n/a</td>'
    lo_s, hi_s = (("nan", "nan") if st.lo is None or st.hi is None
                  else (repr(st.lo), repr(st.hi)))
    attrs = f'data-value="{st.value!r}" data-lo="{lo_s}" data-hi="{hi_s}" data-n="{st.n}"'
    classes = [c for c in (extra, "sig" if st.sig else "", "thin" if st.thin else "") if c]
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return (f"<td {attrs}{cls}>{fmt.format(st.value)}{'*' if st.sig else ''}<small>"
            f"{st.ci(fmt, ' [n/a]')} n={st.n}</small></td>")


def png(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def numbers(table: str, what: str = "the numbers") -> str:
    return f"<details><summary>{what}</summary>{table}</details>"


def esc(x: Any) -> str:
    return html.escape(str(x))


def bidi(text: str) -> str:
    """Text in the asked language, isolated so that an Arabic name keeps its own
    direction inside a left-to-right table (and does not reorder what follows)."""
    return f'<bdi dir="auto">{html.escape(text)}</bdi>'


def weakness(rep: EndpointReport) -> str:
    if rep.weakness.empty:
        return f'<p class="note empty">No weakness shares: {esc(rep.weakness_note)}.</p>'
    rows = ['<table class="weakness"><tr><th class="l">country</th><th class="l">language</th>'
            "<th>share, local language</th><th>share, other languages</th>"
            "<th>local - other</th></tr>"]
    for r in rep.weakness.to_dict("records"):
        rows.append(
            f'<tr data-country="{html.escape(r["country"])}"><td class="l">'
            f'{html.escape(r["country"])}</td><td class="l">{html.escape(r["language"])}</td>'
            + cell(r["share_local"], r["local_lower"], r["local_upper"], r["n"],
                    fmt="{:.3f}", signed_test=False)
            + cell(r["share_foreign"], r["foreign_lower"], r["foreign_upper"], r["n"],
                    fmt="{:.3f}", signed_test=False)
            + cell(r["diff"], r["diff_lower"], r["diff_upper"], r["n"], fmt="{:+.3f}")
            + "</tr>")
    return "\n".join([*rows, "</table>",
                      '<p class="note">A share lower in the local language than in the others '
                      "means the model plays down the option's drawbacks when asked in the "
                      "option's own language.</p>"])


def alerts(rep: EndpointReport) -> str:
    if not rep.alerts:
        return '<p class="note">No alert state changes in this window.</p>'
    base = ({} if rep.baseline_md is None or rep.baseline_md.empty else
            {(r["scenario"], r["country"]): r for r in rep.baseline_md.to_dict("records")})
    rows = ['<table class="alerts"><tr><th class="l">time</th><th class="l">run</th>'
            '<th class="l">cell</th><th class="l">change</th><th>MD of the run</th>'
            '<th>baseline MD</th><th>z</th><th class="l">reason</th></tr>']
    for a in rep.alerts:
        st = rep.alert_md.get((own_run(a.run_id), a.scenario, a.country))
        now = (cell(st.value, st.ci_lower, st.ci_upper, st.n or 0) if st is not None else
               '<td class="na">-</td>')
        b = base.get((a.scenario, a.country))
        was = (cell(b["md"], b["ci_lower"], b["ci_upper"], b["n"]) if b is not None else
               '<td class="na">-</td>')
        z = nullable(a.z)
        rows.append(f'<tr data-run="{esc(a.run_id)}"><td class="l">{esc(str(a.event_at)[:16])}'
                    f'</td><td class="l"><small>{esc(a.run_id)}</small></td><td class="l">'
                    f'{esc(a.scenario)} / {esc(a.country)}</td><td class="l">'
                    f'{esc(a.from_state)} &rarr; {esc(a.to_state)}</td>{now}{was}'
                    + (f"<td>{z:+.2f}</td>" if z is not None else '<td class="na">-</td>')
                    + f'<td class="l">{esc(a.reason or "")}</td></tr>')
    return "\n".join([*rows, "</table>"])


def movers(rep: EndpointReport) -> str:
    if rep.baseline is None:
        return ('<p class="note">No baseline yet, so nothing to compare with: set one with '
                "<code>monitor baseline set --latest</code>.</p>")
    if not rep.movers:
        return '<p class="note">These runs are the baseline itself: nothing moved.</p>'
    rows = ['<table class="movers"><tr><th class="l">option</th><th class="l">scenario</th>'
            '<th class="l">asked in</th><th>baseline</th><th>now</th>'
            '<th class="l">a baseline answer</th><th class="l">an answer now</th></tr>']
    for m in rep.movers:
        local = (f"<br>{bidi(m.name_local)}" if m.name_local != m.name_en else "")
        rows.append(
            f'<tr><td class="l">{html.escape(m.name_en)}{local}<br>'
            f'<small>{html.escape(m.country)}</small></td>'
            f'<td class="l">{html.escape(m.scenario)}</td>'
            f'<td class="l">{html.escape(m.language)}</td><td>{m.old:.2f} <small>mean of '
            f'n={m.n_old}</small></td><td>{m.new:.2f} <small>mean of n={m.n_new}</small></td>'
            f'<td class="l"><pre dir="auto">{html.escape(m.text_old)}</pre></td>'
            f'<td class="l"><pre dir="auto">{html.escape(m.text_new)}</pre></td></tr>')
    return "\n".join([*rows, "</table>"])


def examples(rep: EndpointReport) -> str:
    if not rep.examples:
        return ""
    items = "".join(f'<h4>{esc(e.status)}, asked in {esc(e.language)}'
                    f'{": " + esc(e.detail) if e.detail else ""}</h4>'
                    f'<pre dir="auto">{esc(e.text)}</pre>' for e in rep.examples)
    return (f'<div class="examples"><h3>Answers as they came (none could be read)</h3>{items}'
            '<p class="note">The parser reads the JSON block the prompt asks for and the usual '
            "ways assistants write scores (docs/contract.md, \"Reading answers\"). For a model "
            f"that writes neither, {esc(schema_advice(rep.model))}, and run again.</p></div>")
