"""The shipped pairs are exactly what the documented seeded draw produces."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from monitor.catalog import Catalog, default_catalog_dir
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
