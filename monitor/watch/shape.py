"""The JSD shape check: once per rotation cycle, each language's excess JSD of the
cycle's runs against the baseline's (docs/statistics.md, "JSD against the baseline").

Per-run JSD never pages: it is not directional (more local bias can lower a
language's JSD) and one run is thin. Once the runs since the baseline cover one
rotation cycle (every monitored triplet asked once: Sampler.runs_per_cycle
runs), their pooled excess JSD per language is compared with the
baseline's. The change carries a 95% interval by the MOVER method (Zou & Donner
2008: each side's distance to its own interval's bound, combined in quadrature),
which keeps the change inside its interval whatever the intervals' asymmetry.
`thresholds.jsd_excess_bits` is the smallest change worth a flag: a language is
flagged when the whole interval of its change lies beyond +-threshold and both
sides hold at least MIN_CELL_N units. The flag is informative (metric, log,
dashboard, report); it does not page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.stats import MIN_CELL_N, OVERALL, JSDRow
from monitor.vocab import POOLED

__all__ = ["ShapeRow", "compare", "due"]


@dataclass(kw_only=True, frozen=True)
class ShapeRow:
    """One language's excess JSD over the cycle minus the baseline's, with its CI."""

    language: str
    change_bits: float
    ci_lower: float
    ci_upper: float
    n: int  # units in the cycle
    n_base: int
    cycle_bits: float
    base_bits: float
    changed: bool


def due(runs_since_baseline: int, cycle: int) -> bool:
    """Compare at the end of every full cycle after the baseline."""
    return runs_since_baseline > 0 and runs_since_baseline % cycle == 0


def _change(now: JSDRow, base: JSDRow) -> tuple[float, float, float]:
    d = now.jsd_bits - base.jsd_bits
    lo = d - math.hypot(now.jsd_bits - now.ci_lower, base.ci_upper - base.jsd_bits)
    hi = d + math.hypot(now.ci_upper - now.jsd_bits, base.jsd_bits - base.ci_lower)
    return d, lo, hi


def compare(cycle: Sequence[JSDRow], base: Sequence[JSDRow],
            threshold: float) -> list[ShapeRow]:
    """The pooled languages (and "overall") present in both, in the cycle's order."""
    old = {r.language: r for r in base if r.scenario == POOLED}
    out = []
    for r in cycle:
        b = old.get(r.language)
        if r.scenario != POOLED or b is None:
            continue
        d, lo, hi = _change(r, b)
        thick = r.n >= MIN_CELL_N and b.n >= MIN_CELL_N and math.isfinite(lo + hi)
        changed = r.language != OVERALL and thick and (lo > threshold or hi < -threshold)
        out.append(ShapeRow(language=r.language, change_bits=d, ci_lower=lo, ci_upper=hi, n=r.n,
                            n_base=b.n, cycle_bits=r.jsd_bits, base_bits=b.jsd_bits,
                            changed=changed))
    return out
