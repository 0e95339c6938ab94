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
Answers without the lists (None) are left out, not counted as zero.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["LOCALITIES", "weakness_table"]

LOCALITIES = ("local", "foreign")
_Z = 1.959963984540054  # normal 97.5% point: the ratio CI is asymptotic anyway

COLUMNS = ["country", "language", "share_local", "local_lower", "local_upper", "points_local",
           "share_foreign", "foreign_lower", "foreign_upper", "points_foreign", "diff",
           "diff_lower", "diff_upper", "n"]


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


def weakness_table(scores: pd.DataFrame,
                   local_countries: dict[str, list[str]]) -> pd.DataFrame:
    """Weakness share of each country's options, local vs foreign language, with CIs.

    `scores` is `Store.scores_frame` (columns run_id, triplet_id, language,
    country, strengths, weaknesses, ...); `local_countries` maps a language to
    the countries it is local to (catalog.languages).
    """
    rows: list[dict[str, Any]] = []
    if scores.empty:
        return pd.DataFrame(rows, columns=COLUMNS)
    df = scores.dropna(subset=["strengths", "weaknesses"])
    df = df.assign(unit=df["run_id"] + "/" + df["triplet_id"],
                   w=df["weaknesses"].astype(float),
                   t=df["strengths"].astype(float) + df["weaknesses"].astype(float))
    for lang, countries in local_countries.items():
        for country in countries:
            mine = df[df["country"] == country]
            if mine.empty:
                continue
            is_local = mine["language"] == lang
            units = pd.Index(sorted(mine["unit"].unique()))
            ratios: dict[str, tuple[float, np.ndarray]] = {}
            points: dict[str, int] = {}
            for name, part in (("local", mine[is_local]), ("foreign", mine[~is_local])):
                sums = part.groupby("unit")[["w", "t"]].sum().reindex(units, fill_value=0.0)
                ratios[name] = _ratio_parts(sums["w"].to_numpy(), sums["t"].to_numpy())
                points[name] = int(part["t"].sum())
            (loc, inf_loc), (fo, inf_fo) = ratios["local"], ratios["foreign"]
            diff = loc - fo
            row: dict[str, Any] = {"country": country, "language": lang, "n": len(units)}
            row["share_local"], row["points_local"] = loc, points["local"]
            row["local_lower"], row["local_upper"] = _ci(loc, inf_loc)
            row["share_foreign"], row["points_foreign"] = fo, points["foreign"]
            row["foreign_lower"], row["foreign_upper"] = _ci(fo, inf_fo)
            row["diff"] = diff
            row["diff_lower"], row["diff_upper"] = _ci(diff, inf_loc - inf_fo)
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
