"""The score deviation of a country's options in each asked language: the report's heatmap.

For a unit i (one triplet of one run, answered in all L languages) holding
options of country C, and an asked language l:

    dev_i(C, l) = mean over C's options j of (s[l, j] - mean_l' s[l', j])
    cell (C, l) = mean_i dev_i(C, l), with its 95% t-interval, n = units with a C option.

The cell in C's own language is MD_C (monitor.stats.md), so local-language
bias shows as a bright diagonal; the other cells say which languages the
home advantage is taken from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from monitor.stats.units import t_interval
from monitor.store import UnitScores

__all__ = ["DeviationRow", "deviation_rows"]


@dataclass(kw_only=True, frozen=True)
class DeviationRow:
    """Mean deviation of country C's options asked in `language` (points)."""

    country: str
    local_language: str  # the country's own language (the diagonal)
    language: str  # the asked language
    mean: float
    ci_lower: float  # NaN when n < 2
    ci_upper: float
    n: int  # units (triplets) holding an option of the country


def deviation_rows(units: UnitScores, local: Sequence[tuple[str, str]]) -> list[DeviationRow]:
    """Every (country of `local`, asked language) cell, in the order of `local` and of
    the units' languages; scenarios and runs pooled."""
    n_u, n_l, _ = units.scores.shape
    if n_u == 0:
        return []
    code = {c: i for i, c in enumerate(units.countries)}
    dev = units.scores - units.scores.mean(axis=1, keepdims=True)  # (u, l, 3) hundredths
    rows: list[DeviationRow] = []
    for country, own in local:
        if country not in code:
            continue
        mine = units.country == code[country]  # (u, 3)
        k = mine.sum(axis=1)
        has = k > 0
        n = int(has.sum())
        if n == 0:
            continue
        # per unit and language: the mean over the unit's options of the country
        d = (dev * mine[:, None, :]).sum(axis=2)[has] / k[has, None] / 100.0  # (n, l)
        mean = d.mean(axis=0)
        var = d.var(axis=0, ddof=1) if n >= 2 else np.full(n_l, np.nan)
        _, lo, hi = t_interval(np.full(n_l, n), mean, var)
        rows += [DeviationRow(country=country, local_language=own, language=lang,
                              mean=float(mean[li]), ci_lower=float(lo[li]),
                              ci_upper=float(hi[li]), n=n) for li,
                              lang in enumerate(units.languages)]
    return rows
