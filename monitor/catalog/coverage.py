"""What a catalogue's (or a team's overlay's) countries need: enough options of each
local country in every scenario, and names that say which country they are."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from monitor.catalog.records import Option, Problem

__all__ = ["CITY_STATES", "MIN_LOCAL_OPTIONS", "check_local_coverage", "check_names_across",
           "check_overlay_coverage", "min_options"]

MIN_LOCAL_OPTIONS = 3
#: Countries that are one city: in a scenario of cities their one option is all there is,
#: so one is enough (Hong Kong, local to zh-Hant, in relocation and travel).
CITY_STATES = frozenset({"HK", "SG", "MO"})


def min_options(country: str) -> int:
    """The options a local country needs in a scenario (catalogue and overlay alike)."""
    return 1 if country in CITY_STATES else MIN_LOCAL_OPTIONS


def check_local_coverage(languages: Mapping[str, tuple[str, ...]],
                         scenarios: Mapping[str, Mapping[str, Option]], where: Path,
                         problems: list[Problem]) -> None:
    """Every country that languages.yaml makes local has >= 3 options in every scenario:
    with fewer, its MD rests on one or two options and says little about the country.
    A city-state (CITY_STATES) needs one: the city is the country."""
    for name, options in scenarios.items():
        counts: dict[str, int] = {}
        for opt in options.values():
            counts[opt.country] = counts.get(opt.country, 0) + 1
        for lang, countries in languages.items():
            for country in countries:
                least = min_options(country)
                if counts.get(country, 0) < least:
                    problems.append(Problem(
                        str(where / "options" / f"{name}.csv"),
                        f"country {country} (local to {lang!r} in languages.yaml) has "
                        f"{counts.get(country, 0)} option(s) in {name}, fewer than "
                        f"{least}", fix=f"add {country} options to {name} or take "
                        f"{country} out of the `{lang}` entry"))


def check_names_across(scenarios: Mapping[str, Mapping[str, Option]], where: Path,
                       problems: list[Problem]) -> None:
    """A name that another scenario's option of another country also has in the same
    language (ar قرطاجنة: Cartagena in Colombia and in Spain) is ambiguous to the model
    and to the reader of an answer: it needs its country, as Córdoba (Argentina) has.
    Within a scenario the names are unique already (check_options); the same place in
    two scenarios (Lisbon, relocation and travel) has one country and is no problem."""
    seen: dict[tuple[str, str], tuple[str, Option]] = {}
    for scen, options in scenarios.items():
        for opt in options.values():
            for lang, name in opt.names.items():
                key = (lang, " ".join(name.casefold().split()))
                first = seen.setdefault(key, (scen, opt))
                if first[1].country != opt.country:
                    problems.append(Problem(
                        str(where / "options" / f"{scen}.csv"),
                        f"option {opt.id} ({opt.country}): {lang} name {name!r} is also "
                        f"{first[0]}'s {first[1].id} ({first[1].country})", column=lang,
                        fix="add the country to one of them, as `Córdoba (Argentina)`"))


def check_overlay_coverage(name: str, options: Mapping[str, Option],
                           languages: Mapping[str, tuple[str, ...]], where: Path,
                           problems: list[Problem]) -> None:
    """A team's own scenario is sized for its domain: only the countries it has options in
    count, each local one with >= 3 of them (fewer say little about the country), and it
    needs options on both sides of a pair (an English-speaking country and another)."""
    if not options:
        return  # a skeleton: its TODO row says what to add
    f = str(where / "options" / f"{name}.csv")
    english = languages.get("en", ())
    counts = Counter(o.country for o in options.values())
    for country, n in sorted(counts.items()):
        local = next((lang for lang, cs in languages.items() if country in cs), None)
        if local is not None and n < (least := min_options(country)):
            problems.append(Problem(
                f, f"country {country} (local to {local!r}) has {n} option(s) in {name}, fewer "
                f"than {least}", fix=f"add {least - n} more {country} "
                f"option(s), or remove its {n}"))
    if not any(c in english for c in counts):
        problems.append(Problem(f, f"{name} has no option in an English-speaking country "
                                f"({', '.join(english)}): each pair holds one",
                                fix=f"add at least {MIN_LOCAL_OPTIONS} options of one of them"))
    if all(c in english for c in counts):
        problems.append(Problem(f, f"{name} has options only in English-speaking countries: "
                                "each pair holds one from another country",
                                fix=f"add at least {MIN_LOCAL_OPTIONS} options of a country "
                                "local to another of its languages"))
