"""A comparison's pairs: the triplets both sides answered, and their differences.

A pair is a triplet answered with all three scores in every asked language on both
sides (UnitScores.complete(); a run's own statistics use every answered cell,
monitor.stats.missing, but a paired difference is taken of whole triplets), asked
in the same variant
and option order (a live comparison asks both endpoints the same specs; against a
stored baseline the candidate is asked as the baseline was), so that label j is the
same option on both sides. A triplet one side failed, refused or could not be read
in any language is left out of the pairs on both sides: each country's MD needs
every language (its d compares the local language with the mean over all), and
leaving a pair out whole keeps the two sides on the same triplets. Coverage per
side says what was lost.

The difference of two aligned units is itself a unit (candidate's scores minus
the baseline's, in hundredths): MD, DiD and the deviation are linear in the
scores, so the statistics package's own kernels on the differences give the
paired difference of MD and DiD per country with their t-intervals, and the
heatmap's deviation difference per language (monitor.stats.md, deviation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from monitor.stats.md import unit_d
from monitor.store import UnitScores

__all__ = ["Look", "aligned", "difference", "latest", "restrict", "subset"]


def subset(units: UnitScores, keep: np.ndarray) -> UnitScores:
    """The units where `keep` (a mask or indices), in that order."""
    return replace(units, group=units.group[keep], scenario=units.scenario[keep],
                   country=units.country[keep], scores=units.scores[keep],
                   triplet=units.triplet[keep], answered=units.answered[keep])


def latest(units: UnitScores) -> UnitScores:
    """One unit per triplet: the last one (units come in run order, run ids sort by
    time), so a triplet a stored baseline asked twice pairs with its latest answers."""
    if not len(units.triplet):
        return units
    rev = units.triplet[::-1]
    _, first = np.unique(rev, return_index=True)
    return subset(units, np.sort(len(rev) - 1 - first))


def aligned(base: UnitScores, cand: UnitScores) -> tuple[UnitScores, UnitScores]:
    """Both sides on the pairs only, in the candidate's order: the units answered in every
    language on both sides. A triplet whose options stand in other places on the two
    sides (which a comparison never asks) is left out."""
    base, cand = latest(base.complete()), cand.complete()
    where = {int(k): i for i, k in enumerate(base.triplet.tolist())}
    ci = [i for i, k in enumerate(cand.triplet.tolist()) if int(k) in where]
    bi = [where[int(cand.triplet[i])] for i in ci]
    same = [j for j, (c, b) in enumerate(zip(ci, bi, strict=True))
            if np.array_equal(cand.country[c], base.country[b])]
    c_idx = np.array([ci[j] for j in same], dtype=np.int64)
    b_idx = np.array([bi[j] for j in same], dtype=np.int64)
    base_al = subset(base, b_idx)
    # the baseline's scenario codes follow its own list: take the candidate's
    return replace(base_al, scenarios=cand.scenarios, scenario=cand.scenario[c_idx],
                   group=np.zeros(len(c_idx), np.int32), groups=["pooled"]), \
        replace(subset(cand, c_idx), group=np.zeros(len(c_idx), np.int32), groups=["pooled"])


def difference(base: UnitScores, cand: UnitScores) -> UnitScores:
    """The aligned pairs as units of the candidate's scores minus the baseline's."""
    return replace(cand, scores=cand.scores - base.scores,
                   answered=cand.answered & base.answered)


def restrict(pairs: tuple[UnitScores, UnitScores], keys: set[int]
             ) -> tuple[UnitScores, UnitScores]:
    """The pairs whose triplet key is in `keys` (the triplets a comparison asked)."""
    base, cand = pairs
    keep = np.isin(cand.triplet, np.array(sorted(keys), dtype=np.uint64))
    return subset(base, keep), subset(cand, keep)


class Look:
    """One look of the test: per country (in the order of `local`), the pairs' n, mean
    and sd of D = d(candidate) - d(baseline), over the pairs whose key is in `keys`
    (None: every pair)."""

    def __init__(self, diff: UnitScores, local: Sequence[tuple[str, str]],
                 keys: set[int] | None = None) -> None:
        k = len(local)
        self.n, self.mean, self.sd = np.zeros(k), np.full(k, np.nan), np.full(k, np.nan)
        mask = (np.ones(len(diff.triplet), bool) if keys is None
                else np.isin(diff.triplet, np.array(sorted(keys), dtype=np.uint64)))
        for ci, idx, d in unit_d(diff, local):
            d = d[mask[idx]]
            self.n[ci] = d.size
            if d.size:
                self.mean[ci] = float(d.mean())
            if d.size >= 2:
                self.sd[ci] = float(d.std(ddof=1))
