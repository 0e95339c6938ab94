"""Draw the fixed comparison pairs of a scenario (seeded, reproducible).

    python -m monitor.catalog.pairs [--catalog DIR] [--scenario NAME] [--count 100] [--seed 2024]

How a pair set is drawn, so that every country is judged in equal company:
1. English side: slot k goes to the English-speaking country k mod 4 in a
   seeded order (so each of US, GB, CA, AU gets 25 of 100 slots); within a
   country the options are used in a seeded shuffled cycle, so each option
   appears a nearly equal number of times.
2. Non-English side: the same over every other country that has options.
3. The non-English slots are shuffled and matched to the English slots;
   repeated (english, non-English) combinations are swapped away.
The tests redraw the shipped pairs and require the same file.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections import defaultdict
from pathlib import Path

from monitor.catalog.load import default_catalog_dir
from monitor.catalog.records import Option, Problem
from monitor.catalog.rules import check_languages, check_options

DEFAULT_SEED = 2024
DEFAULT_COUNT = 100


def _balanced_slots(options: list[Option], count: int, rng: random.Random) -> list[str]:
    by_country: dict[str, list[str]] = defaultdict(list)
    for opt in options:
        by_country[opt.country].append(opt.id)
    countries = sorted(by_country)
    rng.shuffle(countries)
    cycles = {c: rng.sample(ids, len(ids)) for c, ids in sorted(by_country.items())}
    used: dict[str, int] = defaultdict(int)
    slots: list[str] = []
    for k in range(count):
        country = countries[k % len(countries)]
        ids = cycles[country]
        slots.append(ids[used[country] % len(ids)])
        used[country] += 1
    return slots


def draw_pairs(options: dict[str, Option], english_countries: tuple[str, ...], count: int,
               seed: int) -> list[tuple[str, str, str]]:
    """(pair_id, english_option_id, non_english_option_id) rows."""
    rng = random.Random(seed)
    english = [o for o in options.values() if o.country in english_countries]
    other = [o for o in options.values() if o.country not in english_countries]
    if not english or not other:
        raise ValueError("pairs need options from both English and non-English countries")
    e_slots = _balanced_slots(english, count, rng)
    n_slots = _balanced_slots(other, count, rng)
    rng.shuffle(n_slots)
    # Swap away repeated combinations; bounded because there are far more
    # distinct combinations than pairs.
    for _ in range(100 * count):
        seen: set[tuple[str, str]] = set()
        clash = None
        for i, combo in enumerate(zip(e_slots, n_slots, strict=True)):
            if combo in seen:
                clash = i
                break
            seen.add(combo)
        if clash is None:
            break
        j = rng.randrange(count)
        n_slots[clash], n_slots[j] = n_slots[j], n_slots[clash]
    width = len(str(count))
    return [(f"p{i + 1:0{width}d}", e, n) for i, (e, n) in enumerate(zip(e_slots, n_slots,
                                                                          strict=True))]


def write_pairs(path: Path, rows: list[tuple[str, str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["pair_id", "english_option_id", "non_english_option_id"])
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m monitor.catalog.pairs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog", type=Path, default=default_catalog_dir())
    ap.add_argument("--scenario", action="append", help="default: every options/*.csv")
    ap.add_argument("--count", type=int, default=DEFAULT_COUNT)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    problems: list[Problem] = []
    languages = check_languages(args.catalog / "languages.yaml", problems)
    names = args.scenario or sorted(p.stem for p in (args.catalog / "options").glob("*.csv"))
    for name in names:
        options = check_options(args.catalog / "options" / f"{name}.csv", languages, problems)
        if problems:
            for p in problems:
                print(p, file=sys.stderr)
            return 2
        rows = draw_pairs(options, languages["en"], args.count, args.seed)
        out = args.catalog / "pairs" / f"{name}.csv"
        out.parent.mkdir(exist_ok=True)
        write_pairs(out, rows)
        print(f"wrote {len(rows)} pairs to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
