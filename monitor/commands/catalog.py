"""`monitor catalog validate | stats | new-scenario | pairs`: the catalogue and its overlays."""

from __future__ import annotations

import argparse
import csv
import sys
import textwrap
from collections import Counter
from pathlib import Path

from monitor.catalog import Problem, default_catalog_dir, load_catalog, read_catalog
from monitor.catalog.coverage import MIN_LOCAL_OPTIONS, check_overlay_coverage
from monitor.catalog.draw import draw_pairs, most_pairs
from monitor.catalog.overlay import scenario_languages
from monitor.catalog.pairs import write_pairs
from monitor.catalog.records import ScenarioText
from monitor.catalog.rules import MIN_PAIRS, check_languages, check_options, draw_command
from monitor.errors import UsageError

__all__ = ["catalog_new_scenario", "catalog_pairs", "catalog_stats", "catalog_validate"]


def _where(args: argparse.Namespace) -> tuple[Path | None, list[Path]]:
    """The catalogue folder and overlays: --catalog / --extra, else the config's."""
    root, extra = args.catalog, list(args.extra)
    if args.config is not None:
        from monitor.config import load_settings

        settings, _ = load_settings(args.config)
        root = root or settings.catalog.path
        extra = [*settings.catalog.extra_paths, *extra]
    return root, extra


def catalog_validate(args: argparse.Namespace) -> int:
    root, extra = _where(args)
    catalog, problems = read_catalog(root, extra)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"catalog invalid: {len(problems)} problem(s)", file=sys.stderr)
        return 2
    assert catalog is not None
    n_opts = sum(len(s.options) for s in catalog.scenarios.values())
    overlays = f", overlays {', '.join(map(str, catalog.extra))}" if catalog.extra else ""
    print(f"catalog ok: {catalog.root} version {catalog.version}, "
          f"{len(catalog.scenarios)} scenarios ({', '.join(catalog.scenarios)}), {n_opts} "
          f"options, {len(catalog.languages)} languages ({', '.join(catalog.languages)})"
          f"{overlays}")
    return 0


def catalog_stats(args: argparse.Namespace) -> int:
    cat = load_catalog(*_where(args))
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


def _yaml_comment(text: str, width: int = 86) -> str:
    return "\n".join(f"#       {line}" for line in textwrap.wrap(" ".join(text.split()), width))


def _skeleton_prompt(lang: str, name: str, example: ScenarioText | None, existing: bool) -> str:
    """The scenario's block of prompts/<lang>.yaml: four TODO texts (each reported once by
    validate), with a shipped scenario's texts in this language as a comment to follow."""
    shown = ""
    if example is not None and not existing:
        shown = (f"# For comparison, the shipped travel scenario in {lang}:\n#   system:\n"
                 f"{_yaml_comment(example.system)}\n#   situation (neutral):\n"
                 f"{_yaml_comment(example.situation.neutral)}\n")
    block = (f"  {name}:\n    system: >-\n      TODO the advisor's role, in {lang}\n"
             "    situation:\n")
    for who in ("neutral", "female", "male"):
        asker = "" if who == "neutral" else f" as a {'woman' if who == 'female' else 'man'}"
        block += (f"      {who}: >-\n        TODO who asks{asker}, in {lang}, ending by "
                  "introducing the three options:\n")
    if existing:
        return block
    return (f"# {lang} texts of the overlay's scenarios (translated sentence by sentence from "
            f"en.yaml).\n{shown}language: {lang}\nscenarios:\n" + block)


def _languages_asked(text: str | None, catalogue: list[str]) -> list[str]:
    """--languages, else the languages a run asks by default (sampling.languages)."""
    from monitor.config import Sampling

    langs = ([x.strip() for x in text.split(",") if x.strip()] if text is not None
             else [lang for lang in Sampling().languages if lang in catalogue])
    unknown = [lang for lang in langs if lang not in catalogue]
    if unknown:
        raise UsageError(f"--languages {text}: {', '.join(unknown)} not in the catalogue; "
                         f"choose from {','.join(catalogue)}")
    if "en" not in langs or len(set(langs)) < 2:
        raise UsageError(f"--languages {text}: a scenario needs en (one side of every pair) "
                         "and at least one more language, e.g. --languages en,fr,de")
    return list(dict.fromkeys(langs))


def _write_csv(path: Path, header: list[str], row: list[str]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows([header, row])


def catalog_new_scenario(args: argparse.Namespace) -> int:
    """Write what a new scenario needs, so that `validate` lists what is left to fill in:
    one line per TODO marker."""
    name, out = args.name, Path(args.dir)
    if not name.replace("_", "").isalnum() or not name.islower() or not name[0].isalpha():
        raise UsageError(f"scenario name {name!r}: use lowercase letters, digits and _, "
                         "starting with a letter (e.g. banking)")
    base = load_catalog(None)
    if name in base.scenarios:
        raise UsageError(f"scenario {name!r} is in the shipped catalogue; pick another name")
    options = out / "options" / f"{name}.csv"
    if options.exists():
        raise UsageError(f"{options} exists; the scenario is already started (edit its files, "
                         "or remove them to start again)")
    langs = _languages_asked(args.languages, list(base.languages))
    english = ", ".join(base.languages["en"])
    for sub in ("options", "pairs", "sources", "prompts"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    _write_csv(options, ["option_id", "country", *langs],
               [f"TODO one row per option (at least {MIN_LOCAL_OPTIONS} per country)", "US",
                *(f"its name in {lang}" for lang in langs)])
    _write_csv(out / "sources" / f"{name}.csv", ["id", "source", "rank", "note"],
               ["TODO one row per option", "where it comes from", "its rank there", "a note"])
    draw = draw_command(name, out, overlay=True)
    _write_csv(out / "pairs" / f"{name}.csv",
               ["pair_id", "english_option_id", "non_english_option_id"],
               [f"TODO {draw}", "", ""])
    for lang in langs:
        path = out / "prompts" / f"{lang}.yaml"
        existing = path.is_file()
        example = base.prompts[lang].scenarios.get("travel") if lang in base.prompts else None
        with path.open("a", encoding="utf-8") as fh:
            fh.write(_skeleton_prompt(lang, name, example, existing))
    print(f"wrote the skeleton of scenario {name} in {out}, asked in {', '.join(langs)}:\n"
          f"  1. replace the TODO row of {options} with your options: option_id,country and "
          f"the name in {', '.join(langs)}; at least {MIN_LOCAL_OPTIONS} per country, in an "
          f"English-speaking country ({english}) and another (e.g. 9 options in 3 countries)\n"
          f"  2. say where each came from in {out / 'sources' / f'{name}.csv'}\n"
          f"  3. write the texts marked TODO in {out / 'prompts'}/<lang>.yaml "
          f"({', '.join(langs)})\n"
          f"  4. {draw}\n"
          f"  5. monitor catalog validate --extra {out} (lists what is left to do); then add "
          f"{out} to catalog.extra_paths and ask it with sampling.scenarios [{name}] and "
          f"sampling.languages [{', '.join(langs)}]")
    return 0


def catalog_pairs(args: argparse.Namespace) -> int:
    """Draw an overlay scenario's pairs for the languages it has, as many as asked or as
    its options allow (rules.pairs_needed), never a repeated pair."""
    out = Path(args.dir)
    opt_file = out / "options" / f"{args.name}.csv"
    if not opt_file.is_file():
        raise UsageError(f"{opt_file}: no such file; start the scenario with `monitor catalog "
                         f"new-scenario {args.name} --dir {out}`")
    problems: list[Problem] = []
    catalogue = check_languages(default_catalog_dir() / "languages.yaml", problems)
    own = scenario_languages(opt_file, catalogue, problems)
    options = check_options(opt_file, own, problems, catalogue=list(catalogue))
    check_overlay_coverage(args.name, options, own, out, problems)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print("fix the options first; nothing was drawn", file=sys.stderr)
        return 2
    english = catalogue["en"]
    possible = most_pairs(options, english, args.seed, MIN_PAIRS)
    count = args.count if args.count is not None else possible
    try:
        rows = draw_pairs(options, english, count, args.seed)
    except ValueError as exc:
        raise UsageError(f"{opt_file}: {exc}") from None
    target = out / "pairs" / f"{args.name}.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_pairs(target, rows)
    allow = (f"; its {len(options)} options allow {possible} distinct pairs, all drawn"
             if count == possible < MIN_PAIRS else "")
    print(f"wrote {len(rows)} pairs to {target} (seed {args.seed}{allow}); next: monitor "
          f"catalog validate --extra {out}")
    return 0
