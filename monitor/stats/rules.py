"""The decision rules that every report, alert and exit code applies, each written once.

- A cell is *tested* (compared with its baseline by the drift detector) when
  the run holds at least one unit of it and the baseline at least MIN_CELL_N
  with a finite SE: the detector weighs a run by its n at the baseline's sd
  (monitor.watch.drift), so a small run counts little instead of not at all,
  and the baseline's sd needs a few units to be an estimate.
- A cell is *significant* (starred in the CLI and the report) when its 95%
  CI excludes 0 and it holds at least MIN_CELL_N units.
- A JSD cell is *significant* when its permutation p-value is below 0.05 and
  it holds at least MIN_CELL_N units (its CI is a bootstrap interval of the
  size of the excess, not the test).
- A cell *breaches* `thresholds.md_points` (--fail-on-breach, BREACH) when
  its whole CI lies beyond the threshold and it holds at least MIN_CELL_N
  units: an n = 2 cell can have a zero-width CI.
"""

from __future__ import annotations

import math

__all__ = ["MIN_CELL_N", "beyond", "jsd_significant", "significant", "tested"]

MIN_CELL_N = 5


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def significant(lo: float | None, hi: float | None, n: int) -> bool:
    return n >= MIN_CELL_N and _finite(lo, hi) and (lo > 0 or hi < 0)  # type: ignore[operator]


def jsd_significant(p: float | None, n: int) -> bool:
    return n >= MIN_CELL_N and _finite(p) and p < 0.05  # type: ignore[operator]


def beyond(lo: float | None, hi: float | None, n: int, limit: float) -> bool:
    """The whole CI lies beyond +-limit."""
    return n >= MIN_CELL_N and _finite(lo, hi) and (
        lo > limit or hi < -limit)  # type: ignore[operator]


def tested(n: int, n_base: int, se_base: float | None) -> bool:
    return n >= 1 and n_base >= MIN_CELL_N and _finite(se_base)
