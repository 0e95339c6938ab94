"""Sampling: stratified, full coverage per cycle, reproducible, balanced."""

from __future__ import annotations

from collections import Counter

import pytest

from monitor.catalog import VARIANTS, Catalog
from monitor.measure.sampling import Sampler

SCENARIOS = ["university", "relocation", "travel"]


def _sampler(cat: Catalog, size: int = 40, seed: int = 0) -> Sampler:
    return Sampler(cat, scenarios=SCENARIOS, variants=list(VARIANTS), seed=seed,
                   triplets_per_run=size)


def test_same_seed_same_sample_other_seed_other_sample(shipped_catalog: Catalog) -> None:
    a = _sampler(shipped_catalog).sample(7)
    b = _sampler(shipped_catalog).sample(7)
    c = _sampler(shipped_catalog, seed=1).sample(7)
    assert a == b
    assert [s.triplet for s in a] != [s.triplet for s in c]
    assert [s.triplet for s in a] != [s.triplet for s in _sampler(shipped_catalog).sample(8)]


def test_every_triplet_once_per_cycle(shipped_catalog: Catalog) -> None:
    s = _sampler(shipped_catalog, size=500)
    draws = [s.spec_at(g).triplet for g in range(s.population)]
    assert len(set(draws)) == s.population
    expected = {t for name in SCENARIOS for t in shipped_catalog.scenarios[name].triplets()}
    assert set(draws) == expected
    # Runs walk the cycle: the union of one cycle's runs is every triplet.
    runs = [x.triplet for r in range(s.runs_per_cycle) for x in s.sample(r)
            if x.cycle == 0]
    assert Counter(runs) == Counter(expected)
    # The next cycle is a different order of the same triplets.
    nxt = [s.spec_at(s.population + g).triplet for g in range(200)]
    assert nxt != draws[:200]


def test_runs_are_stratified_by_scenario_and_target_country(shipped_catalog: Catalog) -> None:
    s = _sampler(shipped_catalog, size=200)
    sizes = {k: len(v) for k, v in s.strata.items()}
    for run in range(5):
        got = Counter((x.triplet.scenario,
                       shipped_catalog.option(x.triplet.scenario, x.triplet.target_id).country)
                      for x in s.sample(run))
        for stratum, m in sizes.items():
            expected = 200 * m / s.population
            assert abs(got[stratum] - expected) <= 2, (run, stratum, got[stratum], expected)


def test_variants_and_positions_are_balanced_in_every_run(shipped_catalog: Catalog) -> None:
    s = _sampler(shipped_catalog, size=48)
    for run in range(6):
        specs = s.sample(run)
        variants = Counter(x.variant for x in specs)
        positions = Counter(x.rotation for x in specs)
        assert set(variants) == set(VARIANTS)
        assert max(variants.values()) - min(variants.values()) <= 1
        assert max(positions.values()) - min(positions.values()) <= 1
        for x in specs:
            assert sorted(x.order) == sorted(x.triplet.option_ids)


def test_a_run_never_repeats_a_triplet(shipped_catalog: Catalog) -> None:
    s = _sampler(shipped_catalog, size=1000)
    # This run straddles the end of cycle 0 and the start of cycle 1.
    run = s.population // 1000
    specs = s.sample(run)
    assert {x.cycle for x in specs} == {0, 1}
    assert len({x.triplet for x in specs}) == len(specs)


def test_bad_arguments_are_rejected(shipped_catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        Sampler(shipped_catalog, scenarios=["cooking"], variants=["plain"], seed=0,
                triplets_per_run=5)
    with pytest.raises(ValueError, match="unknown variant"):
        Sampler(shipped_catalog, scenarios=SCENARIOS, variants=["pirate"], seed=0,
                triplets_per_run=5)
