"""Which triplets a run asks, in which variant and option order.

Design (docs/statistics.md, "Sampling"):
- The unit is the triplet, asked in every configured language with one
  variant (paired design); a run never repeats a triplet.
- The population is the monitored triplets: those whose three options come
  from three different monitored countries (a country is monitored when its
  local language is asked). Each such unit feeds three MD cells, and no cell
  is starved by options nobody measures: at the paper's six languages the
  worst cell gets 29% of a run's units instead of 8% over every triplet. A
  scenario with no monitored triplet keeps all its triplets.
- Strata are scenario x target country. A cycle is one seeded permutation of
  every stratum, interleaved systematically (element k of a stratum of size m
  gets the key (k + u)/m, u a seeded offset), so any run-sized window of the
  cycle holds each stratum in proportion to its size, +-1.
- Runs walk the cycle in consecutive windows: draw g = run_index * size + k
  is element g mod N of cycle g // N. Every triplet is asked exactly once per
  N draws; the next cycle is reshuffled. A run that straddles two cycles
  asks a triplet met in both only once.
- The variant rotates like a Latin square, v = (position + cycle) mod V, and
  the target's position among the three options like (position // V + cycle)
  mod 3, so every run has the same mix of variants and positions and a
  change of mix can never look like drift.
Everything is reproducible from (catalog version, seed, asked languages, run index).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from monitor.catalog import VARIANTS, Catalog, Triplet
from monitor.store import RunRow

__all__ = ["ProbeSpec", "Sampler"]

K = TypeVar("K")
V = TypeVar("V")

_ORDERS: dict[tuple[str, int, tuple[str, ...], tuple[str, ...], int], tuple[Triplet, ...]] = {}
_STRATA: dict[tuple[str, tuple[str, ...], tuple[str, ...], bool],
              dict[tuple[str, str], list[Triplet]]] = {}
_HOLDING: dict[tuple[str, tuple[str, ...], tuple[str, ...], bool, str], tuple[Triplet, ...]] = {}


def _memo(cache: dict[K, V], key: K, make: Callable[[], V]) -> V:
    """`make()` once per key in this process; the 8 newest keys are kept."""
    if key not in cache:
        if len(cache) >= 8:
            cache.pop(next(iter(cache)))
        cache[key] = make()
    return cache[key]


@dataclass(frozen=True)
class ProbeSpec:
    """One sampled triplet: asked in every language with this variant/order."""

    triplet: Triplet
    variant: str
    order: tuple[str, str, str]  # option ids as shown, labels A, B, C
    cycle: int
    position: int  # index within the cycle

    @property
    def rotation(self) -> int:
        return self.order.index(self.triplet.target_id)


class Sampler:
    """Deterministic sampling of triplets for successive runs."""

    def __init__(self, catalog: Catalog, *, scenarios: list[str], variants: list[str],
                 seed: int, triplets_per_run: int,
                 languages: Sequence[str] | None = None) -> None:
        """`languages`: the asked languages, whose local countries are monitored; None
        samples every triplet of the scenarios."""
        unknown = [s for s in scenarios if s not in catalog.scenarios]
        if unknown:
            raise ValueError(f"unknown scenario(s) {unknown}; the catalog has "
                             f"{sorted(catalog.scenarios)}")
        bad = [v for v in variants if v not in VARIANTS]
        if bad or not variants:
            raise ValueError(f"unknown variant(s) {bad}; choose from {list(VARIANTS)}")
        self.catalog = catalog
        self.scenarios = list(scenarios)
        self.variants = list(variants)
        self.seed = seed
        self.monitored = catalog.monitored(languages) if languages is not None else None
        # Each run builds a Sampler: the strata (a pass over every triplet) are made once
        # per catalogue, scenarios and languages in a process.
        key = (catalog.version, tuple(self.scenarios), tuple(sorted(self.monitored or ())),
               self.monitored is None)
        self.strata = _memo(_STRATA, key, self._strata)
        self.population = sum(len(t) for t in self.strata.values())
        if self.population == 0:
            raise ValueError("the selected scenarios have no triplets")
        # A run larger than the population would have to repeat triplets.
        self.triplets_per_run = max(1, min(triplets_per_run, self.population))

    @classmethod
    def of_run(cls, catalog: Catalog, run: RunRow) -> Sampler:
        """The sampler that asked (or asks) `run`: its scenarios, variants, seed, size
        and languages."""
        return cls(catalog, scenarios=run.scenarios, variants=run.variants, seed=run.seed,
                   triplets_per_run=run.triplets, languages=run.languages)

    def _strata(self) -> dict[tuple[str, str], list[Triplet]]:
        strata: dict[tuple[str, str], list[Triplet]] = defaultdict(list)
        for name in self.scenarios:
            scen = self.catalog.scenarios[name]
            members = (list(scen.triplets()) if self.monitored is None
                       else scen.monitored_triplets(self.monitored))
            for t in members:
                strata[(name, scen.options[t.target_id].country)].append(t)
        return dict(sorted(strata.items()))

    @property
    def runs_per_cycle(self) -> int:
        return math.ceil(self.population / self.triplets_per_run)

    def cycle_order(self, cycle: int) -> tuple[Triplet, ...]:
        # Each run builds a new Sampler; the order of a cycle depends only on
        # this key, so it is computed once per process, not once per run.
        key = (self.catalog.version, self.seed, tuple(self.scenarios),
               tuple(sorted(self.monitored or ())), cycle)
        return _memo(_ORDERS, key, lambda: self._order(cycle))

    def _order(self, cycle: int) -> tuple[Triplet, ...]:
        rng = random.Random(f"{self.catalog.version}:{self.seed}:{cycle}")
        keyed: list[tuple[float, int, Triplet]] = []
        for s_index, members in enumerate(self.strata.values()):
            perm = rng.sample(members, len(members))
            offset = rng.random()
            m = len(perm)
            keyed.extend(((k + offset) / m, s_index, t) for k, t in enumerate(perm))
        keyed.sort(key=lambda x: (x[0], x[1]))
        return tuple(t for _, _, t in keyed)

    def spec_at(self, draw: int) -> ProbeSpec:
        cycle, pos = divmod(draw, self.population)
        triplet = self.cycle_order(cycle)[pos]
        n_var = len(self.variants)
        variant = self.variants[(pos + cycle) % n_var]
        rotation = (pos // n_var + cycle) % 3
        ids = triplet.option_ids
        order = (ids[-rotation:] + ids[:-rotation]) if rotation else ids
        return ProbeSpec(triplet, variant, (order[0], order[1], order[2]), cycle, pos)

    def holding(self, country: str) -> tuple[Triplet, ...]:
        """The population's triplets with an option of `country` (a top-up's pool)."""
        key = (self.catalog.version, tuple(self.scenarios),
               tuple(sorted(self.monitored or ())), self.monitored is None, country)

        def make() -> tuple[Triplet, ...]:
            out = []
            for (scen, _), members in self.strata.items():
                options = self.catalog.scenarios[scen].options
                out += [t for t in members
                        if any(options[o].country == country for o in t.option_ids)]
            return tuple(out)
        return _memo(_HOLDING, key, make)

    def topup(self, run_index: int, country: str, start: int, k: int,
              exclude: set[str]) -> list[ProbeSpec]:
        """Fresh triplets holding `country` for run `run_index`'s top-up: draws start ..
        start + k of a seeded order of the pool without the `exclude`d triplet ids
        (the run's own), reproducible; variant and order rotate as in a run."""
        pool = [t for t in self.holding(country) if t.id not in exclude]
        rng = random.Random(f"{self.catalog.version}:{self.seed}:topup:{run_index}:{country}")
        order = rng.sample(pool, len(pool))
        n_var = len(self.variants)
        specs = []
        for pos in range(start, min(start + k, len(order))):
            t = order[pos]
            rotation = (pos // n_var) % 3
            ids = t.option_ids
            o = (ids[-rotation:] + ids[:-rotation]) if rotation else ids
            specs.append(ProbeSpec(t, self.variants[pos % n_var], (o[0], o[1], o[2]), -1, pos))
        return specs

    def sample(self, run_index: int) -> list[ProbeSpec]:
        """The triplets of run `run_index` (0-based, counted per endpoint)."""
        if run_index < 0:
            raise ValueError("run_index must be >= 0")
        start = run_index * self.triplets_per_run
        specs: list[ProbeSpec] = []
        seen: set[Triplet] = set()
        for k in range(self.triplets_per_run):
            spec = self.spec_at(start + k)
            # A run that straddles two cycles may meet a triplet twice: asking
            # it again in the same run adds nothing, so it is asked once.
            if spec.triplet not in seen:
                seen.add(spec.triplet)
                specs.append(spec)
        return specs
