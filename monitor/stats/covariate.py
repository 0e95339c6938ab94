"""The baseline as a covariate (CUPED): a run's MD with the triplets' persistent part removed.

(docs/statistics.md, "Persistence and CUPED")
A triplet's d holds a part that comes back whenever the same triplet is asked
in the same language (its persistence), besides fresh noise. When a run's
triplets were asked in the baseline too (a calibration baseline holds every
monitored triplet, so every later run's are), the baseline's d of the same
triplet predicts part of the run's, and the detector can compare

    x_adj = x - theta * (sum over the run's units i with a baseline value of
                         (b_i - m)) / n

with the baseline's m instead of x itself (Deng et al. 2013, "CUPED"): b_i the
baseline's d of unit i's triplet (the mean when it was asked more than once),
m the baseline's MD, n the run's units in the cell. E[x_adj] = E[x], so a
shift moves it as much, while its variance is (1 - rho^2 c) of x's, rho the
correlation of a triplet's d between the two asks and c the share of the
run's units with a baseline value. theta and rho are pooled over the run's
cells (each side centred on its own cell mean, so a shift does not enter):
the run's own pairs, ~120 at the defaults. The adjustment is used only when
it pays: when rho's 95% interval (Fisher's z) lies above 0 and at least
MIN_PAIRS pairs exist; otherwise x is used as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from monitor.stats.md import unit_d
from monitor.store import UnitScores

__all__ = ["MIN_PAIRS", "Adjusted", "BaseTable", "Persistence", "adjust", "base_table"]

MIN_PAIRS = 20  # fewer pairs estimate rho too loosely for theta to pay


@dataclass(kw_only=True, frozen=True)
class Persistence:
    """rho between a triplet's d in the run and in the baseline, pooled over cells."""

    rho: float  # NaN: too few pairs
    ci_lower: float
    ci_upper: float
    pairs: int
    theta: float  # the regression slope of the run's d on the baseline's
    used: bool  # the adjustment pays (rho's interval above 0) and is applied


@dataclass(kw_only=True, frozen=True)
class Adjusted:
    """One pooled country cell of the run, as the detector sees it with CUPED."""

    country: str
    md: float  # x_adj (x itself when not used)
    raw: float  # x, the run's MD
    n: int
    covered: int  # units with a baseline value of their triplet
    factor: float  # x_adj's variance / x's: 1 - rho^2 c (1.0 when not used)


def _by_triplet(triplet: np.ndarray, d: np.ndarray) -> dict[int, float]:
    """Mean d per triplet hash (a baseline of several runs may hold one twice)."""
    keys, inv = np.unique(triplet, return_inverse=True)
    sums = np.bincount(inv, weights=d)
    counts = np.bincount(inv)
    return dict(zip(keys.tolist(), (sums / counts).tolist(), strict=True))


#: Per local pair index: the baseline's mean d per triplet hash, and its MD.
BaseTable = dict[int, tuple[dict[int, float], float]]


def base_table(base: UnitScores, local: list[tuple[str, str]]) -> BaseTable:
    """The baseline's side of the adjustment, made once per baseline (a run, its
    suspects and every batch of its top-ups are adjusted against it)."""
    return {ci: (_by_triplet(base.triplet[idx], d), float(d.mean()))
            for ci, idx, d in unit_d(base, local) if d.size}


def adjust(run: UnitScores, base_d: BaseTable, local: list[tuple[str, str]]
           ) -> tuple[dict[str, Adjusted], Persistence]:
    """The run's pooled cells with CUPED against the baseline (base_table), and the
    persistence."""
    cells = []
    sxy = sxx = syy = 0.0
    pairs = 0
    for ci, idx, d in unit_d(run, local):
        if ci not in base_d or not d.size:
            continue
        table, m = base_d[ci]
        b = np.array([table.get(int(t), math.nan) for t in run.triplet[idx]])
        have = np.isfinite(b)
        cells.append((ci, d, b, have, m))
        if have.sum() >= 2:
            x = b[have] - b[have].mean()
            y = d[have] - d[have].mean()
            sxy, sxx, syy = sxy + float(x @ y), sxx + float(x @ x), syy + float(y @ y)
            pairs += int(have.sum())
    rho = sxy / math.sqrt(sxx * syy) if pairs >= 3 and sxx > 0 and syy > 0 else math.nan
    theta = sxy / sxx if sxx > 0 else 0.0
    if math.isfinite(rho) and pairs > 3:
        z, half = math.atanh(max(-0.999999, min(0.999999, rho))), 1.959964 / math.sqrt(pairs - 3)
        lo, hi = math.tanh(z - half), math.tanh(z + half)
    else:
        lo = hi = math.nan
    used = pairs >= MIN_PAIRS and math.isfinite(lo) and lo > 0
    out = {}
    for ci, d, b, have, m in cells:
        n, covered = int(d.size), int(have.sum())
        x = float(d.mean())
        if used:
            md = x - theta * float((b[have] - m).sum()) / n
            factor = 1.0 - rho**2 * covered / n
        else:
            md, factor = x, 1.0
        country = local[ci][0]
        out[country] = Adjusted(country=country, md=md, raw=x, n=n, covered=covered, factor=factor)
    return out, Persistence(rho=rho, ci_lower=lo, ci_upper=hi, pairs=pairs,
                            theta=theta if used else 0.0, used=used)
