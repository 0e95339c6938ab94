"""`monitor report --format md`: the report's content in Markdown, for a PR or chat.

The same order as the page: the headline and the calls per language, then
the numbers behind each figure, the tables and the evidence. Model text and
option names are untrusted: every cell goes through _md_cell, so nothing from
an answer can add a table column, a link or markup.
"""

from __future__ import annotations

import re
from typing import Any

from monitor.config import schema_advice
from monitor.report.build import EndpointReport, own_run
from monitor.report.common import (
    NEUTRAL_NOTES_LEAD,
    VARIANT_TITLES,
    country_key,
    jsd_star,
    notes_under,
    stat,
)
from monitor.stats import MIN_CELL_N
from monitor.vocab import POOLED

__all__ = ["render_markdown"]


# Every character that can start markup inline or in a table cell (CommonMark, GFM):
# each is escaped with a backslash, which renders it as itself; no HTML entity, so the
# raw text reads as well as the rendered one.
_MARKUP = re.compile(r"([\\`*_\[\]<>|&~!])")
# At the start of a line (the quoted answers): a heading, list, quote or rule, or an
# ordered list's number (its delimiter is escaped: a backslash before a digit is text).
_LINE_START = re.compile(r"^(\s*)([#>+=-])|^(\s*\d+)([.)])")
_CODE = re.compile(r"(`[^`]+`)")


def _md_cell(text: Any) -> str:
    """Untrusted text (a model's answer, an option name) as plain Markdown text, also in
    a table cell: markup characters escaped, no line breaks."""
    flat = " ".join(str(text).splitlines())
    return _LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[2] is not None else
                           f"{m[3]}\\{m[4]}", _MARKUP.sub(r"\\\1", flat))


def _md_prose(text: str) -> str:
    """The monitor's own sentences: `x` in them is a command or key to type, kept as code;
    the rest is escaped like data."""
    return "".join(part if _CODE.fullmatch(part) else _md_cell(part)
                   for part in _CODE.split(text))


def _md_stat(value: Any, lo: Any, hi: Any, n: Any, fmt: str = "{:+.2f}",
             test: bool = True, sig: bool | None = None) -> str:
    """Value [CI] n; bold when significant, italic when under the minimum n (never bold)."""
    st = stat(value, lo, hi, n, test=test, sig=sig)
    if st is None:
        return "n/a"
    text = f"{fmt.format(st.value)}{st.ci(fmt, '')} n={st.n}"
    if st.thin:
        return f"_{text}_"
    return f"**{text}**" if st.sig else text


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|---" * len(head) + "|",
            *("| " + " | ".join(r) + " |" for r in rows), ""]


def _headline(rep: EndpointReport) -> list[str]:
    head = rep.headline
    assert head is not None
    lines = [f"**{head.label}.** " + " ".join(_md_prose(s) for s in head.sentences), "",
             "Calls per language:", ""]
    cols = ["asked", "scored", "unparseable", "refused", "failed"]
    lines += _table(["language", *cols], [[_md_cell(r["language"]), *(str(int(r[c]))
                                                                      for c in cols)]
                                          for r in rep.coverage.to_dict("records")])
    for e in rep.examples:
        lines += [f"An answer that could not be read ({e.status}, {e.language}"
                  f"{': ' + _md_cell(e.detail) if e.detail else ''}):", ""]
        lines += ["> " + _md_cell(line) for line in e.text[:600].splitlines() if line.strip()]
        lines.append("")
    if rep.examples:
        advice = schema_advice(rep.model)  # our text, not data: no escaping
        lines += [advice[0].upper() + advice[1:] + ".", ""]
    return lines


def _forest(rep: EndpointReport) -> list[str]:
    md = rep.md[(rep.md["scenario"] == POOLED) & (rep.md["variant"] == POOLED)]
    base = ({} if rep.baseline_md is None or rep.baseline_md.empty else
            {r["country"]: r for r in rep.baseline_md[rep.baseline_md["scenario"] == POOLED]
             .to_dict("records")})
    rows = []
    for r in sorted(md.to_dict("records"), key=lambda r: country_key(r["country"])):
        b = base.get(r["country"])
        rows.append([r["country"], _md_stat(r["md"], r["ci_lower"], r["ci_upper"], r["n"]),
                     _md_stat(b["md"], b["ci_lower"], b["ci_upper"], b["n"]) if b else "n/a",
                     _md_stat(r["did"], r["did_ci_lower"], r["did_ci_upper"], r["n"])])
    return ["### MD per country (points, pooled scenarios, 95% CI, n triplets)", "",
            *_table(["country", "these runs", "baseline", "DiD"], rows)]


def _deviation(rep: EndpointReport) -> list[str]:
    dev = rep.deviation
    if dev.empty:
        return []
    rows = []
    for country in sorted(set(dev["country"]), key=country_key):
        sub = dev[dev["country"] == country].set_index("language")
        rows.append([country, *(_md_stat(*sub.loc[lang, ["mean", "ci_lower", "ci_upper", "n"]])
                                + (" (own)" if sub.loc[lang, "local_language"] == lang else "")
                                if lang in sub.index else "n/a" for lang in rep.languages)])
    return ["### Score deviation by option country x asked language (points; own: the "
            "country's language, where it equals MD)", "",
            *_table(["country", *rep.languages], rows)]


def _jsd(rep: EndpointReport) -> list[str]:
    lines = ["### JSD (excess bits, 95% CI, n triplets; bold: permutation p < 0.05)", ""]
    rows = []
    for scen in [s for s in [*sorted(set(rep.jsd["scenario"]) - {"all"}), "all"]
                 if s in set(rep.jsd["scenario"])]:
        by = rep.jsd[rep.jsd["scenario"] == scen].set_index("language")
        rows.append([_md_cell(scen), *(_md_stat(by.at[c, "jsd_bits"], by.at[c, "ci_lower"],
                                                by.at[c, "ci_upper"], by.at[c, "n"], "{:.3f}",
                                                sig=jsd_star(by.at[c, "p_value"], by.at[c, "n"]))
                                       if c in by.index else "n/a"
                                       for c in [*rep.languages, "overall"])])
    return [*lines, *_table(["scenario", *rep.languages, "overall"], rows)]


def _details(rep: EndpointReport) -> list[str]:
    md = rep.detail_md
    if md.empty:
        return []
    pooled = (f"; pooled over {len(rep.detail_runs)} comparable runs up to this one (one run "
              f"is too thin): {', '.join(r.run_id for r in rep.detail_runs)}"
              if rep.detail_pooled else "")
    lines = [f"### MD by scenario and variant{_md_cell(pooled)}", ""]
    variants = [v for v in VARIANT_TITLES if v in set(md["variant"])]
    for scen in [s for s in ["all", *sorted(set(md["scenario"]) - {"all"})]
                 if s in set(md["scenario"])]:
        sub = md[md["scenario"] == scen]
        rows = []
        for country in sorted(set(sub["country"]), key=country_key):
            cells = []
            for v in variants:
                hit = sub[(sub["variant"] == v) & (sub["country"] == country)]
                cells.append("n/a" if hit.empty else _md_stat(*hit.iloc[0][
                    ["md", "ci_lower", "ci_upper", "n"]]))
            rows.append([country, *cells])
        lines += [f"Scenario {_md_cell(scen)}:", "",
                  *_table(["country", *(VARIANT_TITLES[v] for v in variants)], rows)]
        notes = notes_under(rep.neutral_notes, scen, variants)
        if notes:  # where "plain" and "female" differ by more than gender (probes/README.md)
            lines += [NEUTRAL_NOTES_LEAD + "; ".join(_md_cell(n) for n in notes), ""]
    return lines


def _weakness(rep: EndpointReport) -> list[str]:
    lines = ["### Weakness share (local language vs other languages)", ""]
    if rep.weakness.empty:
        return [*lines, f"No weakness shares: {_md_cell(rep.weakness_note)}.", ""]
    rows = []
    for r in rep.weakness.to_dict("records"):
        cells = [_md_stat(r[f"share_{p}"], r[f"{p}_lower"], r[f"{p}_upper"], r["n"],
                          "{:.3f}", False) for p in ("local", "foreign")]
        cells.append(_md_stat(r["diff"], r["diff_lower"], r["diff_upper"], r["n"], "{:+.3f}"))
        rows.append([r["country"], *cells])
    return [*lines, *_table(["country", "local", "other", "local - other"], rows)]


def _evidence(rep: EndpointReport) -> list[str]:
    lines: list[str] = []
    if rep.movers:
        rows = [[_md_cell(m.name_en) + (f" ({_md_cell(m.name_local)})"
                                        if m.name_local != m.name_en else ""),
                 _md_cell(m.scenario), m.language, f"{m.old:.2f} (mean of {m.n_old})",
                 f"{m.new:.2f} (mean of {m.n_new})"] for m in rep.movers]
        lines += ["### Moved most against the baseline", "",
                  *_table(["option", "scenario", "asked in", "baseline", "now"], rows)]
    lines += ["### Alert history (up to this run)", ""]
    if not rep.alerts:
        return [*lines, "No alert state changes in this window.", ""]
    rows = []
    for a in rep.alerts:
        st = rep.alert_md.get((own_run(a.run_id), a.scenario, a.country))
        rows.append([_md_cell(str(a.event_at)[:16]), _md_cell(f"{a.scenario} / {a.country}"),
                     _md_cell(f"{a.from_state} -> {a.to_state}"),
                     _md_stat(st.value, st.ci_lower, st.ci_upper, st.n or 0) if st else "-",
                     _md_cell(a.reason or "")])
    return [*lines, *_table(["time", "cell", "change", "MD of the run", "reason"], rows)]


def render_markdown(reports: list[EndpointReport]) -> str:
    lines = ["# bias-monitor report", ""]
    for rep in reports:
        sim = " (simulated endpoint)" if rep.simulated else ""
        lines += [f"## {_md_cell(rep.endpoint)}: {_md_cell(rep.model)}{sim}", "",
                  f"Covers {_md_cell(rep.window)}. Bold: the 95% CI excludes 0 (n >= "
                  f"{MIN_CELL_N}); italic: fewer than {MIN_CELL_N} triplets, never bold (a "
                  "scenario cell that thin takes its country's pooled spread for its CI).", "",
                  *_headline(rep)]
        if rep.scored:
            lines += [*_forest(rep), *_deviation(rep), *_jsd(rep), *_details(rep)]
        lines += [*_weakness(rep), *_evidence(rep)]
    return "\n".join(lines) + "\n"
