"""MD and DiD: the local-language bias of a country, with t-intervals (docs/statistics.md).

For a unit i (one triplet of one run, answered in all L languages) holding
options of country C, with s[l, j] the score of option j asked in language l:

    d_i = mean over C's options j of (s[loc(C), j] - mean_l s[l, j])
    e_i = d_i - (the same mean over the unit's other options)     (DiD)
    MD_C = mean_i d_i,  DiD_C = mean_i e_i,  95% t-interval, n = units with a C option.

A positive MD means C's options score higher when asked in C's language than
on average over all languages; DiD tells bias (C's options move against the
others asked in the same language) from a language-wide leniency (all move).
Cells per scenario and pooled ("all": every unit of every scenario). The sums
come exact from DuckDB (monitor.store.inputs); this kernel turns them into
estimates, for one run or many (one group each).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from monitor.stats.units import t_interval
from monitor.store import MDSums
from monitor.vocab import POOLED

__all__ = ["MDRow", "local_pairs", "md_rows"]


@dataclass(frozen=True)
class MDRow:
    """MD and DiD of one cell (group, scenario, country)."""

    scenario: str  # a scenario, or "all"
    country: str
    language: str  # the country's local language
    md: float
    ci_lower: float  # NaN when n < 2
    ci_upper: float
    se: float
    n: int  # units (triplets) containing an option of the country
    did: float
    did_ci_lower: float
    did_ci_upper: float
    group: str = "pooled"  # the run id, when computed per run


def local_pairs(languages: Sequence[str], local_countries: Mapping[str, Sequence[str]]
                ) -> list[tuple[str, str]]:
    """(country, local language) of every country whose language is asked, in the
    order of the asked languages and of languages.yaml."""
    return [(c, lang) for lang in languages for c in local_countries.get(lang, ())]


def md_rows(sums: MDSums, local: Sequence[tuple[str, str]]) -> list[MDRow]:
    """The cells, ordered by group (sorted: run ids sort by time), country (as
    `local`), then scenario (sorted, the pooled cell last)."""
    if sums.n.size == 0:
        return []
    n = sums.n.astype(float)
    scale = sums.scale
    md = sums.sum_d / (n * scale)
    var = np.where(n >= 2, sums.var_d / np.maximum(n * (n - 1), 1) / scale**2, math.nan)
    se, lo, hi = t_interval(n, md, var)
    ne = sums.n_e.astype(float)
    did = np.where(ne > 0, sums.sum_e / np.maximum(ne, 1) / scale, math.nan)
    var_e = np.where(ne >= 2, sums.var_e / np.maximum(ne * (ne - 1), 1) / scale**2, math.nan)
    _, dlo, dhi = t_interval(ne, did, var_e)
    order = {c: i for i, (c, _) in enumerate(local)}
    lang = dict(local)
    group, country, scen = (a.tolist() for a in (sums.group, sums.country, sums.scenario))
    pooled = sums.pooled.tolist()
    groups = {g: i for i, g in enumerate(sorted(set(group)))}
    keys = sorted(range(n.size), key=lambda i: (groups[group[i]], order[country[i]], pooled[i],
                                                 scen[i]))
    return [MDRow(POOLED if pooled[i] else str(scen[i]), str(country[i]), lang[country[i]],
                  float(md[i]), float(lo[i]), float(hi[i]), float(se[i]), int(sums.n[i]),
                  float(did[i]), float(dlo[i]), float(dhi[i]), str(group[i])) for i in keys]
