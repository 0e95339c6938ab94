"""`monitor catalog validate` / `monitor catalog stats`."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from monitor.catalog import load_catalog, read_catalog

__all__ = ["catalog_stats", "catalog_validate"]


def catalog_validate(args: argparse.Namespace) -> int:
    catalog, problems = read_catalog(args.catalog)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"catalog invalid: {len(problems)} problem(s)", file=sys.stderr)
        return 2
    assert catalog is not None
    n_opts = sum(len(s.options) for s in catalog.scenarios.values())
    print(f"catalog ok: {catalog.root} version {catalog.version}, "
          f"{len(catalog.scenarios)} scenarios, {n_opts} options, "
          f"{len(catalog.languages)} languages ({', '.join(catalog.languages)})")
    return 0


def catalog_stats(args: argparse.Namespace) -> int:
    cat = load_catalog(args.catalog)
    langs = list(cat.languages)
    print(f"catalog {cat.root} version {cat.version}")
    for name, scen in cat.scenarios.items():
        triplets = Counter(scen.options[t.target_id].country for t in scen.triplets())
        in_pairs = Counter(scen.options[i].country for p in scen.pairs
                           for i in (p.english_id, p.non_english_id))
        countries = Counter(o.country for o in scen.options.values())
        print(f"\n{name}: {len(scen.options)} options, {len(scen.pairs)} pairs, "
              f"{sum(triplets.values())} triplets, {len(countries)} countries")
        head = f"  {'country':<8}{'local':<7}{'options':>8}{'in pairs':>9}{'triplets':>9}  "
        print(head + "  ".join(f"{lang:>3}" for lang in langs))
        for country in sorted(countries):
            named = [sum(1 for o in scen.options.values()
                         if o.country == country and o.names.get(lang)) for lang in langs]
            local = cat.local_language(country) or "-"
            print(f"  {country:<8}{local:<7}{countries[country]:>8}{in_pairs[country]:>9}"
                  f"{triplets[country]:>9}  " + "  ".join(f"{n:>3}" for n in named))
    return 0
