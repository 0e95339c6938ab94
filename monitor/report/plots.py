"""The report's figures from its data: which numbers go in which picture.

figures.py draws (the only matplotlib user); this module decides what is
drawn and how each point is marked, with the same rules as the tables:
significant (stats.rules) in red with *, under MIN_CELL_N hollow grey.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from monitor.report.build import EndpointReport
from monitor.report.common import country_key, jsd_star, slug
from monitor.report.figures import Estimate, Panel, forest, heatmap, trend_panels
from monitor.stats import MIN_CELL_N, OVERALL, nullable, significant
from monitor.vocab import POOLED

__all__ = ["Figures", "figures"]


@dataclass(frozen=True)
class Figures:
    forest: Path | None
    heatmap: Path | None
    trend: Path | None
    jsd: Path | None


def _f(x: Any) -> float:
    v = nullable(x)
    return math.nan if v is None else v


def _md_estimate(label: str, r: Mapping[Any, Any], md: str = "md", lo: str = "ci_lower",
                 hi: str = "ci_upper") -> Estimate:
    n = int(r["n"])
    mark = ("thin" if n < MIN_CELL_N else
            "sig" if significant(nullable(r[lo]), nullable(r[hi]), n) else "plain")
    return Estimate(label, _f(r[md]), _f(r[lo]), _f(r[hi]), mark)


def _forest(rep: EndpointReport, path: Path) -> Path | None:
    md = rep.md[(rep.md["scenario"] == POOLED) & (rep.md["variant"] == POOLED)]
    if md.empty:
        return None
    rows = sorted(md.to_dict("records"), key=lambda r: country_key(r["country"]))
    ests = [_md_estimate(f"{r['country']} (n={r['n']})", r) for r in rows]
    ref = {}
    if rep.baseline_md is not None and not rep.baseline_md.empty:
        base = {r["country"]: r for r in rep.baseline_md[rep.baseline_md["scenario"] == POOLED]
                .to_dict("records")}
        for e, r in zip(ests, rows, strict=True):
            if (b := base.get(r["country"])) is not None:
                ref[e.label] = _md_estimate(e.label, b)
    return forest(path, ests, reference=ref, title="MD per country (pooled scenarios)",
                  xlabel="MD (points): local language minus all languages")


def _heatmap(rep: EndpointReport, path: Path) -> Path | None:
    dev = rep.deviation
    if dev.empty:
        return None
    countries = sorted(set(dev["country"]), key=country_key)
    cell = {(r["country"], r["language"]): r for r in dev.to_dict("records")}
    values = [[_f(cell[(c, lang)]["mean"]) if (c, lang) in cell else math.nan
               for lang in rep.languages] for c in countries]
    home = {r["country"]: r["local_language"] for r in dev.to_dict("records")}
    own = [(i, rep.languages.index(home[c])) for i, c in enumerate(countries)
           if home[c] in rep.languages]
    return heatmap(path, countries, rep.languages, values, outlined=own,
                   title="Mean score deviation (points)", label="points vs mean over languages")


def _trend(rep: EndpointReport, path: Path) -> Path | None:
    hist = rep.history
    if hist.empty:
        return None
    runs = list(dict.fromkeys(hist["run_id"]))
    labels = [pd.Timestamp(t).strftime("%m-%d %H:%M") for t in
              hist.drop_duplicates("run_id")["started_at"]]
    if len(set(labels)) < len(labels):  # runs minutes apart (tests, ad hoc): number them
        labels = [f"run {i + 1}" for i in range(len(labels))]
    base = ({} if rep.baseline_md is None or rep.baseline_md.empty else
            {r["country"]: (_f(r["md"]), _f(r["ci_lower"]), _f(r["ci_upper"]))
             for r in rep.baseline_md[rep.baseline_md["scenario"] == POOLED].to_dict("records")})
    panels = {}
    for country in sorted(set(hist["country"]), key=country_key):
        h = hist[hist["country"] == country]
        points = [(runs.index(r["run_id"]), _md_estimate(country, r))
                  for r in h.to_dict("records") if nullable(r["md"]) is not None]
        spans = [(runs.index(p.start_run),
                  runs.index(p.end_run) - 1 if p.end_run in runs else len(runs) - 1, p.state)
                 for p in rep.periods if p.country == country and p.start_run in runs]
        panels[country] = Panel(points, base.get(country), [s for s in spans if s[1] >= s[0]])
    return trend_panels(path, panels, title="MD over time per country (own scale; band: 95% "
                        "CI; blue: baseline; shaded: alert)", ylabel="MD (points)",
                        xlabels=labels)


def _jsd(rep: EndpointReport, path: Path) -> Path | None:
    jsd = rep.jsd[rep.jsd["scenario"] == POOLED] if "scenario" in rep.jsd else rep.jsd
    if jsd.empty:
        return None
    by = jsd.set_index("language")
    ests = []
    for lang in [*rep.languages, OVERALL]:
        if lang not in by.index:
            continue
        r = by.loc[lang].to_dict()
        n = int(r["n"])
        mark = ("thin" if n < MIN_CELL_N else
                "sig" if jsd_star(r["p_value"], n) else "plain")
        ests.append(Estimate(f"{lang} (n={n})", _f(r["jsd_bits"]), _f(r["ci_lower"]),
                             _f(r["ci_upper"]), mark))
    return forest(path, ests, title="Excess JSD per language (pooled scenarios)",
                  xlabel="bits over the permutation null")


def figures(rep: EndpointReport, out: Path) -> Figures:
    """Every figure of an endpoint's report, written as PNG into `out` (None: no data)."""
    s = slug(rep.endpoint)
    return Figures(_forest(rep, out / f"{s}-md.png"), _heatmap(rep, out / f"{s}-deviation.png"),
                   _trend(rep, out / f"{s}-md-trend.png"), _jsd(rep, out / f"{s}-jsd.png"))
