"""`monitor report --format md`: the report's tables in Markdown, for a PR or chat.

Model text and option names are untrusted: every cell goes through _md_cell,
so nothing from an answer can add a table column, a link or markup.
"""

from __future__ import annotations

import html
from typing import Any

from monitor.report.build import EndpointReport
from monitor.report.common import VARIANT_TITLES, country_key, jsd_star
from monitor.stats import MIN_CELL_N, nullable, significant

__all__ = ["render_markdown"]


def _md_cell(text: Any) -> str:
    """Markdown table cell: no pipes, backticks, angle brackets or line breaks from data."""
    return (html.escape(str(text)).replace("|", "&#124;").replace("`", "&#96;")
            .replace("\n", " ").replace("[", "&#91;"))


def _md_stat(value: Any, lo: Any, hi: Any, n: Any, fmt: str = "{:+.2f}",
             test: bool = True, sig: bool | None = None) -> str:
    v, a, b = nullable(value), nullable(lo), nullable(hi)
    if v is None:
        return "n/a"
    if sig is None:
        sig = test and significant(a, b, int(n))
    star = "**" if sig else ""
    ci = f" [{fmt.format(a)}, {fmt.format(b)}]" if a is not None and b is not None else ""
    return f"{star}{fmt.format(v)}{star}{ci} n={int(n)}"


def render_markdown(reports: list[EndpointReport]) -> str:
    lines = ["# bias-monitor report", ""]
    for rep in reports:
        sim = " (simulated endpoint)" if rep.simulated else ""
        lines += [f"## {_md_cell(rep.endpoint)}: {_md_cell(rep.model)}{sim}", "",
                  f"Covers {_md_cell(rep.window)}. Bold: the 95% CI excludes 0 "
                  f"(n >= {MIN_CELL_N}).", "",
                  "### JSD (excess bits, 95% CI, n triplets; bold: permutation p < 0.05)", "",
                  "| scenario | " + " | ".join([*rep.languages, "overall"]) + " |",
                  "|---" * (len(rep.languages) + 2) + "|"]
        for scen in [s for s in [*sorted(set(rep.jsd["scenario"]) - {"all"}), "all"]
                     if s in set(rep.jsd["scenario"])]:
            rows = rep.jsd[rep.jsd["scenario"] == scen].set_index("language")
            cells = [_md_stat(rows.at[c, "jsd_bits"], rows.at[c, "ci_lower"],
                              rows.at[c, "ci_upper"], rows.at[c, "n"], "{:.3f}",
                              sig=jsd_star(rows.at[c, "p_value"], rows.at[c, "n"]))
                     if c in rows.index else "n/a" for c in [*rep.languages, "overall"]]
            lines.append(f"| {scen} | " + " | ".join(cells) + " |")
        variants = [v for v in VARIANT_TITLES if v in set(rep.md["variant"])]
        sub = rep.md[rep.md["scenario"] == "all"]
        lines += ["", "### MD, pooled scenarios (points, 95% CI, n triplets)", "",
                  "| country | " + " | ".join(VARIANT_TITLES[v] for v in variants) + " |",
                  "|---" * (len(variants) + 1) + "|"]
        for country in sorted(set(sub["country"]), key=country_key):
            cells = []
            for v in variants:
                hit = sub[(sub["variant"] == v) & (sub["country"] == country)]
                cells.append("n/a" if hit.empty else _md_stat(*hit.iloc[0][
                    ["md", "ci_lower", "ci_upper", "n"]]))
            lines.append(f"| {country} | " + " | ".join(cells) + " |")
        lines += ["", "### Weakness share (local language vs other languages)", "",
                  "| country | local | other | local - other |", "|---|---|---|---|"]
        for r in rep.weakness.to_dict("records"):
            cells = [_md_stat(r[f"share_{p}"], r[f"{p}_lower"], r[f"{p}_upper"], r["n"],
                              "{:.3f}", False) for p in ("local", "foreign")]
            cells.append(_md_stat(r["diff"], r["diff_lower"], r["diff_upper"], r["n"], "{:+.3f}"))
            lines.append(f"| {r['country']} | " + " | ".join(cells) + " |")
        if rep.movers:
            lines += ["", "### Moved most against the baseline", "",
                      "| option | language | baseline | now |", "|---|---|---|---|"]
            lines += [f"| {_md_cell(m.name_en)} ({_md_cell(m.name_local)}) | {m.language} | "
                      f"{m.old:.2f} | {m.new:.2f} |" for m in rep.movers]
        lines.append("")
    return "\n".join(lines) + "\n"
