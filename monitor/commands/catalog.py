"""`monitor catalog validate | stats | new-scenario | pairs`: the catalogue and its overlays."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from monitor.catalog import Problem, default_catalog_dir, load_catalog, read_catalog
from monitor.catalog.pairs import draw_pairs, write_pairs
from monitor.catalog.rules import check_languages, check_options
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


def _skeleton_prompt(lang: str, name: str, existing: bool) -> str:
    block = (f"  {name}:\n    system: >-\n      TODO the advisor persona in {lang} (compare "
             f"probes/prompts/{lang}.yaml)\n    situation:\n")
    for who in ("neutral", "female", "male"):
        block += (f"      {who}: >-\n        TODO who asks ({who}), ending by introducing the "
                  "three options:\n")
    if existing:
        return block
    return (f"# {lang} texts of the overlay's scenarios (translated sentence by sentence from "
            f"en.yaml).\nlanguage: {lang}\nscenarios:\n" + block)


def catalog_new_scenario(args: argparse.Namespace) -> int:
    """Write what a new scenario needs, so that `validate` lists what is left to fill in."""
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
    langs = list(base.languages)
    for sub in ("options", "pairs", "sources", "prompts"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    options.write_text(f"id,country,{','.join(langs)}\n", encoding="utf-8")
    (out / "sources" / f"{name}.csv").write_text("id,source,rank,note\n", encoding="utf-8")
    for lang in langs:
        path = out / "prompts" / f"{lang}.yaml"
        existing = path.is_file()
        with path.open("a", encoding="utf-8") as fh:
            fh.write(_skeleton_prompt(lang, name, existing))
    print(f"wrote the skeleton of scenario {name} in {out}:\n"
          f"  1. add options to {options} (id,country and the name in {', '.join(langs)}; "
          "at least 3 per country)\n"
          f"  2. say where each came from in {out / 'sources' / f'{name}.csv'}\n"
          f"  3. write the texts marked TODO in {out / 'prompts'}/<lang>.yaml\n"
          f"  4. monitor catalog pairs {name} --dir {out}\n"
          f"  5. monitor catalog validate --extra {out}, then add {out} to catalog.extra_paths")
    return 0


def catalog_pairs(args: argparse.Namespace) -> int:
    """Draw an overlay scenario's pairs with the catalogue's languages and rule."""
    out = Path(args.dir)
    problems: list[Problem] = []
    languages = check_languages(default_catalog_dir() / "languages.yaml", problems)
    options = check_options(out / "options" / f"{args.name}.csv", languages, problems)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print("fix the options first; nothing was drawn", file=sys.stderr)
        return 2
    try:
        rows = draw_pairs(options, languages["en"], args.count, args.seed)
    except ValueError as exc:
        raise UsageError(f"{out / 'options' / f'{args.name}.csv'}: {exc}") from None
    target = out / "pairs" / f"{args.name}.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_pairs(target, rows)
    print(f"wrote {len(rows)} pairs to {target} (seed {args.seed})")
    return 0
