"""`monitor report` as one self-contained HTML page (figures embedded as data URIs
and also written beside it as PNG).

The page reads top-down: the headline (status, verdict, coverage), then the
figures, each with its numbers one click away (<details>), then the tables
and the evidence. Model text and option names are untrusted: everything goes
through html.escape; nothing from an answer can add markup, a link or a
script. Each statistic cell carries its exact values in data-* attributes so
that scripts (and the tests) read numbers, not rounding; a cell under the
minimum n is greyed (class "thin") and never marked.
"""

from __future__ import annotations

import base64
import html
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.report.build import EndpointReport, to_json
from monitor.report.common import VARIANT_TITLES, country_key, jsd_star, slug
from monitor.report.plots import figures
from monitor.stats import MIN_CELL_N, nullable, significant
from monitor.vocab import POOLED

__all__ = ["render_html"]

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.6em 0 1.4em}td,th{border:1px solid #ccc;padding:3px 7px;
font-size:13px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
td.sig{font-weight:bold;background:#fff1e6}.na{color:#999}.note{color:#555;font-size:13px}
td.thin{color:#aaa;background:#f6f6f6}td.own{outline:2px solid #444;outline-offset:-2px}
pre{white-space:pre-wrap;font-size:12px;max-height:22em;overflow:auto;background:#f8f8f8;
padding:6px;margin:0}img{max-width:100%}.sim{background:#fffbe6;padding:4px 8px}
.top{display:flex;gap:2em;flex-wrap:wrap;align-items:flex-start}.headline{flex:1 1 480px;
font-size:16px;line-height:1.45}.badge{display:inline-block;padding:2px 10px;border-radius:10px;
font-size:14px;color:#fff;vertical-align:middle}.s-unreadable,.s-drift{background:#b3261e}
.s-bias{background:#c25e00}.s-thin{background:#777}.s-clear{background:#2e7d32}
.figs{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}.fig{flex:1 1 480px}
details{margin:.2em 0 1em}summary{cursor:pointer;color:#245;font-size:13px}"""


_CODE = re.compile(r"`([^`]+)`")


def _cell(value: Any, lo: Any, hi: Any, n: Any, *, fmt: str = "{:+.2f}",
          signed_test: bool = True, sig: bool | None = None, extra: str = "") -> str:
    """A statistic with its CI and n; significant cells are marked (MD: the CI
    excludes 0; JSD: `sig`, its permutation test); thin cells are greyed."""
    v, a, b = nullable(value), nullable(lo), nullable(hi)
    if v is None:
        return '<td class="na">n/a</td>'
    if sig is None:
        sig = signed_test and significant(a, b, int(n))
    ci = f" [{fmt.format(a)}, {fmt.format(b)}]" if a is not None and b is not None else " [n/a]"
    lo_s, hi_s = ("nan", "nan") if a is None or b is None else (repr(a), repr(b))
    attrs = f'data-value="{v!r}" data-lo="{lo_s}" data-hi="{hi_s}" data-n="{int(n)}"'
    classes = [c for c in (extra, "sig" if sig else "", "thin" if int(n) < MIN_CELL_N else "")
               if c]
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return (f"<td {attrs}{cls}>{fmt.format(v)}{'*' if sig else ''}<small>{ci} n={int(n)}"
            "</small></td>")


def _png(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _numbers(table: str, what: str = "the numbers") -> str:
    return f"<details><summary>{what}</summary>{table}</details>"


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _bidi(text: str) -> str:
    """Text in the asked language, isolated so that an Arabic name keeps its own
    direction inside a left-to-right table (and does not reorder what follows)."""
    return f'<bdi dir="auto">{html.escape(text)}</bdi>'


def _languages(rep: EndpointReport) -> str:
    return " · ".join(f'{html.escape(code)} {_bidi(rep.language_names.get(code, code))}'
                      for code in rep.languages)


def _coverage(rep: EndpointReport) -> str:
    cols = ["asked", "scored", "unparseable", "refused", "failed"]
    rows = ['<table class="coverage"><tr><th class="l">language</th>'
            + "".join(f"<th>{c}</th>" for c in cols) + "</tr>"]
    for r in rep.coverage.to_dict("records"):
        low = ' class="na"' if r["scored"] < r["asked"] else ""
        rows.append(f'<tr data-language="{_esc(r["language"])}"><td class="l">'
                    f'{_esc(r["language"])}</td>'
                    + "".join(f"<td{low if c == 'scored' else ''}>{int(r[c])}</td>"
                              for c in cols) + "</tr>")
    return "\n".join([*rows, "</table>"])


def _forest_table(rep: EndpointReport) -> str:
    md = rep.md[(rep.md["scenario"] == POOLED) & (rep.md["variant"] == POOLED)]
    base = ({} if rep.baseline_md is None or rep.baseline_md.empty else
            {r["country"]: r for r in rep.baseline_md[rep.baseline_md["scenario"] == POOLED]
             .to_dict("records")})
    rows = ['<table class="forest"><tr><th class="l">country</th><th class="l">language</th>'
            "<th>MD (these runs)</th><th>MD (baseline)</th><th>DiD</th></tr>"]
    for r in sorted(md.to_dict("records"), key=lambda r: country_key(r["country"])):
        b = base.get(r["country"])
        rows.append(f'<tr data-country="{_esc(r["country"])}"><td class="l">'
                    f'{_esc(r["country"])}</td><td class="l">{_esc(r["language"])}</td>'
                    + _cell(r["md"], r["ci_lower"], r["ci_upper"], r["n"])
                    + (_cell(b["md"], b["ci_lower"], b["ci_upper"], b["n"]) if b else
                       '<td class="na">n/a</td>')
                    + _cell(r["did"], r["did_ci_lower"], r["did_ci_upper"], r["n"]) + "</tr>")
    return "\n".join([*rows, "</table>"])


def _deviation_table(rep: EndpointReport) -> str:
    dev = rep.deviation
    head = "".join(f"<th>{_esc(c)}</th>" for c in rep.languages)
    rows = [f'<table class="deviation"><tr><th class="l">option country</th>{head}</tr>']
    for country in sorted(set(dev["country"]), key=country_key):
        sub = dev[dev["country"] == country].set_index("language")
        cells = [_cell(*sub.loc[lang, ["mean", "ci_lower", "ci_upper", "n"]],
                       extra="own" if sub.loc[lang, "local_language"] == lang else "")
                 if lang in sub.index else '<td class="na">n/a</td>' for lang in rep.languages]
        rows.append(f'<tr data-country="{_esc(country)}"><td class="l">{_esc(country)}</td>'
                    f'{"".join(cells)}</tr>')
    return "\n".join([*rows, "</table>"])


def _trend_table(rep: EndpointReport) -> str:
    hist = rep.history
    countries = sorted(set(hist["country"]), key=country_key)
    head = "".join(f"<th>{_esc(c)}</th>" for c in countries)
    rows = [f'<table class="trend"><tr><th class="l">run</th>{head}</tr>']
    for run_id, h in hist.groupby("run_id", sort=False):
        by = h.set_index("country")
        cells = [_cell(*by.loc[c, ["md", "ci_lower", "ci_upper", "n"]]) if c in by.index
                 else '<td class="na">n/a</td>' for c in countries]
        rows.append(f'<tr data-run="{_esc(run_id)}"><td class="l">{_esc(run_id)}</td>'
                    f'{"".join(cells)}</tr>')
    return "\n".join([*rows, "</table>"])


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
                      '<p class="note">Table 1 of the paper: excess JSD in bits over the '
                      "permutation null (language labels shuffled within each triplet), with "
                      "its cluster-bootstrap 95% CI and n triplets; * marks a permutation "
                      f"p < 0.05 with n >= {MIN_CELL_N}. For comparison with the paper, the "
                      "plain Jensen-Shannon distance (natural log, as scipy returns it; no "
                      "interval):</p>", *dist, "</table>"])


def _md_tables(rep: EndpointReport) -> str:
    md = rep.detail_md
    if md.empty:
        return '<p class="note">No MD: no triplet was answered in every language.</p>'
    variants = [v for v in VARIANT_TITLES if v in set(md["variant"])]
    parts = []
    # Every scenario of the data, a team's own (catalog overlays) included: pooled first.
    for scen in [s for s in ["all", *sorted(set(md["scenario"]) - {"all"})]
                 if s in set(md["scenario"])]:
        sub = md[md["scenario"] == scen]
        head = "".join(f"<th>{VARIANT_TITLES[v]}</th>" for v in variants)
        rows = [f'<h4>Scenario {html.escape(scen)}</h4><table class="md" '
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


def _detail_note(rep: EndpointReport) -> str:
    if not rep.detail_pooled:
        return (f'<p class="note">These runs alone. Greyed cells hold fewer than {MIN_CELL_N} '
                "triplets and are never marked.</p>")
    ids = [r.run_id for r in rep.detail_runs]
    return (f'<p class="note" data-pooled="{len(ids)}">One run is too thin for these tables '
            f"(most cells under {MIN_CELL_N} triplets), so they pool the {len(ids)} comparable "
            f"runs up to it (same catalog, setup, model and languages): "
            f"<small>{', '.join(_esc(i) for i in ids)}</small>. Greyed cells still hold fewer "
            f"than {MIN_CELL_N} triplets and are never marked.</p>")


def _weakness(rep: EndpointReport) -> str:
    if rep.weakness.empty:
        return f'<p class="note empty">No weakness shares: {_esc(rep.weakness_note)}.</p>'
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
    return "\n".join([*rows, "</table>",
                      '<p class="note">A share lower in the local language than in the others '
                      "means the model plays down the option's drawbacks when asked in the "
                      "option's own language.</p>"])


def _alerts(rep: EndpointReport) -> str:
    if not rep.alerts:
        return '<p class="note">No alert state changes in this window.</p>'
    base = ({} if rep.baseline_md is None or rep.baseline_md.empty else
            {(r["scenario"], r["country"]): r for r in rep.baseline_md.to_dict("records")})
    rows = ['<table class="alerts"><tr><th class="l">time</th><th class="l">run</th>'
            '<th class="l">cell</th><th class="l">change</th><th>MD of the run</th>'
            '<th>baseline MD</th><th>z</th><th class="l">reason</th></tr>']
    for a in rep.alerts:
        st = rep.alert_md.get((a.run_id.split("-topup-", 1)[0], a.scenario, a.country))
        now = (_cell(st.value, st.ci_lower, st.ci_upper, st.n or 0) if st is not None else
               '<td class="na">-</td>')
        b = base.get((a.scenario, a.country))
        was = (_cell(b["md"], b["ci_lower"], b["ci_upper"], b["n"]) if b is not None else
               '<td class="na">-</td>')
        z = nullable(a.z)
        rows.append(f'<tr data-run="{_esc(a.run_id)}"><td class="l">{_esc(str(a.event_at)[:16])}'
                    f'</td><td class="l"><small>{_esc(a.run_id)}</small></td><td class="l">'
                    f'{_esc(a.scenario)} / {_esc(a.country)}</td><td class="l">'
                    f'{_esc(a.from_state)} &rarr; {_esc(a.to_state)}</td>{now}{was}'
                    + (f"<td>{z:+.2f}</td>" if z is not None else '<td class="na">-</td>')
                    + f'<td class="l">{_esc(a.reason or "")}</td></tr>')
    return "\n".join([*rows, "</table>"])


def _movers(rep: EndpointReport) -> str:
    if rep.baseline is None:
        return ('<p class="note">No baseline yet, so nothing to compare with: set one with '
                "<code>monitor baseline set --latest</code>.</p>")
    if not rep.movers:
        return '<p class="note">These runs are the baseline itself: nothing moved.</p>'
    rows = ['<table class="movers"><tr><th class="l">option</th><th class="l">scenario</th>'
            '<th class="l">asked in</th><th>baseline</th><th>now</th>'
            '<th class="l">a baseline answer</th><th class="l">an answer now</th></tr>']
    for m in rep.movers:
        local = (f"<br>{_bidi(m.name_local)}" if m.name_local != m.name_en else "")
        rows.append(
            f'<tr><td class="l">{html.escape(m.name_en)}{local}<br>'
            f'<small>{html.escape(m.country)}</small></td>'
            f'<td class="l">{html.escape(m.scenario)}</td>'
            f'<td class="l">{html.escape(m.language)}</td><td>{m.old:.2f} <small>mean of '
            f'n={m.n_old}</small></td><td>{m.new:.2f} <small>mean of n={m.n_new}</small></td>'
            f'<td class="l"><pre dir="auto">{html.escape(m.text_old)}</pre></td>'
            f'<td class="l"><pre dir="auto">{html.escape(m.text_new)}</pre></td></tr>')
    return "\n".join([*rows, "</table>"])


def _examples(rep: EndpointReport) -> str:
    if not rep.examples:
        return ""
    items = "".join(f'<h4>{_esc(e.status)}, asked in {_esc(e.language)}'
                    f'{": " + _esc(e.detail) if e.detail else ""}</h4>'
                    f'<pre dir="auto">{_esc(e.text)}</pre>' for e in rep.examples)
    return (f'<div class="examples"><h3>Answers as they came (none could be read)</h3>{items}'
            '<p class="note">The parser reads the JSON block the prompt asks for and the usual '
            "ways assistants write scores (docs/contract.md, \"Reading answers\"). A model that "
            "writes neither can be asked with a response schema: set "
            "<code>answer_format: json_schema</code> (or <code>auto</code>) on the endpoint "
            "and run again.</p></div>")


def _figure(title: str, img: Path | None, numbers: str, note: str) -> str:
    if img is None:
        return (f'<div class="fig"><h3>{title}</h3><p class="note">{note}</p></div>')
    return (f'<div class="fig"><h3>{title}</h3>{_png(img)}<p class="note">{note}</p>'
            f"{_numbers(numbers)}</div>")


def _section(rep: EndpointReport, out: Path) -> str:
    figs = figures(rep, out)
    (out / f"{slug(rep.endpoint)}.json").write_text(to_json(rep), encoding="utf-8")
    head = rep.headline
    assert head is not None
    sim = ('<p class="sim">Simulated endpoint: these answers come from the built-in '
           "simulator with an injected bias, not from a real model.</p>" if rep.simulated else "")
    base = ("none yet" if rep.baseline is None else
            f"{len(rep.baseline.run_ids)} run(s), set {str(rep.baseline.set_at)[:16]}")
    # The sentences are the monitor's own; `x` in them is a command or key to type.
    sentences = "".join("<p>" + _CODE.sub(r"<code>\1</code>", _esc(s)) + "</p>"
                        for s in head.sentences)
    scored = rep.scored > 0
    body = [f"""<section class="endpoint" data-endpoint="{_esc(rep.endpoint)}"
 data-status="{head.status}">
<h2>{_esc(rep.endpoint)} <small>{_esc(rep.model)}</small>
<span class="badge s-{head.status}">{_esc(head.label)}</span></h2>{sim}
<div class="top"><div class="headline">{sentences}</div>
<div><h4>Calls per language</h4>{_coverage(rep)}</div></div>
<p class="note">Covers {_esc(rep.window)}; catalog {_esc(rep.runs[-1].catalog_version)};
baseline: {_esc(base)}. Asked in <span class="langs">{_languages(rep)}</span>.
Marked * (shaded): a 95% CI that excludes 0 and n >= {MIN_CELL_N} triplets; greyed: fewer.</p>
{_examples(rep)}"""]
    if scored:
        body.append('<div class="figs">' + _figure(
            "MD per country", figs.forest, _forest_table(rep),
            "Local language minus all languages, score points, pooled scenarios, 95% CI; "
            "blue: the baseline; red *: significant; hollow grey: too few triplets.")
            + _figure("Score deviation: option country x asked language", figs.heatmap,
                      _deviation_table(rep),
                      "How much a country's options score above (red) or below (blue) their "
                      "mean over languages; boxed: the country's own language, whose cell is "
                      "its MD. Local-language bias shows as a red diagonal.") + "</div>")
    body.append(_figure("MD over time", figs.trend, _trend_table(rep) if figs.trend else "",
                        "One panel per country, each with its own scale; band: 95% CI; blue "
                        "dashes and band: the baseline's MD and CI; shaded red / orange: the "
                        "cell firing / pending; hollow grey: fewer than "
                        f"{MIN_CELL_N} triplets." if figs.trend else "No history yet."))
    if scored:
        body.append(_figure("JSD per language", figs.jsd, _jsd_tables(rep),
                            "Excess JSD (bits over the permutation null) of each language's "
                            "score distribution, pooled scenarios, with its bootstrap 95% CI; "
                            "red *: permutation p < 0.05."))
        body.append(f"<h3>MD by scenario and variant</h3>{_detail_note(rep)}"
                    + _numbers(_md_tables(rep), "the tables (country x variant, per scenario)"))
    body.append(f"<h3>Reasoning structure: share of weaknesses among the points listed for a "
                f"country's options</h3>{_weakness(rep)}")
    body.append(f"<h3>Probes that moved most against the baseline</h3>{_movers(rep)}")
    body.append(f"<h3>Alert history (up to this run)</h3>{_alerts(rep)}</section>")
    return "\n".join(body)


def render_html(reports: list[EndpointReport], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    body = [_section(rep, out) for rep in reports]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>bias-monitor '
            f"report</title><style>{_CSS}</style></head><body><h1>bias-monitor report</h1>"
            f'<p class="note">Generated {now}.</p>{"".join(body)}</body></html>\n')
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path

