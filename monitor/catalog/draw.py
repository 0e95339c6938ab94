"""The seeded draw of a scenario's comparison pairs, so that every country is judged in
equal company (the catalogue's `python -m monitor.catalog.pairs`, an overlay's
`monitor catalog pairs NAME --dir DIR`, and validate's count of the pairs an overlay needs).

1. English side: slot k goes to the English-speaking country k mod (their number) in a
   seeded order (so each of US, GB, CA, AU gets 25 of 100 slots); within a
   country the options are used in a seeded shuffled cycle, so each option
   appears a nearly equal number of times.
2. Non-English side: the same over every other country that has options.
3. The non-English slots are shuffled and matched to the English slots;
   repeated (english, non-English) combinations are swapped away (the shipped
   pairs were drawn this way). Where the swaps leave a repeat (few options:
   most combinations are needed), the slots are matched by construction, each
   English option taking the distinct non-English options with the most slots
   left, which finds a matching without repeats whenever one exists (the
   constructive proof of the Gale-Ryser theorem); when the slots allow none,
   the slots are dealt again (a new seeded country order and cycles), a few times.

A draw never holds a repeated pair. `most_pairs` is the largest count a draw
gives with a seed, at most `pair_bound`: a side's countries share the slots
equally, so its smallest country, of n options, takes 1/k of them and can give
n x (options of the other side) distinct pairs. Odd shapes (a country of one
option beside one of six) give fewer, which the draw finds by trying.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping

from monitor.catalog.records import Option

__all__ = ["DEFAULT_SEED", "draw_pairs", "most_pairs", "pair_bound"]

DEFAULT_SEED = 2024
_DEALS = 40  # slot deals tried when the first one allows no matching without repeats


def _sides(options: Mapping[str, Option], english_countries: Collection[str]
           ) -> tuple[list[Option], list[Option]]:
    english = [o for o in options.values() if o.country in english_countries]
    other = [o for o in options.values() if o.country not in english_countries]
    return english, other


def pair_bound(options: Mapping[str, Option], english_countries: Collection[str]) -> int:
    """The distinct pairs a balanced draw aims for, at most (0 when a side is empty): with
    an equal share of the slots per country of a side, its smallest country (n options)
    gives n x (options of the other side) distinct pairs. A count above it would rest on
    which country gets a slot more, so the draw does not look there."""
    english, other = _sides(options, english_countries)
    if not english or not other:
        return 0
    bound = len(english) * len(other)
    for side, across in ((english, len(other)), (other, len(english))):
        per_country = Counter(o.country for o in side)
        bound = min(bound, len(per_country) * min(per_country.values()) * across)
    return bound


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


def _first_repeat(e_slots: list[str], n_slots: list[str]) -> int | None:
    seen: set[tuple[str, str]] = set()
    for i, combo in enumerate(zip(e_slots, n_slots, strict=True)):
        if combo in seen:
            return i
        seen.add(combo)
    return None


def _constructed(e_slots: list[str], n_slots: list[str], rng: random.Random) -> list[str] | None:
    """The non-English slots matched to `e_slots` without a repeated combination, or None
    when these slot counts allow none."""
    need = Counter(e_slots)
    left = Counter(n_slots)
    ties = {n: rng.random() for n in sorted(left)}
    partners: dict[str, list[str]] = {}
    for e in sorted(need, key=lambda e: (-need[e], e)):
        ranked = sorted((n for n in left if left[n] > 0), key=lambda n: (-left[n], ties[n]))
        if len(ranked) < need[e]:
            return None
        chosen = ranked[:need[e]]
        for n in chosen:
            left[n] -= 1
        partners[e] = rng.sample(chosen, len(chosen))
    return [partners[e].pop() for e in e_slots]


def _deal(english: list[Option], other: list[Option], count: int, rng: random.Random, *,
          swaps: bool) -> tuple[list[str], list[str]] | None:
    e_slots = _balanced_slots(english, count, rng)
    n_slots = _balanced_slots(other, count, rng)
    rng.shuffle(n_slots)
    if swaps:
        for _ in range(100 * count):
            clash = _first_repeat(e_slots, n_slots)
            if clash is None:
                return e_slots, n_slots
            j = rng.randrange(count)
            n_slots[clash], n_slots[j] = n_slots[j], n_slots[clash]
    matched = _constructed(e_slots, n_slots, rng)
    return None if matched is None else (e_slots, matched)


def _drawn(english: list[Option], other: list[Option], count: int, seed: int
           ) -> tuple[list[str], list[str]] | None:
    rng = random.Random(seed)
    for deal in range(_DEALS):
        got = _deal(english, other, count, rng, swaps=deal == 0)
        if got is not None:
            return got
    return None


def most_pairs(options: Mapping[str, Option], english_countries: Collection[str], seed: int,
               upto: int) -> int:
    """The largest count <= `upto` of distinct pairs a draw with `seed` gives (0: none)."""
    english, other = _sides(options, english_countries)
    count = min(upto, pair_bound(options, english_countries))
    # Each count is dealt as draw_pairs deals it, so that it gives what this says.
    while count > 0 and _drawn(english, other, count, seed) is None:
        count -= 1
    return count


def draw_pairs(options: Mapping[str, Option], english_countries: Collection[str], count: int,
               seed: int) -> list[tuple[str, str, str]]:
    """(pair_id, english_option_id, non_english_option_id) rows, all distinct. ValueError
    (one line) when a side has no option or the options cannot give `count` pairs."""
    english, other = _sides(options, english_countries)
    if not english or not other:
        raise ValueError("pairs need options from both an English-speaking country "
                         f"({', '.join(sorted(english_countries))}) and another country")
    if count < 1:
        raise ValueError(f"--count {count}: draw at least one pair")
    got = _drawn(english, other, count, seed)
    if got is None:
        most = most_pairs(options, english_countries, seed, count)
        raise ValueError(f"these {len(options)} options give at most {most} distinct pairs "
                         f"in a balanced draw (seed {seed}), fewer than the {count} asked; "
                         f"ask --count {most} or add options (most to the country with "
                         "the fewest)")
    width = len(str(count))
    return [(f"p{i + 1:0{width}d}", e, n) for i, (e, n) in enumerate(zip(*got, strict=True))]
