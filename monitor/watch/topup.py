"""The top-up confirmation of a suspected drift: a sequential test on fresh triplets.

(docs/statistics.md, "Top-up confirmation")
When a pooled country cell's CUSUM passes `topup.suspect_h` (well below the
classic `thresholds.cusum_h`), the same run asks fresh triplets that hold the
country, in batches, and runs Wald's one-sided SPRT of a shift of delta on the
side the CUSUM points to, on the fresh data only: with n fresh triplets whose
MD differs from the baseline's by x,

    L = delta / v * (side * x - delta / 2),  v = s^2 / n + SE_base^2

(the CUSUM's own increment, monitor.watch.drift.variance). L >= A =
ln((1 - beta) / alpha) confirms: the cell pages now. L <= B = ln(beta / (1 -
alpha)) dismisses: the CUSUM's sum on that side restarts at 0, since fresh
data gave evidence against the shift. At `topup.max_triplets` without either
the cell stays as the CUSUM alone has it. Because the fresh data
are new draws from the same population, the chance of confirming a shift that
is not there is at most alpha per top-up whatever led to it (Ville's
inequality for the likelihood-ratio martingale), and only cells the CUSUM
already suspects spend calls.

Futility: L is bounded by delta / SE_base^2 * (side * x - delta / 2) however many
fresh triplets are asked, so with a thin baseline neither bound may be in reach.
Before each batch (`reachable`), the top-up stops when even the larger of the
shift measured so far and delta could not reach A at the cap, nor the smaller of
it and 0 reach B, and says how many triplets per cell a baseline would need
(`baseline_needed`).

Held: a cell whose last top-up (under the current baseline) ended inconclusive -
at its cap, at the run's limit, cut by the budget or futile - is not topped up
again on that side until that side's CUSUM sum passes the value it had at that
top-up (`held`): the runs since have added net evidence for the shift. Under a
real shift the sum grows by about delta^2 / 2v a run, so the hold ends within a
run or two; with none it tends to fall, and the calls the top-up would spend
again on the same evidence are not asked. A new baseline ends every hold. The
state is derived from the stored verdicts (run_stats kind "topup", extra
"cusum"), so it survives a restart.

The limit on calls: a run's top-ups, all suspects together, ask at most
`topup.max_run_share` of its planned calls; with `topup.mean_run_share` set, also at
most what the window of the last W = ceil(max_run_share / mean_run_share) runs has
left of mean_run_share x W runs' plans (`run_limit`): one run may spend the whole
per-run limit, and then the next ones wait until it leaves the window, so the calls
per run average at most 1 + mean_run_share times the plan over any W runs.

Everything here works on numpy arrays (or 0-d ones), so the daemon, `monitor
plan` and the benchmarks run this code, not a replica.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.watch.drift import CAP_H, MIN_SD, variance

if TYPE_CHECKING:
    from monitor.store import StatRow

__all__ = ["CONFIRM", "DISMISS", "UNDECIDED", "WORDS", "Verdict", "apply", "baseline_needed",
           "bounds", "decide", "held", "llr", "reachable", "run_limit", "suspect", "window_runs"]

CONFIRM, DISMISS, UNDECIDED = 1, -1, 0
#: A decision as a verdict says and stores it (run_stats kind "topup", extra "decision").
WORDS = {CONFIRM: "confirmed", DISMISS: "dismissed", UNDECIDED: "inconclusive"}


@dataclass(kw_only=True, frozen=True)
class Verdict:
    """A top-up's outcome for one pooled country cell (stored as run_stats kind "topup")."""

    country: str
    side: int  # +1: a shift up was suspected, -1 down
    decision: int  # CONFIRM, DISMISS or UNDECIDED
    n: int  # fresh triplets holding the country that were scored
    md: float  # their MD
    ci: tuple[float, float]
    llr: float
    asked: int  # triplets asked (each in every language)
    run_id: str  # the top-up's own run row
    why: str = ""  # why an inconclusive top-up stopped before its cap (futile, limits)
    did: float = math.nan  # the DiD of the run and the top-up's triplets pooled
    did_ci: tuple[float, float] = (math.nan, math.nan)
    did_n: int = 0  # its triplets (stored since the 99% verdict; before, the top-up's n)
    did_md: float = math.nan  # the MD of those triplets (NaN before it was stored)
    cusum: float = math.nan  # the suspected side's CUSUM sum that raised it (`held`)

    @property
    def word(self) -> str:
        return WORDS[self.decision]

    @classmethod
    def of_row(cls, st: StatRow) -> Verdict:
        """A verdict as stored (run_stats kind "topup"; the review writes it): read by
        the review that resumes its run and by the next runs' holds (`held`)."""
        extra = json.loads(st.extra or "{}")
        decision = {w: d for d, w in WORDS.items()}[extra["decision"]]
        return cls(country=st.key, side=int(extra["side"]), decision=decision,
                   n=int(st.n or 0), md=_num(st.value), ci=(_num(st.ci_lower),
                                                            _num(st.ci_upper)),
                   llr=float(extra["llr"]), asked=int(extra["asked"]), run_id=extra["run_id"],
                   why=str(extra.get("why", "")), did=_num(extra.get("did")),
                   did_ci=(_num(extra.get("did_ci_lower")), _num(extra.get("did_ci_upper"))),
                   did_n=int(extra.get("did_n") or st.n or 0), did_md=_num(extra.get("did_md")),
                   cusum=_num(extra.get("cusum")))


def _num(x: object) -> float:
    """A stored number, NaN where none was (JSON null, SQL NULL)."""
    return math.nan if x is None else float(str(x))


def bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's (A, B) in nats."""
    return math.log((1 - beta) / alpha), math.log(beta / (1 - alpha))


def llr(n: Any, diff: Any, se_base: Any, n_base: Any, side: Any, delta: float) -> Any:
    """The log likelihood ratio of a shift of delta on `side` against none, for n fresh
    triplets whose MD differs from the baseline's by diff (arrays broadcast)."""
    v = variance(se_base, n_base, n)
    return np.where(np.asarray(n) > 0, delta / v * (side * np.asarray(diff) - delta / 2), 0.0)


def reachable(n_cap: Any, diff: Any, se_base: Any, n_base: Any, side: Any, delta: float,
              alpha: float, beta: float) -> Any:
    """Whether the SPRT could still decide at the cap (arrays broadcast): confirm, if
    n_cap fresh triplets differed from the baseline by the larger of the shift measured
    so far (`diff`, on `side`) and the shift tested (delta); or dismiss, if they
    differed by the smaller of the measured shift and none. The baseline's own error
    bounds the LLR whatever n (drift.variance): with a thin baseline neither bound can
    be reached, and asking more only spends. A NaN diff (nothing measured yet) counts
    as half the tested shift."""
    seen = np.where(np.isfinite(diff), np.asarray(side) * np.asarray(diff), delta / 2)
    yes, no = bounds(alpha, beta)
    best = llr(n_cap, np.asarray(side) * np.maximum(seen, delta), se_base, n_base, side, delta)
    worst = llr(n_cap, np.asarray(side) * np.minimum(seen, 0.0), se_base, n_base, side, delta)
    return (best >= yes) | (worst <= no)


def baseline_needed(n_cap: int, se_base: float, n_base: int, delta: float, alpha: float,
                    beta: float) -> int | None:
    """Triplets per country cell a baseline needs for a shift of delta to be confirmable
    at n_cap fresh triplets; None when no baseline would do (the cap is too small)."""
    sd2 = max(se_base**2 * n_base, MIN_SD**2)
    room = delta * delta / 2 / bounds(alpha, beta)[0] - sd2 / max(n_cap, 1)
    return None if room <= 0 else math.ceil(sd2 / room)


def window_runs(max_run_share: float, mean_run_share: float | None) -> int:
    """W: the runs over which one run's whole limit averages down to mean_run_share (1:
    no window)."""
    if mean_run_share is None:
        return 1
    return max(1, math.ceil(max_run_share / mean_run_share - 1e-9))


def run_limit(planned: Any, spent_before: Any, max_run_share: float,
              mean_run_share: float | None) -> Any:
    """Calls a run's top-ups may ask (arrays broadcast): the per-run limit, or what the
    window's mean leaves after the top-ups of the W - 1 runs before it (`spent_before`
    calls), whichever is less; never below 0."""
    per_run = np.floor(max_run_share * np.asarray(planned, float))
    if mean_run_share is None:
        return per_run + np.zeros_like(np.asarray(spent_before, float))  # spent's shape
    w = window_runs(max_run_share, mean_run_share)
    return np.maximum(0, np.minimum(per_run, np.floor(mean_run_share * w * np.asarray(
        planned, float)) - np.asarray(spent_before)))


def decide(value: Any, alpha: float, beta: float) -> Any:
    a, b = bounds(alpha, beta)
    return np.where(value >= a, CONFIRM, np.where(value <= b, DISMISS, UNDECIDED))


def suspect(state: Any, s_plus: Any, s_minus: Any, suspect_h: float) -> tuple[Any, Any]:
    """(cells a top-up should confirm, side): a sum beyond suspect_h in a cell not
    already FIRING (state codes of monitor.watch.drift.advance)."""
    hot = (np.maximum(s_plus, s_minus) > suspect_h) & (np.asarray(state) < 2)
    return hot, np.where(np.asarray(s_plus) >= np.asarray(s_minus), 1, -1)


def held(s_plus: Any, s_minus: Any, side: Any, last_side: Any, last_sum: Any) -> Any:
    """Whether a suspected cell waits (arrays broadcast): its last top-up ended
    inconclusive on the same side (last_side +1 / -1; 0: no such top-up) when that
    side's sum was last_sum, and the sum has not passed it since."""
    now = np.where(np.asarray(side) > 0, s_plus, s_minus)
    return (np.asarray(last_side) == np.asarray(side)) & ~(now > np.asarray(last_sum))


def apply(state: Any, s_plus: Any, s_minus: Any, alarm_runs: Any, asked: Any, side: Any,
          decision: Any, h: Any) -> tuple[Any, Any, Any, Any]:
    """The cells after their top-up (asked False: none ran, nothing changes).
    Confirmed -> FIRING, and that side's sum set to the cap CAP_H * h, as a page of the
    CUSUM alone sets it (monitor.watch.drift.advance; the fresh data are evidence of
    the shift too), so that a confirmed page needs as much evidence against the shift
    to resolve as any other.
    Dismissed -> that side's sum back to 0 and OK (unless it was FIRING). Undecided
    -> as the CUSUM alone has it (PENDING only above h); a new top-up of that side
    waits until its sum passes where it is (`held`)."""
    asked = np.asarray(asked, bool)
    conf = asked & (decision == CONFIRM)
    dism = asked & (decision == DISMISS)
    state = np.where(conf, 2, np.where(dism & (state < 2), 0, state))
    cap = CAP_H * np.asarray(h, float)
    s_plus = np.where(dism & (side > 0), 0.0, np.where(conf & (side > 0), cap, s_plus))
    s_minus = np.where(dism & (side < 0), 0.0, np.where(conf & (side < 0), cap, s_minus))
    alarm_runs = np.where(dism, 0, alarm_runs)
    return np.asarray(state, np.int8), s_plus, s_minus, alarm_runs
