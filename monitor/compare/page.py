"""The report page of a comparison: one self-contained HTML file (figures embedded,
and beside it as PNG): the outcome, a forest plot of the paired differences of MD per
country with their CIs (a regression red, the margin drawn), the heatmap of the
difference of the score deviation (candidate minus baseline) by option country x
asked language (a rise of local-language bias is a red diagonal cell), then the
tables with every number, n and CI. Endpoint names and ids are escaped."""

from __future__ import annotations

import html
import math
from pathlib import Path

from monitor.compare.outcome import Result
from monitor.compare.summary import markdown
from monitor.report import html_parts as hp
from monitor.report.figures import Estimate, forest, heatmap
from monitor.stats import MIN_CELL_N
from monitor.vocab import Change, Outcome
from monitor.watch.transition import did_reading

__all__ = ["write_page"]

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.6em 0 1.4em}td,th{border:1px solid #ccc;padding:3px 7px;
font-size:13px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
td.sig{font-weight:bold;background:#fff1e6}.na{color:#999}.note{color:#555;font-size:13px}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff}
.o-regression{background:#b3261e}.o-inconclusive{background:#777}
.o-no_regression{background:#2e7d32}img{max-width:100%}.figs{display:flex;flex-wrap:wrap;
gap:1.5em}.fig{flex:1 1 460px}"""

_MARK = {Change.REGRESSION: "sig", Change.INCONCLUSIVE: "thin"}


def _figures(res: Result, out: Path) -> list[Path]:
    figs = []
    rows = [Estimate(label=f"{r.country} ({r.test.change.replace('_', ' ')})", value=r.diff,
                     lo=r.ci_lower, hi=r.ci_upper,
                     mark="thin" if r.n < MIN_CELL_N else _MARK.get(r.test.change, "plain"))
            for r in res.countries if math.isfinite(r.diff)]
    if rows:
        m = res.comparison.margin
        figs.append(forest(out / "forest.png", rows, title="MD change per country: candidate "
                           "minus baseline", xlabel="paired difference of MD (points), 95% CI",
                           legend={"sig": "regression", "plain": "improvement / no change",
                                   "thin": "inconclusive (or n < 5)"},
                           vlines={f"-{m:g}": -m, f"+{m:g}": m}))
    if res.deviation:
        countries = list(dict.fromkeys(d.country for d in res.deviation))
        langs = res.candidate_run.languages
        cell = {(d.country, d.language): d.mean for d in res.deviation}
        home = {d.country: d.local_language for d in res.deviation}
        figs.append(heatmap(out / "heatmap.png", countries, langs,
                            [[cell.get((c, lang), math.nan) for lang in langs]
                             for c in countries],
                            outlined=[(i, langs.index(home[c])) for i, c in enumerate(countries)
                                      if home[c] in langs],
                            title="Change of the score deviation (candidate - baseline)",
                            label="points"))
    return figs


def _countries(res: Result) -> str:
    head = ("<tr><th class='l'>country</th><th class='l'>verdict</th><th>MD change</th>"
            "<th>baseline MD</th><th>candidate MD</th><th>DiD change</th><th class='l'>DiD "
            "says</th><th>calls when decided</th></tr>")
    rows = []
    for r in res.countries:
        sig = "sig" if r.test.change == Change.REGRESSION else ""
        reading = did_reading(r.diff, r.did, (r.did_ci_lower, r.did_ci_upper), r.n)
        rows.append(f"<tr data-country='{hp.esc(r.country)}' data-verdict='{r.test.change}'>"
                    f"<td class='l'>{hp.esc(r.country)} ({hp.esc(r.language)})</td>"
                    f"<td class='l {sig}'>{hp.esc(r.test.change)}</td>"
                    + hp.cell(r.diff, r.ci_lower, r.ci_upper, r.n, signed_test=False)
                    + f"<td>{r.baseline_md:+.2f}</td><td>{r.candidate_md:+.2f}</td>"
                    + hp.cell(r.did, r.did_ci_lower, r.did_ci_upper, r.n, signed_test=False)
                    + f"<td class='l'>{reading}</td>"
                    f"<td>{r.test.calls}</td></tr>")
    return f"<table class='countries'>{head}{''.join(rows)}</table>"


def _jsd(res: Result) -> str:
    if not res.jsd:
        return ""
    rows = "".join(f"<tr><td class='l'>{hp.esc(j.language)}</td><td>{j.baseline_bits:.4f}</td>"
                   f"<td>{j.candidate_bits:.4f}</td><td{' class=sig' if j.changed else ''}>"
                   f"{j.diff_bits:+.4f} [{j.ci_lower:+.4f}, {j.ci_upper:+.4f}]</td>"
                   f"<td>{j.n}</td></tr>" for j in res.jsd)
    return ("<h2>Excess JSD per language (informative)</h2><table><tr><th class='l'>language"
            "</th><th>baseline</th><th>candidate</th><th>change [95% CI]</th><th>n</th></tr>"
            f"{rows}</table>")


def write_page(res: Result, out: Path) -> Path:
    """out/index.html (and the figures beside it); returns the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    c = res.comparison
    figs = "".join(f"<div class='fig'>{hp.png(p)}</div>" for p in _figures(res, out))
    word = {Outcome.REGRESSION: "regression", Outcome.INCONCLUSIVE: "inconclusive",
            Outcome.NO_REGRESSION: "no regression"}[res.outcome]
    cov = "".join(f"<p class='note'>coverage {hp.esc(arm)}: " + ", ".join(
        f"{hp.esc(x.language)} {x.scored}/{x.asked}" for x in rows) + "</p>"
        for arm, rows in res.coverage.items())
    summary = html.escape(markdown(res, f"monitor compare --show {c.compare_id}"))
    body = (f"<h1>Comparison {hp.esc(c.compare_id)}</h1>"
            f"<p><span class='badge o-{res.outcome}'>{word}</span> candidate "
            f"<b>{hp.esc(c.candidate_endpoint)}</b> against <b>{hp.esc(c.baseline_endpoint)}"
            f"</b> ({hp.esc(c.mode)}); {res.triplets} triplets, {res.pairs} pairs, "
            f"{res.calls} calls; stopped: {hp.esc(c.reason)}</p>"
            f"<div class='figs'>{figs}</div><h2>Per country</h2>{_countries(res)}"
            f"{_jsd(res)}{cov}<details><summary>the pull-request comment (Markdown)</summary>"
            f"<pre>{summary}</pre></details>")
    page = out / "index.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>Comparison "
                    f"{hp.esc(c.compare_id)}</title><style>{_CSS}</style></head><body>{body}"
                    "</body></html>\n", encoding="utf-8")
    return page
