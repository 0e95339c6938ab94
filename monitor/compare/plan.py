"""What a comparison costs: the sequential test simulated (`monitor plan --compare`, the
benchmarks).

A comparison draws triplets from the monitored population (the sampler's, monitor.
measure.sampling) and, once some countries are decided, only triplets holding an open
one. `simulate` does the same on arrays: each batch takes, per replication, the next
`batch` triplets of a random draw of the population that hold an open country; `draw`
gives each (triplet, country) its paired difference D (normal by default, as
monitor.watch.plan simulates runs; bench/compare.py passes the simulated model's own
scores); the looks are monitor.compare.sequential's. Calls are triplets x languages x
the sides asked (2 live, 1 against the stored baseline).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from monitor.catalog import Catalog
from monitor.compare import sequential as sq

__all__ = ["Population", "SimResult", "normal_draw", "paired_sd", "population", "simulate",
           "summary"]

SEED = 20261205
REPS = 2000
#: Draw is (rng, population rows (reps, m)) -> D (reps, m, countries); NaN where not held.
Draw = Callable[[np.random.Generator, np.ndarray], np.ndarray]


class Population(NamedTuple):
    """The monitored triplets as countries: holds[t, k] when triplet t has an option of
    names[k]."""

    names: list[str]
    holds: np.ndarray


def population(catalog: Catalog, scenarios: Sequence[str], languages: Sequence[str]
               ) -> Population:
    monitored = catalog.monitored(languages)
    names = [c for lang in languages for c in catalog.languages.get(lang, ())]
    rows = []
    for s in scenarios:
        scen = catalog.scenarios[s]
        for t in scen.monitored_triplets(monitored):
            have = {scen.options[o].country for o in t.option_ids}
            rows.append([c in have for c in names])
    return Population(names, np.array(rows, bool).reshape(-1, len(names)))


def paired_sd(sd: float, persistence: float) -> float:
    """The sd of D when each side's d has sd `sd` and a share `persistence` of it comes
    back when the same triplet is asked again (the same in both setups)."""
    return sd * math.sqrt(2 * (1 - persistence))


def normal_draw(holds: np.ndarray, shift: np.ndarray, sd_pair: float) -> Draw:
    def draw(rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
        d = shift[None, None, :] + sd_pair * rng.standard_normal((*rows.shape, holds.shape[1]))
        return np.where(holds[rows], d, np.nan)
    return draw


class SimResult(NamedTuple):
    """Per replication: each country's verdict code and the triplets asked when it was
    decided (the cap's, if never), the triplets asked in all, and the final pairs' n,
    mean and sd per country."""

    codes: np.ndarray
    decided_at: np.ndarray
    asked: np.ndarray
    n: np.ndarray
    mean: np.ndarray
    sd: np.ndarray


def simulate(pop: Population, draw: Draw, *, margin: float, max_triplets: int,
             batch: int = 10, alpha: float = sq.ALPHA, beta: float = sq.BETA,
             reps: int = REPS, seed: int = SEED) -> SimResult:
    rng = np.random.default_rng(seed)
    k = pop.holds.shape[1]
    limits = sq.bounds(alpha, beta, k)
    n, s1, s2 = (np.zeros((reps, k)) for _ in range(3))
    up, down = (np.zeros((reps, k), np.int8) for _ in range(2))
    codes = np.zeros((reps, k), np.int8)
    decided_at = np.full((reps, k), max_triplets)
    asked = np.zeros(reps, np.int64)
    cap = min(max_triplets, len(pop.holds))
    while True:
        open_ = codes == sq.OPEN
        active = open_.any(axis=1) & (asked < cap)
        if not active.any():
            break
        # candidates: enough draws that `batch` of them hold an open country, nearly always
        m = batch * 6
        rows = rng.integers(0, len(pop.holds), size=(reps, m))
        useful = (pop.holds[rows] & open_[:, None, :]).any(axis=2)
        want = np.minimum(batch, cap - asked)[:, None]
        take = useful & (np.cumsum(useful, axis=1) <= want) & active[:, None]
        d = np.where(take[..., None], draw(rng, rows), np.nan)
        got = np.isfinite(d)
        n += got.sum(axis=1)
        s1 += np.where(got, d, 0.0).sum(axis=1)
        s2 += np.where(got, d * d, 0.0).sum(axis=1)
        asked += take.sum(axis=1)
        mean = s1 / np.maximum(n, 1)
        sd = np.sqrt(np.maximum(s2 - n * mean**2, 0.0) / np.maximum(n - 1, 1))
        up, down = sq.step(up, down, n, mean, sd, margin, limits)
        new = np.where(open_, sq.verdicts(up, down), codes).astype(np.int8)
        decided_at = np.where(open_ & (new != sq.OPEN), asked[:, None], decided_at)
        codes = new
    mean = s1 / np.maximum(n, 1)
    sd = np.sqrt(np.maximum(s2 - n * mean**2, 0.0) / np.maximum(n - 1, 1))
    return SimResult(codes=codes, decided_at=decided_at, asked=asked, n=n, mean=mean, sd=sd)


def summary(res: SimResult, calls_per_triplet: int, *, shifted: int | None = None
            ) -> dict[str, Any]:
    """Mean and 95th percentile of the calls, and how often each verdict came: for the
    `shifted` country (index) and for the others, or for all when none is shifted."""
    calls = res.asked * calls_per_triplet
    others = [i for i in range(res.codes.shape[1]) if i != shifted]
    out: dict[str, Any] = {
        "replications": len(calls),
        "calls_mean": round(float(calls.mean()), 1),
        "calls_p95": int(np.percentile(calls, 95)),
        "p_false_regression": round(float((res.codes[:, others] == sq.REGRESSION)
                                          .any(axis=1).mean()), 4),
        "p_inconclusive": round(float((res.codes == sq.OPEN).any(axis=1).mean()), 4)}
    if shifted is not None:
        c = res.codes[:, shifted]
        at = res.decided_at[:, shifted] * calls_per_triplet
        out |= {"p_regression": round(float((c == sq.REGRESSION).mean()), 4),
                "p_no_change_at_shift": round(float((c == sq.NO_CHANGE).mean()), 4),
                "calls_to_flag_mean": round(float(at[c == sq.REGRESSION].mean()), 1)
                if (c == sq.REGRESSION).any() else None}
    else:
        out["p_no_change_all"] = round(float((res.codes == sq.NO_CHANGE).all(axis=1).mean()), 4)
    return out
