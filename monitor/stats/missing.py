"""Missing answers: every answered cell used, the missing ones filled from a two-way model
(docs/statistics.md "Missing answers").

A real endpoint fails, refuses or writes something unreadable for some calls, and
for different shares in different languages. Keeping only the triplets answered in
every language threw away most of the data (0.85^6 = 38% of triplets at 85% per
language). Instead, for each group (a run, or the pooled runs) and country, the
scores of that country's options follow

    s[r, l] = a_r + g_l + noise        (r: an option of a unit, l: a language)

with a_r the option instance's level and g_l the language's effect on that
country's options (its leniency, and the local-language bias in the local
language). Its least-squares fit on the answered cells (alternating means, to
convergence) fills each missing cell with a_r + g_l, rounded to the hundredth of a
point the scores are stored in, so the kernels' sums stay exact integers. On
complete data nothing is filled, and the statistics are exactly those of the
complete units. A cell's MD still needs the local language's own answer (a unit
without it is not counted for that country, monitor.stats.md).

Assumption (missing at random given the option and the language): whether an
answer is missing may depend on the language and on the option, but not on the
score it would have had. It breaks when a model refuses exactly where it would
have scored low (or high) in one language: then the filled cells carry the
answered ones' level, and MD is biased toward the answered cells' level.
"""

from __future__ import annotations

import numpy as np

from monitor.store import UnitScores

__all__ = ["MAX_ITER", "answered_share", "fill"]

MAX_ITER = 200
_TOL = 1e-6  # hundredths of a point: far below the rounding of the filled cells


def fill(units: UnitScores) -> UnitScores:
    """`units` with every missing score filled from its (group, country)'s two-way fit;
    `answered` kept, so a kernel still knows which cells were asked and answered."""
    if units.answered.all():
        return units
    n_u, n_l, _ = units.scores.shape
    y = units.scores.transpose(0, 2, 1).reshape(-1, n_l).astype(float)  # rows (u, j)
    m = units.answered.transpose(0, 2, 1).reshape(-1, n_l)
    n_c = len(units.countries) + 1
    key = (units.group.astype(np.int64)[:, None] * n_c + units.country + 1).ravel()
    keys, row_key = np.unique(key, return_inverse=True)
    cell = (row_key[:, None] * n_l + np.arange(n_l)[None, :])[m]  # (key, language) of each
    seen = np.bincount(cell, minlength=keys.size * n_l).reshape(-1, n_l)
    per_row = m.sum(axis=1)
    g = np.zeros((keys.size, n_l))
    # Each (group, country) stops at its own convergence, as it would alone: a run's
    # filled cells (and so its MD) must not depend on which runs are estimated with it
    # (one global stop iterated some groups further, and a cell's rounding moved).
    active = np.ones(keys.size, bool)
    for _ in range(MAX_ITER):
        a = np.where(m, y - g[row_key], 0.0).sum(axis=1) / np.maximum(per_row, 1)
        resid = (y - a[:, None])[m]
        sums = np.bincount(cell, weights=resid, minlength=keys.size * n_l).reshape(-1, n_l)
        new = np.divide(sums, seen, out=np.zeros_like(sums), where=seen > 0)
        converged = np.abs(new - g).max(axis=1, initial=0.0) < _TOL
        g = np.where(active[:, None], new, g)
        active &= ~converged
        if not active.any():
            break
    a = np.where(m, y - g[row_key], 0.0).sum(axis=1) / np.maximum(per_row, 1)
    # A language no option of the cell was answered in: no effect known, the cell's mean
    level = (g * (seen > 0)).sum(axis=1) / np.maximum((seen > 0).sum(axis=1), 1)
    g = np.where(seen > 0, g, level[:, None])
    filled = np.where(m, y, np.rint(a[:, None] + g[row_key]))
    scores = filled.reshape(n_u, 3, n_l).transpose(0, 2, 1).astype(np.int64)
    return UnitScores(languages=units.languages, groups=units.groups, group=units.group,
                      scenarios=units.scenarios, scenario=units.scenario,
                      countries=units.countries, country=units.country, scores=scores,
                      triplet=units.triplet, answered=units.answered)


def answered_share(units: UnitScores) -> float:
    """The share of the units' (option, language) cells that were answered."""
    return float(units.answered.mean()) if units.answered.size else float("nan")
