"""The sequential test of `monitor compare` on paired per-triplet differences
(docs/statistics.md, "Comparing two setups").

For country C a comparison collects D_i = d_i(candidate) - d_i(baseline) over the
triplets i holding an option of C that both sides answered in every language (the
same triplet, variant and option order: monitor.compare.pairs), d_i being the
triplet's contribution to MD_C (monitor.stats.md). The change is delta_C = E[D].
Two one-sided sequential probability ratio tests run side by side (Sobel & Wald
1949), each the likelihood ratio of normal pairs with the variance estimated under
its own hypothesis (the profile likelihood of the sequential t-test, Cox 1952): with
n pairs, mean x and sum of squares about the mean Q at a look,

    up:   L+ = n / 2 ln(S0 / S+)         H0 delta_C = 0 against H1 delta_C = +m
    down: L- = n / 2 ln(S0 / S-)         H0 delta_C = 0 against H1 delta_C = -m
    S0 = Q + n x^2,  S+- = Q + n (x -+ m)^2,  Q at least (n - 1) MIN_SD^2,  m the margin

(for a known sd this is Wald's m n / s^2 (x - m / 2); with the plug-in sd of a few
dozen pairs instead, false regressions came 2.2 times as often: docs/statistics.md).
A test stops once L >= A (its shift shown) or L <= B (no shift), A = ln((1 - beta) /
a), B = ln(beta / (1 - a)), a = alpha / K for the K countries compared (Bonferroni);
its outcome then stands. The country is a regression once up shows its shift, an
improvement once down shows its shift, no change once both show none (equivalence:
the data favour 0 over +-m), and inconclusive if the cap comes first. Looks come
after each batch, and none decides before MIN_PAIRS pairs.

Error control, as designed (measured in docs/benchmarks.md, section 9): a false
regression in any country of a comparison with no change at most about alpha
(Bonferroni holds whatever the dependence between countries, which share triplets;
Wald's bound with looks only at batch ends is conservative); no change declared
when a country moved by the margin at most about beta, per country; a margin-sized
regression shown with probability about 1 - beta unless the cap stops it first.
Everything here works on numpy arrays: the command, `monitor plan --compare` and
bench/compare.py run this code.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from monitor.vocab import Change
from monitor.watch.drift import MIN_SD

__all__ = ["ALPHA", "BETA", "CHANGE", "IMPROVEMENT", "MIN_PAIRS", "NONE", "NO_CHANGE", "OPEN",
           "REGRESSION", "SHIFT", "bounds", "llr", "step", "verdicts"]

#: A false regression in any country of a comparison with no change: at most this.
ALPHA = 0.05
#: Missing a margin-sized change, and calling "no change" when there was one: per country.
#: 0.05, not 0.10: at 0.10 a 0.5-point regression in the slowest country was flagged in
#: 0.916 of comparisons, too near the 0.9 asked (docs/benchmarks.md section 9).
BETA = 0.05
#: Pairs a country needs before its first decision.
MIN_PAIRS = 10

#: One test's state: still open, its shift shown, no shift shown.
OPEN, SHIFT, NONE = 0, 1, -1
#: A country's verdict code (verdicts()); 0 is still open.
REGRESSION, IMPROVEMENT, NO_CHANGE = 1, 2, 3
CHANGE: dict[int, Change] = {OPEN: Change.INCONCLUSIVE, REGRESSION: Change.REGRESSION,
                             IMPROVEMENT: Change.IMPROVEMENT, NO_CHANGE: Change.NO_CHANGE}


def bounds(alpha: float, beta: float, countries: int) -> tuple[float, float]:
    """Wald's (A, B) in nats, alpha shared out over `countries` (Bonferroni)."""
    a = alpha / max(1, countries)
    return math.log((1 - beta) / a), math.log(beta / (1 - a))


def llr(n: Any, mean: Any, sd: Any, margin: float) -> tuple[Any, Any]:
    """(L+, L-): the log likelihood ratios of a shift of +margin and of -margin against
    none for n pairs of mean `mean` and sd `sd` (each hypothesis with its own variance
    estimate, the sum of squares floored at (n - 1) MIN_SD^2); 0 where n < 2."""
    n = np.asarray(n, float)
    x = np.nan_to_num(np.asarray(mean, float))
    q = np.maximum(np.nan_to_num(np.asarray(sd, float)) ** 2 * (n - 1), (n - 1) * MIN_SD**2)
    q = np.maximum(q, 1e-12)
    s0 = q + n * x**2
    up = np.where(n >= 2, n / 2 * np.log(s0 / (q + n * (x - margin) ** 2)), 0.0)
    down = np.where(n >= 2, n / 2 * np.log(s0 / (q + n * (x + margin) ** 2)), 0.0)
    return up, down


def _stop(state: Any, value: Any, ready: Any, a: float, b: float) -> Any:
    return np.where(state != OPEN, state,
                    np.where(ready & (value >= a), SHIFT,
                             np.where(ready & (value <= b), NONE, OPEN))).astype(np.int8)


def step(up: Any, down: Any, n: Any, mean: Any, sd: Any, margin: float,
         limits: tuple[float, float]) -> tuple[Any, Any]:
    """Both tests' states after a look (a stopped test keeps its outcome)."""
    ready = np.asarray(n) >= MIN_PAIRS
    l_up, l_down = llr(n, mean, sd, margin)
    a, b = limits
    return _stop(up, l_up, ready, a, b), _stop(down, l_down, ready, a, b)


def verdicts(up: Any, down: Any) -> Any:
    """Each country's verdict code from its two tests (OPEN while undecided)."""
    up, down = np.asarray(up), np.asarray(down)
    return np.where(up == SHIFT, REGRESSION,
                    np.where(down == SHIFT, IMPROVEMENT,
                             np.where((up == NONE) & (down == NONE), NO_CHANGE, OPEN)))
