"""The shipped pairs are exactly what the documented seeded draw produces."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.catalog import Catalog, Option, default_catalog_dir
from monitor.catalog.draw import most_pairs, pair_bound
from monitor.catalog.pairs import DEFAULT_COUNT, DEFAULT_SEED, draw_pairs, main


def test_shipped_pairs_are_reproducible(shipped_catalog: Catalog) -> None:
    for name, scen in shipped_catalog.scenarios.items():
        rows = draw_pairs(scen.options, shipped_catalog.languages["en"], DEFAULT_COUNT,
                          DEFAULT_SEED)
        path = default_catalog_dir() / "pairs" / f"{name}.csv"
        with path.open(encoding="utf-8") as fh:
            shipped = [(r["pair_id"], r["english_option_id"], r["non_english_option_id"])
                       for r in csv.DictReader(fh)]
        assert rows == shipped, name


def test_draw_balances_countries_and_options(shipped_catalog: Catalog) -> None:
    scen = shipped_catalog.scenarios["university"]
    rows = draw_pairs(scen.options, shipped_catalog.languages["en"], 100, seed=99)
    assert len({(e, n) for _, e, n in rows}) == 100
    for side in (1, 2):
        per_country = Counter(scen.options[r[side]].country for r in rows)
        assert max(per_country.values()) - min(per_country.values()) <= 1
        per_option = Counter(r[side] for r in rows)
        for country in per_country:
            uses = [per_option[o.id] for o in scen.options.values() if o.country == country]
            assert max(uses) - min(uses) <= 1


def test_cli_writes_the_pairs_file(catalog_dir: Path) -> None:
    (catalog_dir / "pairs" / "travel.csv").unlink()
    assert main(["--catalog", str(catalog_dir), "--scenario", "travel"]) == 0
    assert (catalog_dir / "pairs" / "travel.csv").read_bytes() == (
        default_catalog_dir() / "pairs" / "travel.csv").read_bytes()


ENGLISH = ("US", "GB", "CA", "AU")


def _options(shape: dict[str, int]) -> dict[str, Option]:
    return {f"{c.lower()}{i}": Option(f"{c.lower()}{i}", c, {})
            for c, n in shape.items() for i in range(n)}


@settings(max_examples=60, deadline=None)
@given(shape=st.dictionaries(st.sampled_from(["US", "GB", "AU", "FR", "DE", "JP", "CH"]),
                             st.integers(1, 6), min_size=2, max_size=5),
       seed=st.integers(0, 10_000), ask=st.integers(1, 100))
def test_a_draw_never_repeats_a_pair_and_says_when_it_cannot(
        shape: dict[str, int], seed: int, ask: int) -> None:
    options = _options(shape)
    if pair_bound(options, ENGLISH) == 0:
        with pytest.raises(ValueError, match="both an English-speaking country"):
            draw_pairs(options, ENGLISH, ask, seed)
        return
    try:
        rows = draw_pairs(options, ENGLISH, ask, seed)
    except ValueError as exc:
        most = most_pairs(options, ENGLISH, seed, ask)
        assert most < ask and f"at most {most} distinct pairs" in str(exc)
        if most:
            assert len(draw_pairs(options, ENGLISH, most, seed)) == most  # as it says
        return
    assert len({(e, n) for _, e, n in rows}) == len(rows) == ask
    for side in (1, 2):
        per_country = Counter(options[r[side]].country for r in rows)
        assert max(per_country.values()) - min(per_country.values()) <= 1


def test_a_shape_the_swaps_left_repeats_in_is_drawn_by_construction() -> None:
    # 9 options in 3 countries: every one of the 18 pairs, once.
    options = _options({"US": 3, "FR": 3, "DE": 3})
    rows = draw_pairs(options, ENGLISH, 18, DEFAULT_SEED)
    assert len({(e, n) for _, e, n in rows}) == 18 == pair_bound(options, ENGLISH)
    # Here the swaps alone returned 15 pairs of which 14 distinct, silently.
    options = _options({"GB": 6, "AU": 1, "CA": 1, "DE": 6, "FR": 1})
    assert len({(e, n) for _, e, n in draw_pairs(options, ENGLISH, 15, 911491)}) == 15
