"""The rules a probe catalog must satisfy. Each check appends Problems and
returns what it could read, so that one pass reports everything wrong.

Rules that depend on a language's script (zh must be Simplified Chinese, ko
must be Hangul...) apply to the languages listed in SCRIPTS; every other rule
applies to every language in languages.yaml, so a seventh language needs
only data.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from importlib import resources
from pathlib import Path

from monitor.catalog.draw import DEFAULT_SEED, most_pairs, pair_bound
from monitor.catalog.files import YamlError, load_yaml, read_csv
from monitor.catalog.records import Option, Pair, Problem, base_language
from monitor.catalog.scripts import name_problems

_ID = re.compile(r"^[a-z0-9][a-z0-9_]*$")
# A language (ISO 639-1: `pt`) or a locale of one (BCP 47 with a region or script
# subtag: `pt-PT`, `zh-Hant`), which inherits what it does not override from its base.
_LANG = re.compile(r"^[a-z]{2,3}(?:-(?:[A-Z][a-z]{3}|[A-Z]{2}))?$")
#: The pairs of a catalogue scenario; an overlay's may be fewer (pairs_needed).
MIN_PAIRS = 100
# In prose (prompt texts) a question mark is no placeholder; a TODO or <...> is.
_TEXT_PLACEHOLDER = re.compile(r"\b(?:TODO|TBD|FIXME|XXX)\b|<[^>]*>|\{\w*\}", re.I)


def looks_like_placeholder(text: str) -> bool:
    return bool(_TEXT_PLACEHOLDER.search(text))


def draw_command(scenario: str, root: Path, *, overlay: bool) -> str:
    """The command that draws a scenario's pairs: every hint about pairs prints it."""
    if overlay:
        return f"monitor catalog pairs {scenario} --dir {root}"
    return f"python -m monitor.catalog.pairs --catalog {root} --scenario {scenario}"


def is_todo(cell: str) -> bool:
    """A row of a skeleton (`monitor catalog new-scenario`) left to fill in: its first cell
    starts with TODO. It is reported once, as what is left to do, and nothing else is
    checked about it (a skeleton validates except for its TODO markers)."""
    return cell.strip().upper().startswith("TODO")


def todo_rows(f: str, rows: list[tuple[int, dict[str, str]]], first: str, todo: str,
               problems: list[Problem]) -> list[tuple[int, dict[str, str]]]:
    """The rows that are not TODO rows; a TODO row is one problem saying what to do."""
    kept = []
    for line, row in rows:
        if is_todo(row.get(first) or ""):
            problems.append(Problem(f, "TODO row left to fill in", fix=todo, row=line))
        else:
            kept.append((line, row))
    return kept


def pairs_needed(options: Mapping[str, Option], english_countries: Collection[str], *,
                 overlay: bool, have: int = 0) -> int:
    """The pairs a scenario must have: 100 in the catalogue (the paper's design); in an
    overlay 100, or every pair a draw of its options gives when that is fewer (a small
    team scenario: 9 options in 3 countries give 18). `have`: what the file holds, which
    spares the search for that number when it is 100 or the cheap bound."""
    if not overlay:
        return MIN_PAIRS
    bound = min(MIN_PAIRS, pair_bound(options, english_countries))
    if have >= bound:
        return bound
    return most_pairs(options, english_countries, DEFAULT_SEED, MIN_PAIRS)


def iso_countries() -> frozenset[str]:
    text = resources.files("monitor").joinpath("data/iso3166_alpha2.txt").read_text()
    return frozenset(text.split())


def check_languages(path: Path, problems: list[Problem]) -> dict[str, tuple[str, ...]]:
    try:
        raw = load_yaml(path)
    except YamlError as exc:  # its line number is worth showing
        problems.append(Problem(str(path), exc.problem, row=exc.line))
        return {}
    except OSError as exc:
        problems.append(Problem(str(path), f"cannot read: {exc.strerror}"))
        return {}
    if not isinstance(raw, dict) or not raw:
        problems.append(Problem(str(path), "must map language codes to lists of countries",
                                "e.g. `zh: [CN]`"))
        return {}
    iso, seen = iso_countries(), dict[str, str]()
    languages: dict[str, tuple[str, ...]] = {}
    for lang, countries in raw.items():
        if not isinstance(lang, str) or not _LANG.match(lang):
            problems.append(Problem(str(path), f"language code {lang!r} is not 2-3 lowercase "
                                    "letters, or such a code with a region or script",
                                    "use an ISO 639-1 code such as `es`, or a locale such as "
                                    "`pt-PT` or `zh-Hant`"))
            continue
        if (base := base_language(lang)) is not None and base not in raw:
            problems.append(Problem(str(path), f"locale {lang}: its language {base!r} is not "
                                    "in languages.yaml", f"add `{base}: [...]` (a locale "
                                    "inherits its language's names and prompts)"))
        if not isinstance(countries, list):
            problems.append(Problem(str(path), f"{lang}: expected a list of country codes",
                                    f"write `{lang}: [XX]` or `{lang}: []`"))
            continue
        for c in countries:
            if c not in iso:
                problems.append(Problem(str(path), f"{lang}: {c!r} is not an ISO 3166-1 alpha-2 "
                                        "country code", "use e.g. GB (not UK), KR, CN"))
            elif c in seen:
                problems.append(Problem(str(path), f"{c} is local to both {seen[c]} and {lang}",
                                        "give each country one local language"))
            else:
                seen[c] = lang
        languages[lang] = tuple(str(c) for c in countries)
    if "en" not in languages:
        problems.append(Problem(str(path), "no `en` entry: pairs need the English-speaking "
                                "countries", "add `en: [US, GB, CA, AU]`"))
    return languages


def check_options(path: Path, languages: dict[str, tuple[str, ...]],
                  problems: list[Problem], *, catalogue: Collection[str] = ()
                  ) -> dict[str, Option]:
    """The options of a scenario; `catalogue`: the catalogue's languages when the scenario
    is an overlay's (asked in `languages`, its columns), which cannot add a language."""
    f = str(path)
    try:
        header, raw_rows = read_csv(path)
    except ValueError as exc:
        problems.append(Problem(f, str(exc)))
        return {}
    rows = raw_rows
    # Two formats: `id,country,<languages>` (every catalogue before 0.4), and
    # `option_id,country,<languages>`, which frees `id` for Indonesian.
    id_col = header[0] if header and header[0] in ("id", "option_id") else "id"
    if header[:2] != [id_col, "country"]:
        problems.append(Problem(f, f"header starts {header[:2]}, expected [option_id, country] "
                                "or [id, country]", row=1,
                                fix="the first columns must be `option_id,country` (or `id,"
                                    "country` in the older format)"))
    if id_col == "id" and "id" in languages:
        problems.append(Problem(f, "the language `id` (Indonesian) needs the option_id format",
                                row=1, fix="rename the first column from id to option_id"))
    for col in header[2:]:
        if col not in languages:
            fix = (f"name the column after a catalogue language ({', '.join(catalogue)}) or "
                   "remove it" if catalogue else f"add `{col}: [...]` to languages.yaml")
            where = "the catalogue" if catalogue else "languages.yaml"
            problems.append(Problem(f, f"column {col!r} is not a language in {where}",
                                    row=1, fix=fix))
    for lang in languages:
        # A locale's column may be left out: every name is then its language's.
        if lang not in header and base_language(lang) is None:
            problems.append(Problem(f, f"missing column for language {lang!r}", row=1,
                                    fix=f"add a `{lang}` column with every option's name"))
    named = [lang for lang in header[2:] if lang in languages]
    # rows is what is left when the skeleton's TODO row is reported (once).
    todo = (f"one row per option: its {id_col}, its country (ISO code) and its name in "
            f"{', '.join(named)}")
    rows = todo_rows(f, rows, id_col, todo, problems)
    skeleton = len(rows) < len(raw_rows)
    iso = iso_countries()
    options: dict[str, Option] = {}
    by_name: dict[tuple[str, str], str] = {}
    for line, row in rows:
        oid, country = row.get(id_col, "").strip(), row.get("country", "").strip()
        if not _ID.match(oid):
            problems.append(Problem(f, f"id {oid!r} must be lowercase letters, digits and _",
                                    row=line, column=id_col, fix="e.g. `tsinghua`"))
        elif oid in options:
            problems.append(Problem(f, f"duplicate id {oid!r}", row=line, column=id_col,
                                    fix="give every option its own id"))
        if country not in iso:
            problems.append(Problem(f, f"option {oid}: country {country!r} is not an ISO 3166-1 "
                                    "alpha-2 code", row=line, column="country",
                                    fix="use e.g. GB (not UK), US, CN, HK"))
        names: dict[str, str] = {}
        cols = [c for c in header[2:] if c in languages]
        # A locale without a column, or with a blank cell, writes the name as its language.
        for lang in _base_first([*cols, *(x for x in languages if x not in cols
                                          and base_language(x) is not None)]):
            name, base = row.get(lang) or "", base_language(lang)
            if lang not in cols and base not in names:
                continue  # no column, nor one of its language: reported as missing
            # A blank cell is the language's name where the file has it (an overlay asked
            # in pt-PT alone names its options in pt-PT: a blank there is blank).
            inherited = base is not None and not name.strip() and base in names
            if inherited and base is not None:
                name = names[base]
            names[lang] = name.strip()
            whose = f" (inherited from {base})" if inherited else ""
            for msg in name_problems(lang, name):
                problems.append(Problem(f, f"option {oid}: {lang} name {name!r}{whose} {msg}",
                                        row=line, column=lang, fix=f"write the {lang} name a "
                                        "native speaker would use"))
            key = (lang, name.strip().casefold())
            if name.strip() and key in by_name:
                problems.append(Problem(f, f"option {oid}: {lang} name {name!r}{whose} is also "
                                        f"used by {by_name[key]}", row=line, column=lang,
                                        fix="names must be unique within a language"))
            by_name.setdefault(key, oid)
        options.setdefault(oid, Option(oid, country, names))
    if not rows and not skeleton:
        problems.append(Problem(f, "no options", fix="add one row per option"))
    return options


def _base_first(langs: list[str]) -> list[str]:
    """The columns with every locale after its language, so that a blank cell can inherit."""
    return sorted(langs, key=lambda lang: base_language(lang) is not None)


def check_pairs(path: Path, options: dict[str, Option], languages: dict[str, tuple[str, ...]],
                problems: list[Problem], *, overlay: bool = False) -> list[Pair]:
    """The pairs file of a scenario; an overlay's may hold fewer than 100 (pairs_needed)."""
    f = str(path)
    root = path.parent.parent
    redraw = draw_command(path.stem, root, overlay=overlay)
    if not path.is_file():
        problems.append(Problem(f, "missing pairs file", fix=f"draw them: {redraw}"))
        return []
    try:
        header, raw_rows = read_csv(path)
    except ValueError as exc:
        problems.append(Problem(f, str(exc)))
        return []
    want = ["pair_id", "english_option_id", "non_english_option_id"]
    if header != want:
        problems.append(Problem(f, f"header is {header}, expected {want}", row=1,
                                fix=f"draw them again: {redraw}"))
        return []
    rows = todo_rows(f, raw_rows, "pair_id", f"draw the pairs: {redraw}", problems)
    if len(rows) < len(raw_rows):
        return []  # not drawn yet: the TODO row says how
    english = set(languages.get("en", ()))
    pairs: list[Pair] = []
    seen_ids: set[str] = set()
    seen_pairs: set[tuple[str, str]] = set()
    for line, row in rows:
        pid, e_id, n_id = (row[c].strip() for c in want)
        ok = True
        if not pid or pid in seen_ids:
            problems.append(Problem(f, f"pair_id {pid!r} is blank or repeated", row=line,
                                    column="pair_id", fix="give every pair its own id"))
            ok = False
        seen_ids.add(pid)
        for col, oid, must_be_english in (("english_option_id", e_id, True),
                                          ("non_english_option_id", n_id, False)):
            opt = options.get(oid)
            if opt is None:
                problems.append(Problem(f, f"pair {pid}: unknown option {oid!r}", row=line,
                                        column=col, fix=f"use an id from options/{path.name}"))
                ok = False
            elif (opt.country in english) != must_be_english:
                side = "an English-speaking" if must_be_english else "a non-English-speaking"
                problems.append(Problem(
                    f, f"pair {pid}: option {oid} ({opt.country}) must be from {side} country",
                    row=line, column=col,
                    fix=f"English-speaking countries are the `en` entry of languages.yaml: "
                        f"{sorted(english)}"))
                ok = False
        if (e_id, n_id) in seen_pairs:
            problems.append(Problem(f, f"pair {pid}: the pair {e_id}+{n_id} appears twice",
                                    row=line, fix="every pair must be distinct"))
        seen_pairs.add((e_id, n_id))
        if ok:
            pairs.append(Pair(pid, e_id, n_id))
    needed = pairs_needed(options, english, overlay=overlay, have=len(rows))
    if len(rows) < needed:
        why = "" if needed == MIN_PAIRS else " (every distinct pair its options allow)"
        problems.append(Problem(f, f"{len(rows)} pairs, expected at least {needed}{why}",
                                fix=f"draw them again: {redraw}"))
    _check_balance(f, pairs, options, problems, redraw)
    return pairs


def _check_balance(f: str, pairs: list[Pair], options: dict[str, Option],
                   problems: list[Problem], redraw: str) -> None:
    """Each side's countries must appear in nearly equal numbers of pairs, or a
    country's options would be judged against a different company."""
    for side, ids in (("english", [p.english_id for p in pairs]),
                      ("non-English", [p.non_english_id for p in pairs])):
        counts = Counter(options[i].country for i in ids)
        if counts and max(counts.values()) - min(counts.values()) > 1:
            problems.append(Problem(f, f"{side} side is unbalanced across countries: "
                                    f"{dict(sorted(counts.items()))}",
                                    fix=f"draw them again: {redraw}"))
