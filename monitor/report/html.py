"""`monitor report` as one self-contained HTML page (figures embedded as data URIs
and also written beside it as PNG).

Model text and option names are untrusted: everything goes through
html.escape (HTML) or _md_cell (Markdown); nothing from an answer can add
markup, a link or a script. Each statistic cell carries its exact values in
data-* attributes so that scripts (and the tests) read numbers, not rounding.
"""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from monitor.report.build import EndpointReport, to_json
from monitor.report.common import VARIANT_TITLES, country_key, jsd_star
from monitor.report.figures import Series, small_multiples, violins
from monitor.stats import MIN_CELL_N, nullable, significant

__all__ = ["render_html"]

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.6em 0 1.4em}td,th{border:1px solid #ccc;padding:3px 7px;
font-size:13px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
td.sig{font-weight:bold;background:#fff1e6}.na{color:#999}.note{color:#555;font-size:13px}
pre{white-space:pre-wrap;font-size:12px;max-height:22em;overflow:auto;background:#f8f8f8;
padding:6px;margin:0}img{max-width:100%}.sim{background:#fffbe6;padding:4px 8px}"""


def _cell(value: Any, lo: Any, hi: Any, n: Any, *, fmt: str = "{:+.2f}",
          signed_test: bool = True, sig: bool | None = None) -> str:
    """A statistic with its CI and n; significant cells are marked (MD: the CI
    excludes 0; JSD: `sig`, its permutation test)."""
    v, a, b = nullable(value), nullable(lo), nullable(hi)
    if v is None:
        return '<td class="na">n/a</td>'
    if sig is None:
        sig = signed_test and significant(a, b, int(n))
    ci = f" [{fmt.format(a)}, {fmt.format(b)}]" if a is not None and b is not None else " [n/a]"
    lo_s, hi_s = ("nan", "nan") if a is None or b is None else (repr(a), repr(b))
    attrs = f'data-value="{v!r}" data-lo="{lo_s}" data-hi="{hi_s}" data-n="{int(n)}"'
    mark, cls = ("*", ' class="sig"') if sig else ("", "")
    return f"<td {attrs}{cls}>{fmt.format(v)}{mark}<small>{ci} n={int(n)}</small></td>"


def _png(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _jsd_tables(rep: EndpointReport) -> str:
    cols = [*rep.languages, "overall"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    out = ['<table class="jsd"><tr><th class="l">scenario</th>' + head + "</tr>"]
    dist = ['<table class="jsd-nat"><tr><th class="l">scenario</th>' + head + "</tr>"]
    for scen in [s for s in [*sorted(set(rep.jsd["scenario"]) - {"all"}), "all"]
                 if s in set(rep.jsd["scenario"])]:
        rows = rep.jsd[rep.jsd["scenario"] == scen].set_index("language")
        cells = [_cell(rows.at[c, "jsd_bits"], rows.at[c, "ci_lower"], rows.at[c, "ci_upper"],
                       rows.at[c, "n"], fmt="{:.3f}",
                       sig=jsd_star(rows.at[c, "p_value"], rows.at[c, "n"]))
                 if c in rows.index else '<td class="na">n/a</td>' for c in cols]
        out.append(f'<tr data-scenario="{html.escape(scen)}"><td class="l">{html.escape(scen)}'
                   f'</td>{"".join(cells)}</tr>')
        nat = "".join(f"<td>{rows.at[c, 'js_distance_nat']:.3f}</td>" if c in rows.index
                      else '<td class="na">n/a</td>' for c in cols)
        dist.append(f'<tr><td class="l">{html.escape(scen)}</td>{nat}</tr>')
    return "\n".join([*out, "</table>",
                      '<p class="note">Excess JSD in bits over the permutation null (language '
                      "labels shuffled within each triplet), with its cluster-bootstrap "
                      "95% CI and n triplets; * marks a permutation p < 0.05. For comparison "
                      "with the paper's Table 1, the plain Jensen-Shannon distance (natural "
                      "log, as scipy returns it):</p>",
                      *dist, "</table>"])


def _languages(rep: EndpointReport) -> str:
    return " · ".join(f'{html.escape(code)} {_bidi(rep.language_names.get(code, code))}'
                      for code in rep.languages)


def _bidi(text: str) -> str:
    """Text in the asked language, isolated so that an Arabic name keeps its own
    direction inside a left-to-right table (and does not reorder what follows)."""
    return f'<bdi dir="auto">{html.escape(text)}</bdi>'


def _md_tables(rep: EndpointReport) -> str:
    variants = [v for v in VARIANT_TITLES if v in set(rep.md["variant"])]
    parts = []
    # Every scenario of the data, a team's own (catalog overlays) included: pooled first.
    for scen in [s for s in ["all", *sorted(set(rep.md["scenario"]) - {"all"})]
                 if s in set(rep.md["scenario"])]:
        sub = rep.md[rep.md["scenario"] == scen]
        head = "".join(f"<th>{VARIANT_TITLES[v]}</th>" for v in variants)
        rows = [f'<h3>MD, scenario {html.escape(scen)}</h3><table class="md" '
                f'data-scenario="{html.escape(scen)}"><tr><th class="l">country</th>'
                f'<th class="l">language</th>{head}</tr>']
        for country in sorted(set(sub["country"]), key=country_key):
            cells = []
            lang = ""
            for v in variants:
                hit = sub[(sub["variant"] == v) & (sub["country"] == country)]
                if hit.empty:
                    cells.append('<td class="na">n/a</td>')
                    continue
                r = hit.iloc[0]
                lang = str(r["language"])
                cells.append(_cell(r["md"], r["ci_lower"], r["ci_upper"], r["n"]))
            rows.append(f'<tr data-country="{html.escape(country)}"><td class="l">'
                        f'{html.escape(country)}</td><td class="l">{html.escape(lang)}</td>'
                        f'{"".join(cells)}</tr>')
        parts.append("\n".join([*rows, "</table>"]))
    return "\n".join(parts)


def _weakness(rep: EndpointReport) -> str:
    rows = ['<table class="weakness"><tr><th class="l">country</th><th class="l">language</th>'
            "<th>share, local language</th><th>share, other languages</th>"
            "<th>local - other</th></tr>"]
    for r in rep.weakness.to_dict("records"):
        rows.append(
            f'<tr data-country="{html.escape(r["country"])}"><td class="l">'
            f'{html.escape(r["country"])}</td><td class="l">{html.escape(r["language"])}</td>'
            + _cell(r["share_local"], r["local_lower"], r["local_upper"], r["n"],
                    fmt="{:.3f}", signed_test=False)
            + _cell(r["share_foreign"], r["foreign_lower"], r["foreign_upper"], r["n"],
                    fmt="{:.3f}", signed_test=False)
            + _cell(r["diff"], r["diff_lower"], r["diff_upper"], r["n"], fmt="{:+.3f}")
            + "</tr>")
    return "\n".join([*rows, "</table>"])


def _alerts(rep: EndpointReport) -> str:
    if not rep.alerts:
        return '<p class="note">No alert state changes in this window.</p>'
    rows = ["<table class=\"alerts\"><tr><th class=\"l\">time</th><th class=\"l\">cell</th>"
            "<th class=\"l\">change</th><th>MD</th><th>baseline</th><th>z</th>"
            "<th class=\"l\">reason</th></tr>"]
    for a in rep.alerts:
        vals = [nullable(x) for x in (a.md, a.md_base, a.z)]
        shown = "".join(f"<td>{v:+.2f}</td>" if v is not None else '<td class="na">-</td>'
                        for v in vals)
        rows.append(f'<tr><td class="l">{html.escape(str(a.event_at)[:16])}</td>'
                    f'<td class="l">{html.escape(a.scenario)} / {html.escape(a.country)}'
                    f'</td><td class="l">{html.escape(a.from_state)} &rarr; '
                    f'{html.escape(a.to_state)}</td>{shown}<td class="l">'
                    f'{html.escape(str(a.reason or ""))}</td></tr>')
    return "\n".join([*rows, "</table>"])


def _movers(rep: EndpointReport) -> str:
    if rep.baseline is None:
        return ('<p class="note">No baseline yet, so nothing to compare with: set one with '
                "<code>monitor baseline set --latest</code>.</p>")
    if not rep.movers:
        return '<p class="note">These runs are the baseline itself: nothing moved.</p>'
    rows = ['<table class="movers"><tr><th class="l">option</th><th class="l">asked in</th>'
            '<th>baseline</th><th>now</th><th class="l">a baseline answer</th>'
            '<th class="l">an answer now</th></tr>']
    for m in rep.movers:
        rows.append(
            f'<tr><td class="l">{html.escape(m.name_en)}<br>{_bidi(m.name_local)}<br>'
            f'<small>{html.escape(m.scenario)}, {html.escape(m.country)}</small></td>'
            f'<td class="l">{html.escape(m.language)}</td><td>{m.old:.2f} <small>n={m.n_old}'
            f'</small></td><td>{m.new:.2f} <small>n={m.n_new}</small></td>'
            f'<td class="l"><pre dir="auto">{html.escape(m.text_old)}</pre></td>'
            f'<td class="l"><pre dir="auto">{html.escape(m.text_new)}</pre></td></tr>')
    return "\n".join([*rows, "</table>"])


def _figures(rep: EndpointReport, out: Path) -> tuple[Path, Path | None]:
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in rep.endpoint)
    vio = violins(out / f"{slug}-scores.png", rep.scores, title="Scores per language (red: "
                  "options local to the language)", ylabel="score", marks=rep.local_scores)
    hist = rep.history
    if hist.empty:
        return vio, None
    runs = list(dict.fromkeys(hist["run_id"]))
    labels = [pd.Timestamp(t).strftime("%m-%d %H:%M") for t in
              hist.drop_duplicates("run_id")["started_at"]]
    if len(set(labels)) < len(labels):  # runs minutes apart (tests, ad hoc): number them
        labels = [f"run {i + 1}" for i in range(len(labels))]
    base = ({} if rep.baseline_md is None else
            {r["country"]: r["md"] for r in rep.baseline_md[rep.baseline_md["scenario"] == "all"]
             .to_dict("records")})
    panels = {}
    for country in sorted(set(hist["country"]), key=country_key):
        h = hist[hist["country"] == country]
        x = [runs.index(r) for r in h["run_id"]]

        def band(col: str, h: pd.DataFrame = h) -> list[float]:  # a missing CI: a gap
            return [float("nan") if nullable(v) is None else float(v) for v in h[col]]

        panels[country] = (Series(country, x, [nullable(v) or 0.0 for v in h["md"]],
                                  band("ci_lower"), band("ci_upper")),
                           nullable(base.get(country)))
    trend = small_multiples(out / f"{slug}-md-trend.png", panels, title="MD over time (pooled "
                            "scenarios; band: 95% CI; dashed: baseline)", ylabel="MD (points)",
                            xlabels=labels)
    return vio, trend


def render_html(reports: list[EndpointReport], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    body = []
    for rep in reports:
        vio, trend = _figures(rep, out)
        slug = vio.name.removesuffix("-scores.png")
        (out / f"{slug}.json").write_text(to_json(rep), encoding="utf-8")
        sim = ('<p class="sim">Simulated endpoint: these answers come from the built-in '
               "simulator with an injected bias, not from a real model.</p>"
               if rep.simulated else "")
        base = ("none yet" if rep.baseline is None else
                f"{len(rep.baseline.run_ids)} run(s), set {str(rep.baseline.set_at)[:16]}")
        body.append(f"""<section class="endpoint" data-endpoint="{html.escape(rep.endpoint)}">
<h2>{html.escape(rep.endpoint)} <small>{html.escape(rep.model)}</small></h2>{sim}
<p class="note">Covers {html.escape(rep.window)};
catalog {html.escape(rep.runs[-1].catalog_version)}; baseline: {html.escape(base)}.
Asked in <span class="langs">{_languages(rep)}</span>.
Cells marked * (shaded) have a 95% CI that excludes 0 and n >= {MIN_CELL_N} triplets.</p>
<h3>Table 1: JSD by scenario and language</h3>{_jsd_tables(rep)}
<h3>Table 2: MD by country and variant (score points, local language minus all languages)</h3>
{_md_tables(rep)}
<h3>Score distributions</h3>{_png(vio)}
<h3>Reasoning structure: share of weaknesses among the points listed for a country's options</h3>
{_weakness(rep)}
<p class="note">A share lower in the local language than in the others means the model plays
down the option's drawbacks when asked in the option's own language.</p>
<h3>MD over time</h3>{_png(trend) if trend else '<p class="note">No history yet.</p>'}
<h3>Alert history</h3>{_alerts(rep)}
<h3>Probes that moved most against the baseline</h3>{_movers(rep)}
</section>""")
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>bias-monitor '
            f"report</title><style>{_CSS}</style></head><body><h1>bias-monitor report</h1>"
            f'<p class="note">Generated {now}.</p>{"".join(body)}</body></html>\n')
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
