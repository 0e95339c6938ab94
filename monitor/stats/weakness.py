"""Reasoning structure: does the model play down an option's drawbacks in its own language?

The prompt asks for every strength and weakness of each option as its own
list item in the closing JSON, so the parser stores how many of each an
answer gave (scores.strengths / scores.weaknesses). For a country C with a
local language L:

  weakness share = weaknesses / (strengths + weaknesses) listed for C's options,
  locality "local"   = C's options in answers written in L,
  locality "foreign" = the same options in answers written in the other languages.

Comparing the same options across languages (as MD does for scores) keeps an
option's real merits out of the contrast: a share that drops only in the local
language is the paper's "played down the drawbacks". The share is a ratio of
sums over units (a unit is one triplet of one run); its 95% CI is the
cluster-robust linearisation (delta method) over units, and so is the CI of
the difference local - foreign, which pairs the two parts within each unit.
Answers without the lists are left out, not counted as zero. The per-unit
sums come from DuckDB (monitor.store.inputs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from monitor.store import WeaknessSums

__all__ = ["LOCALITIES", "WeaknessRow", "weakness_rows"]

LOCALITIES = ("local", "foreign")
_Z = 1.959963984540054  # normal 97.5% point: the ratio CI is asymptotic anyway


@dataclass(kw_only=True, frozen=True)
class WeaknessRow:
    country: str
    language: str  # the country's local language
    share_local: float
    local_lower: float
    local_upper: float
    points_local: int
    share_foreign: float
    foreign_lower: float
    foreign_upper: float
    points_foreign: int
    diff: float  # local - foreign
    diff_lower: float
    diff_upper: float
    n: int  # units


def _ratio_parts(w: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """Ratio sum(w)/sum(t) and each unit's influence on it (zero-total units add nothing)."""
    total = float(t.sum())
    if total <= 0:
        return math.nan, np.zeros_like(w)
    r = float(w.sum()) / total
    return r, (w - r * t) / total


def _ci(value: float, influence: np.ndarray) -> tuple[float, float]:
    n = influence.size
    if n < 2 or math.isnan(value):
        return math.nan, math.nan
    se = math.sqrt(n / (n - 1) * float((influence ** 2).sum()))
    return value - _Z * se, value + _Z * se


def weakness_rows(sums: WeaknessSums, local: Sequence[tuple[str, str]]) -> list[WeaknessRow]:
    """One row per country of `local` (country, language) that has listed points,
    in that order (one group: the caller selects the runs)."""
    rows = []
    for country, lang in local:
        mine = sums.country == country
        if not mine.any():
            continue
        loc, inf_loc = _ratio_parts(sums.w_local[mine], sums.t_local[mine])
        fo, inf_fo = _ratio_parts(sums.w_foreign[mine], sums.t_foreign[mine])
        diff = loc - fo
        (loc_lo, loc_hi), (fo_lo, fo_hi) = _ci(loc, inf_loc), _ci(fo, inf_fo)
        diff_lo, diff_hi = _ci(diff, inf_loc - inf_fo)
        rows.append(WeaknessRow(
            country=country, language=lang, share_local=loc, local_lower=loc_lo,
            local_upper=loc_hi, points_local=int(sums.t_local[mine].sum()), share_foreign=fo,
            foreign_lower=fo_lo, foreign_upper=fo_hi,
            points_foreign=int(sums.t_foreign[mine].sum()), diff=diff, diff_lower=diff_lo,
            diff_upper=diff_hi, n=int(mine.sum())))
    return rows
