"""MD and DiD: the local-language bias of a country, with t-intervals (docs/statistics.md).

For a unit i (one triplet of one run; its missing answers filled by
monitor.stats.missing) holding options of country C read in C's language, with
s[l, j] the score of option j asked in language l:

    d_i = mean over C's options j of (s[loc(C), j] - mean_l s[l, j])
    e_i = d_i - (the same mean over the unit's other options)     (DiD)
    MD_C = mean_i d_i,  DiD_C = mean_i e_i,  95% t-interval, n = units with a C option.

A positive MD means C's options score higher when asked in C's language than
on average over all languages; DiD tells bias (C's options move against the
others asked in the same language) from a language-wide leniency (all move).
Cells per scenario and pooled ("all": every unit of every scenario), for one
run or many (one group each). A per-scenario cell of fewer than MIN_CELL_N
units takes its pooled cell's variance (and degrees of freedom) for its
interval. Scores are integers (hundredths of a point) and each difference
is scaled by 6 L 100 (k, the unit's options of the country, and 3 - k
divide 6), so every sum is an exact integer: the estimate does not
depend on the order of summation, nor on what a run is batched with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from monitor.stats.rules import MIN_CELL_N
from monitor.stats.units import t_interval
from monitor.store import UnitScores
from monitor.vocab import POOLED

__all__ = ["MDRow", "local_pairs", "md_rows", "unit_d"]


@dataclass(kw_only=True, frozen=True)
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


def _sums(key: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Exact int64 sums of `values` per distinct `key` (sorted keys)."""
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else k
    return k[starts] if k.size else k, [np.add.reduceat(v[order], starts) if k.size else v
                                        for v in values]


def _mean_var(n: np.ndarray, s1: np.ndarray, s2: np.ndarray,
              scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample variance of the scaled integers; n s2 - s1^2 in Python's exact ints."""
    mean = np.where(n > 0, s1 / np.maximum(n, 1) / scale, math.nan)
    num = np.array([float(int(a) * int(b) - int(c) * int(c)) for a, b, c in zip(n, s2, s1,
                                                                                 strict=True)])
    var = np.where(n >= 2, num / np.maximum(n * (n - 1.0), 1) / scale**2, math.nan)
    return mean, var


def _diffs(units: UnitScores, local: Sequence[tuple[str, str]]
           ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per local pair ci with units: (ci, the units holding the country (mask), their d
    and e as exact integers scaled by 6 L 100, the unit's options of other countries)."""
    n_l = units.scores.shape[1]
    lang_index = {lang: i for i, lang in enumerate(units.languages)}
    total = units.scores.sum(axis=1)  # (u, 3): each option's sum over languages
    code = {c: i for i, c in enumerate(units.countries)}
    out = []
    for ci, (country, lang) in enumerate(local):
        if country not in code or lang not in lang_index:
            continue
        # An option counts where its local-language answer and another were read (the
        # rest of its row is filled: monitor.stats.missing).
        usable = units.answered[:, lang_index[lang], :] & (units.answered.sum(axis=1) >= 2)
        mine = (units.country == code[country]) & usable  # (u, 3)
        other = (units.country != code[country]) & usable
        k = mine.sum(axis=1)
        has = k > 0
        if not has.any():
            continue
        nv = n_l * units.scores[:, lang_index[lang], :] - total  # (u, 3)
        a = (nv * mine).sum(axis=1)[has]
        b = (nv * other).sum(axis=1)[has]
        kk, m = k[has], other.sum(axis=1)[has]
        d = a * (6 // kk)
        e = np.where(m > 0, d - b * (6 // np.maximum(m, 1)), 0)
        out.append((ci, has, d, e, m))
    return out


def unit_d(units: UnitScores, local: Sequence[tuple[str, str]]
           ) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per local pair ci with units: (ci, the indices of the units holding the country,
    their d in points), as md_rows averages them."""
    scale = 6.0 * units.scores.shape[1] * 100
    return [(ci, np.flatnonzero(has), d / scale) for ci, has, d, _, _ in _diffs(units, local)]


def _borrow(n: np.ndarray, var: np.ndarray, dof: np.ndarray, pooled_n: np.ndarray,
            pooled_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A per-scenario cell under MIN_CELL_N units takes its pooled cell's variance and
    degrees of freedom: two or three discrete differences give a spread of ~0 by
    chance (a zero-width CI on n = 2), and none at all on n = 1; the pooled cell holds
    the same country's units of every scenario."""
    thin = (n < MIN_CELL_N) & (pooled_n > n) & (pooled_n >= 2)
    return np.where(thin, pooled_var, var), np.where(thin, pooled_n - 1.0, dof)


def md_rows(units: UnitScores, local: Sequence[tuple[str, str]]) -> list[MDRow]:
    """The cells, ordered by group (sorted: run ids sort by time), country (as
    `local`), then scenario (sorted, the pooled cell last)."""
    n_u, n_l, _ = units.scores.shape
    if n_u == 0:
        return []
    scale = 6.0 * n_l * 100
    n_scen = len(units.scenarios) + 1  # the last: pooled
    rows: list[MDRow] = []
    parts = []
    for ci, has, d, e, m in _diffs(units, local):
        g, sc = units.group[has].astype(np.int64), units.scenario[has].astype(np.int64)
        for scen in (sc, np.full(sc.size, n_scen - 1)):  # per scenario, then pooled
            key = (g * n_scen + scen) * len(local) + ci
            parts.append(_sums(key, np.ones_like(d), d, d * d, (m > 0).astype(np.int64),
                               e, e * e))
    # Each cell's mean and variance once: a pooled cell's also serve its thin scenarios.
    cells = [(key, n, ne, *_mean_var(n, s1, s2, scale), *_mean_var(ne, e1, e2, scale))
             for key, (n, s1, s2, ne, e1, e2) in parts]
    for j, (key, n, ne, md, var, did, var_e) in enumerate(cells):
        dof, dof_e = n - 1.0, ne - 1.0
        if j % 2 == 0:  # per scenario: cells[j + 1] is the same country pooled
            pkey, pn, pne, _, pv, _, pve = cells[j + 1]
            at = np.searchsorted(pkey, (key // len(local) // n_scen * n_scen + n_scen - 1)
                                 * len(local) + key % len(local))
            var, dof = _borrow(n, var, dof, pn[at], pv[at])
            var_e, dof_e = _borrow(ne, var_e, dof_e, pne[at], pve[at])
        se, lo, hi = t_interval(n, md, var, dof)
        _, dlo, dhi = t_interval(ne, did, var_e, dof_e)
        for i, kv in enumerate(key.tolist()):
            ci = kv % len(local)
            scen = (kv // len(local)) % n_scen
            gi = kv // len(local) // n_scen
            country, lang = local[ci]
            rows.append(MDRow(scenario=POOLED if scen == n_scen - 1 else units.scenarios[scen],
                              country=country,
                              language=lang, md=float(md[i]), ci_lower=float(lo[i]),
                              ci_upper=float(hi[i]), se=float(se[i]),
                              n=int(n[i]), did=float(did[i]), did_ci_lower=float(dlo[i]),
                              did_ci_upper=float(dhi[i]),
                              group=units.groups[gi]))
    order = {c: i for i, (c, _) in enumerate(local)}
    rows.sort(key=lambda r: (r.group, order[r.country], r.scenario == POOLED, r.scenario))
    return rows
