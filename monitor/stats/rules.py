"""The decision rules that every report, alert and exit code applies, each written once.

- A cell is *tested* (compared with its baseline by the drift detector) only
  when it holds at least MIN_CELL_N units now and in the baseline and both
  SEs are finite: a t-interval or a z from fewer is unreliable with 1..10
  integer scores.
- A run's SE is floored by the baseline's SE scaled to the run's n: a run's
  own sd from a handful of discrete scores can be near 0 and make z explode.
- A cell is *significant* (starred in the CLI and the report) when its 95%
  CI excludes 0 and it holds at least MIN_CELL_N units.
- A cell *breaches* `thresholds.md_points` (--fail-on-breach, BREACH) when
  its whole CI lies beyond the threshold and it holds at least MIN_CELL_N
  units: an n = 2 cell can have a zero-width CI.
"""

from __future__ import annotations

import math

__all__ = ["MIN_CELL_N", "beyond", "se_floor", "significant", "tested"]

MIN_CELL_N = 5


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def significant(lo: float | None, hi: float | None, n: int) -> bool:
    return n >= MIN_CELL_N and _finite(lo, hi) and (lo > 0 or hi < 0)  # type: ignore[operator]


def beyond(lo: float | None, hi: float | None, n: int, limit: float) -> bool:
    """The whole CI lies beyond +-limit."""
    return n >= MIN_CELL_N and _finite(lo, hi) and (
        lo > limit or hi < -limit)  # type: ignore[operator]


def tested(n: int, se: float | None, n_base: int, se_base: float | None) -> bool:
    return n >= MIN_CELL_N and n_base >= MIN_CELL_N and _finite(se, se_base)


def se_floor(se: float, n: int, se_base: float, n_base: int) -> float:
    """The run's SE, at least the baseline's SE at the run's n."""
    return max(se, se_base * math.sqrt(n_base / n))
