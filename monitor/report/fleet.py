"""The fleet page: one table opening a report of several endpoints (every endpoint in
the store, e.g. a platform's assistants sharing one PostgreSQL store), endpoints x
countries: each endpoint's status and last run, each cell's pooled MD with its CI
and its drift state; each endpoint's name links to its section below."""

from __future__ import annotations

from monitor.report import html_parts as hp
from monitor.report.build import EndpointReport
from monitor.report.common import country_key, slug
from monitor.vocab import POOLED

__all__ = ["anchor", "fleet_table"]


def anchor(endpoint: str) -> str:
    """The id of an endpoint's section, which the fleet table links to."""
    return f"endpoint-{slug(endpoint)}"


def fleet_table(reports: list[EndpointReport]) -> str:
    pooled = {rep.endpoint: rep.md[(rep.md["scenario"] == POOLED) & (rep.md["variant"] == POOLED)]
              for rep in reports}
    countries = sorted({c for md in pooled.values() for c in md["country"]}, key=country_key)
    head = "".join(f"<th>{hp.esc(c)}</th>" for c in countries)
    rows = ['<section class="fleet"><h2>Fleet</h2><p class="note">Every endpoint of this '
            "report: its status and last run, then per country the pooled MD of its "
            "reported runs with its 95% CI (* significant) and the cell's drift state.</p>"
            '<table class="fleet"><tr><th class="l">endpoint</th><th class="l">status</th>'
            f'<th class="l">last run</th>{head}</tr>']
    for rep in reports:
        assert rep.headline is not None
        last = rep.runs[-1]
        at = last.finished_at or last.started_at
        by_country = {r["country"]: r for r in pooled[rep.endpoint].to_dict("records")}
        cells = []
        for c in countries:
            r = by_country.get(c)
            state = rep.states.get((POOLED, c), ("ok", None))[0]
            cells.append('<td class="na">n/a</td>' if r is None else hp.cell(
                r["md"], r["ci_lower"], r["ci_upper"], r["n"], extra=f"drift-{state}")
                .replace("</small></td>", f" {hp.esc(state)}</small></td>"))
        rows.append(f'<tr data-endpoint="{hp.esc(rep.endpoint)}"><td class="l">'
                    f'<a href="#{anchor(rep.endpoint)}">{hp.esc(rep.endpoint)}</a></td>'
                    f'<td class="l"><span class="badge s-{rep.headline.status}">'
                    f'{hp.esc(rep.headline.label)}</span></td><td class="l">'
                    f'{hp.esc(str(at)[:16])}</td>{"".join(cells)}</tr>')
    return "\n".join([*rows, "</table></section>"])
