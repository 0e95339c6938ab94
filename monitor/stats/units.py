"""Small numeric helpers the kernels share: t quantiles, t-intervals, NaN as null."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["nullable", "t975", "t_interval", "t_quantile"]


def t_quantile(dof: np.ndarray | float, q: float) -> np.ndarray:
    """The q quantile of Student's t (what scipy.stats.t.ppf computes), vectorised."""
    # Imported here: scipy.special costs 17 MB, which a probe run would carry while its
    # calls are in flight (the run's peak RSS); scipy.stats would cost ~45 MB more.
    from scipy.special import stdtrit

    out: np.ndarray = np.asarray(stdtrit(np.asarray(dof, dtype=float), q), dtype=float)
    return out


def t975(dof: np.ndarray | float) -> np.ndarray:
    """The 0.975 quantile of Student's t: the 95% intervals'."""
    return t_quantile(dof, 0.975)


def t_interval(n: np.ndarray, mean: np.ndarray, var: np.ndarray,
               dof: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(se, lower, upper) of 95% t-intervals with `dof` degrees of freedom (default n -
    1: the variance is the cell's own); NaN where the variance or the dof is missing."""
    n = np.asarray(n, dtype=float)
    v = np.asarray(var, dtype=float)
    df = n - 1.0 if dof is None else np.asarray(dof, dtype=float)
    ok = (n >= 1) & (df >= 1) & np.isfinite(v)
    se = np.full(n.shape, math.nan)
    se[ok] = np.sqrt(v[ok] / n[ok])
    half = np.full(n.shape, math.nan)
    half[ok] = t975(df[ok]) * se[ok]
    return se, mean - half, mean + half


def nullable(x: Any) -> float | None:
    """NaN (no CI with n < 2) is stored and reported as null."""
    if x is None:
        return None
    value = float(x)
    return None if math.isnan(value) else value
