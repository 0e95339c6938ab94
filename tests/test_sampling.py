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


SIX = ["en", "ja", "zh", "fr", "de", "ko"]


def _cell_shares(cat: Catalog, specs: list, languages: list[str]) -> dict[str, float]:
    cells = Counter(c for x in specs for c in {cat.option(x.triplet.scenario, o).country
                                                for o in x.triplet.option_ids})
    return {c: cells[c] / len(specs) for c in cat.monitored(languages)}


def test_a_run_asks_only_triplets_of_three_monitored_countries(shipped_catalog: Catalog) -> None:
    s = Sampler(shipped_catalog, scenarios=SCENARIOS, variants=list(VARIANTS), seed=0,
                triplets_per_run=200, languages=SIX)
    monitored = shipped_catalog.monitored(SIX)
    assert monitored == {"US", "GB", "CA", "AU", "JP", "CN", "FR", "DE", "KR"}
    every = [t for name in SCENARIOS for t in shipped_catalog.scenarios[name].triplets()]
    assert s.population < len(every) / 10  # MX, BR, IT... options are nobody's here
    specs = [x for r in range(3) for x in s.sample(r)]
    for x in specs:
        countries = {shipped_catalog.option(x.triplet.scenario, o).country
                     for o in x.triplet.option_ids}
        assert len(countries) == 3 and countries <= monitored, x.triplet
    # Every unit feeds three cells, so no cell is starved: each holds 30-42% of the
    # population (docs/statistics.md), 25-45% of these 600 draws (of every triplet, the
    # non-English cells would hold 8-10%).
    shares = _cell_shares(shipped_catalog, specs, SIX)
    assert min(shares.values()) > 0.25 and max(shares.values()) < 0.45, shares
    uniform = Sampler(shipped_catalog, scenarios=SCENARIOS, variants=list(VARIANTS), seed=0,
                      triplets_per_run=600)
    assert min(_cell_shares(shipped_catalog, uniform.sample(0), SIX).values()) < 0.12
    # Still one full cycle over that population, every triplet once.
    draws = {s.spec_at(g).triplet for g in range(s.population)}
    assert len(draws) == s.population


def test_the_languages_asked_choose_the_population(shipped_catalog: Catalog) -> None:
    def sampler(langs: list[str]) -> Sampler:
        return Sampler(shipped_catalog, scenarios=SCENARIOS, variants=["plain"], seed=0,
                       triplets_per_run=300, languages=langs)

    spanish = sampler(["en", "es"])
    for x in spanish.sample(0):
        countries = {shipped_catalog.option(x.triplet.scenario, o).country
                     for o in x.triplet.option_ids}
        assert countries <= {"US", "GB", "CA", "AU", "ES", "MX", "AR", "CO", "CL"}
    assert sampler(["en", "es"]).sample(4) == spanish.sample(4)  # reproducible
    assert [x.triplet for x in sampler(SIX).sample(0)] != [x.triplet for x in spanish.sample(0)]
    # A language that is nobody's local one adds no country: en alone cannot fill three
    # different countries' slots with a non-English one, so every triplet is kept.
    alone = sampler(["en"])
    every = sum(1 for name in SCENARIOS for _ in shipped_catalog.scenarios[name].triplets())
    assert alone.population == every
