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

import html
from datetime import UTC, datetime
from pathlib import Path

from monitor.report import html_parts as hp
from monitor.report.build import EndpointReport, to_json
from monitor.report.common import (
    NEUTRAL_NOTES_LEAD,
    VARIANT_TITLES,
    country_key,
    jsd_star,
    notes_under,
    slug,
)
from monitor.report.fleet import anchor, fleet_table
from monitor.report.plots import figures
from monitor.stats import MIN_CELL_N
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


def _languages(rep: EndpointReport) -> str:
    return " · ".join(f'{html.escape(code)} {hp.bidi(rep.language_names.get(code, code))}'
                      for code in rep.languages)


def _coverage(rep: EndpointReport) -> str:
    cols = ["asked", "scored", "unparseable", "refused", "failed"]
    rows = ['<table class="coverage"><tr><th class="l">language</th>'
            + "".join(f"<th>{c}</th>" for c in cols) + "</tr>"]
    for r in rep.coverage.to_dict("records"):
        low = ' class="na"' if r["scored"] < r["asked"] else ""
        rows.append(f'<tr data-language="{hp.esc(r["language"])}"><td class="l">'
                    f'{hp.esc(r["language"])}</td>'
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
        rows.append(f'<tr data-country="{hp.esc(r["country"])}"><td class="l">'
                    f'{hp.esc(r["country"])}</td><td class="l">{hp.esc(r["language"])}</td>'
                    + hp.cell(r["md"], r["ci_lower"], r["ci_upper"], r["n"])
                    + (hp.cell(b["md"], b["ci_lower"], b["ci_upper"], b["n"]) if b else
                       '<td class="na">n/a</td>')
                    + hp.cell(r["did"], r["did_ci_lower"], r["did_ci_upper"], r["n"]) + "</tr>")
    return "\n".join([*rows, "</table>"])


def _deviation_table(rep: EndpointReport) -> str:
    dev = rep.deviation
    head = "".join(f"<th>{hp.esc(c)}</th>" for c in rep.languages)
    rows = [f'<table class="deviation"><tr><th class="l">option country</th>{head}</tr>']
    for country in sorted(set(dev["country"]), key=country_key):
        sub = dev[dev["country"] == country].set_index("language")
        cells = [hp.cell(*sub.loc[lang, ["mean", "ci_lower", "ci_upper", "n"]],
                       extra="own" if sub.loc[lang, "local_language"] == lang else "")
                 if lang in sub.index else '<td class="na">n/a</td>' for lang in rep.languages]
        rows.append(f'<tr data-country="{hp.esc(country)}"><td class="l">{hp.esc(country)}</td>'
                    f'{"".join(cells)}</tr>')
    return "\n".join([*rows, "</table>"])


def _trend_table(rep: EndpointReport) -> str:
    hist = rep.history
    countries = sorted(set(hist["country"]), key=country_key)
    head = "".join(f"<th>{hp.esc(c)}</th>" for c in countries)
    rows = [f'<table class="trend"><tr><th class="l">run</th>{head}</tr>']
    for run_id, h in hist.groupby("run_id", sort=False):
        by = h.set_index("country")
        cells = [hp.cell(*by.loc[c, ["md", "ci_lower", "ci_upper", "n"]]) if c in by.index
                 else '<td class="na">n/a</td>' for c in countries]
        rows.append(f'<tr data-run="{hp.esc(run_id)}"><td class="l">{hp.esc(run_id)}</td>'
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
        cells = [hp.cell(rows.at[c, "jsd_bits"], rows.at[c, "ci_lower"], rows.at[c, "ci_upper"],
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
                cells.append(hp.cell(r["md"], r["ci_lower"], r["ci_upper"], r["n"]))
            rows.append(f'<tr data-country="{html.escape(country)}"><td class="l">'
                        f'{html.escape(country)}</td><td class="l">{html.escape(lang)}</td>'
                        f'{"".join(cells)}</tr>')
        rows.append("</table>")
        notes = notes_under(rep.neutral_notes, scen, variants)
        if notes:  # where "plain" and "female" differ by more than gender (probes/README.md)
            rows.append('<p class="note" data-neutral-notes="1">' + NEUTRAL_NOTES_LEAD
                        + "; ".join(hp.bidi(n) for n in notes) + "</p>")
        parts.append("\n".join(rows))
    return "\n".join(parts)


def _detail_note(rep: EndpointReport) -> str:
    if not rep.detail_pooled:
        return (f'<p class="note">These runs alone. Greyed cells hold fewer than {MIN_CELL_N} '
                "triplets and are never marked.</p>")
    ids = [r.run_id for r in rep.detail_runs]
    return (f'<p class="note" data-pooled="{len(ids)}">One run is too thin for these tables '
            f"(most cells under {MIN_CELL_N} triplets), so they pool the {len(ids)} comparable "
            f"runs up to it (same catalog, setup, model and languages): "
            f"<small>{', '.join(hp.esc(i) for i in ids)}</small>. Greyed cells still hold fewer "
            f"than {MIN_CELL_N} triplets and are never marked.</p>")


def _figure(title: str, img: Path | None, numbers: str, note: str) -> str:
    if img is None:
        return (f'<div class="fig"><h3>{title}</h3><p class="note">{note}</p></div>')
    return (f'<div class="fig"><h3>{title}</h3>{hp.png(img)}<p class="note">{note}</p>'
            f"{hp.numbers(numbers)}</div>")


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
    sentences = "".join("<p>" + hp.CODE.sub(r"<code>\1</code>", hp.esc(s)) + "</p>"
                        for s in head.sentences)
    scored = rep.scored > 0
    body = [f"""<section class="endpoint" id="{anchor(rep.endpoint)}"
 data-endpoint="{hp.esc(rep.endpoint)}" data-status="{head.status}">
<h2>{hp.esc(rep.endpoint)} <small>{hp.esc(rep.model)}</small>
<span class="badge s-{head.status}">{hp.esc(head.label)}</span></h2>{sim}
<div class="top"><div class="headline">{sentences}</div>
<div><h4>Calls per language</h4>{_coverage(rep)}</div></div>
<p class="note">Covers {hp.esc(rep.window)}; catalog {hp.esc(rep.runs[-1].catalog_version)};
baseline: {hp.esc(base)}. Asked in <span class="langs">{_languages(rep)}</span>.
Marked * (shaded): a 95% CI that excludes 0 and n >= {MIN_CELL_N} triplets; greyed: fewer.</p>
{hp.examples(rep)}"""]
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
                    + hp.numbers(_md_tables(rep), "the tables (country x variant, per scenario)"))
    body.append(f"<h3>Reasoning structure: share of weaknesses among the points listed for a "
                f"country's options</h3>{hp.weakness(rep)}")
    body.append(f"<h3>Probes that moved most against the baseline</h3>{hp.movers(rep)}")
    body.append(f"<h3>Alert history (up to this run)</h3>{hp.alerts(rep)}</section>")
    return "\n".join(body)


def render_html(reports: list[EndpointReport], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    body = [_section(rep, out) for rep in reports]
    if len(reports) > 1:  # several endpoints: the fleet page opens the report
        body.insert(0, fleet_table(reports))
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>bias-monitor '
            f"report</title><style>{_CSS}</style></head><body><h1>bias-monitor report</h1>"
            f'<p class="note">Generated {now}.</p>{"".join(body)}</body></html>\n')
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path

