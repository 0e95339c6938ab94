"""A team's own scenarios: catalogue overlays (catalog.extra_paths) merged with the catalogue.

An overlay is a folder laid out like probes/, holding only new scenarios:

    options/<scenario>.csv   option_id,country,<a column per language it is asked in>
    pairs/<scenario>.csv     pair_id,english_option_id,non_english_option_id
    sources/<scenario>.csv   id,source,rank,note
    prompts/<lang>.yaml      language: <lang> and scenarios: {<scenario>: {system, situation}}
                             for each language of its scenarios
    aliases/<scenario>.csv   option_id,alias (optional): short names answers use ("Chase")

It takes the catalogue's languages (no languages.yaml of its own) or a subset
of them: a scenario is asked only in the languages its options file has
columns for (en and at least one more), and needs prompt texts in those. It may not
redefine a scenario the catalogue (or an earlier overlay) has, and is checked
by the catalogue's rules (monitor.catalog.rules) sized for a team's domain: only
the countries it has options in count (each local one with >= 3 options, an
English-speaking country and another among them), and its pairs are 100 or, when
its options allow fewer distinct pairs, all of those (rules.pairs_needed). Every
problem is reported at once. Its files are part of the catalogue version, so runs
before and after a change of an overlay are never compared.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from monitor.catalog import coverage, rules, text_rules
from monitor.catalog.files import read_csv, read_model
from monitor.catalog.records import Problem, PromptFile, Scenario, ScenarioText

__all__ = ["OVERLAY_FILES", "merge_overlay", "scenario_languages"]

#: The data files of an overlay that its version hash covers.
OVERLAY_FILES = ("options/*.csv", "pairs/*.csv", "sources/*.csv", "prompts/*.yaml")


class _OverlayPrompts(BaseModel):
    """prompts/<lang>.yaml of an overlay: only the new scenarios' texts."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    language: str = Field(description="Language code; equals the file name.")
    scenarios: dict[str, ScenarioText] = Field(description="Texts per new scenario.")


def merge_overlay(root: Path, languages: dict[str, tuple[str, ...]],
                  scenarios: dict[str, Scenario], prompts: dict[str, PromptFile],
                  problems: list[Problem]) -> None:
    """Check the overlay at `root` and add its scenarios and texts (in place)."""
    if not root.is_dir():
        problems.append(Problem(str(root), "catalog overlay folder not found",
                                "fix catalog.extra_paths, or create it with `monitor catalog "
                                "new-scenario NAME --dir DIR`"))
        return
    if (root / "languages.yaml").exists():
        problems.append(Problem(str(root / "languages.yaml"), "an overlay takes the catalogue's "
                                "languages", "remove languages.yaml from the overlay"))
    files = sorted((root / "options").glob("*.csv"))
    if not files:
        problems.append(Problem(str(root / "options"), "the overlay has no scenario",
                                "add options/<scenario>.csv (`monitor catalog new-scenario`)"))
    added: dict[str, Scenario] = {}
    taken: set[str] = set()
    for opt_file in files:
        name = opt_file.stem
        if name in scenarios:
            problems.append(Problem(str(opt_file), f"scenario {name!r} is already in the "
                                    "catalogue", "give the overlay's scenario another name"))
            taken.add(name)
            continue
        own = scenario_languages(opt_file, languages, problems)
        options = rules.check_options(opt_file, own, problems, catalogue=list(languages))
        options = text_rules.check_aliases(root / "aliases" / f"{name}.csv", options, problems)
        coverage.check_overlay_coverage(name, options, own, root, problems)
        pairs = rules.check_pairs(root / "pairs" / f"{name}.csv", options, own, problems,
                                  overlay=True)
        text_rules.check_sources(root / "sources" / f"{name}.csv", options, problems)
        added[name] = Scenario(name, options, tuple(pairs), tuple(own))
    for lang in languages:
        needed = {n: s for n, s in added.items() if lang in s.languages}
        if not needed and not (root / "prompts" / f"{lang}.yaml").exists():
            continue  # no scenario of this overlay is asked in this language
        texts = _prompts(root / "prompts" / f"{lang}.yaml", lang, needed, taken | set(added),
                         problems)
        if texts is not None and lang in prompts:
            merged = {**prompts[lang].scenarios,
                      **{k: v for k, v in texts.scenarios.items() if k in added}}
            prompts[lang] = prompts[lang].model_copy(update={"scenarios": merged})
    for extra in sorted((root / "prompts").glob("*.yaml")):
        if extra.stem not in languages:
            problems.append(Problem(str(extra), f"language {extra.stem!r} is not in the "
                                    "catalogue", "remove the file or add the language to the "
                                    "catalogue's languages.yaml"))
    scenarios.update(added)


def scenario_languages(opt_file: Path, languages: dict[str, tuple[str, ...]],
                       problems: list[Problem]) -> dict[str, tuple[str, ...]]:
    """The catalogue languages an overlay scenario names its options in (its columns): it is
    asked only in those, and needs en (the English-speaking side of its pairs) and one more."""
    try:
        header, _ = read_csv(opt_file)
    except ValueError:
        return dict(languages)  # check_options reports the file itself
    own = {lang: languages[lang] for lang in header[2:] if lang in languages}
    if "en" not in own or len(own) < 2:
        problems.append(Problem(str(opt_file), "an overlay scenario needs names in en and at "
                                "least one more catalogue language", row=1,
                                fix="add the en column and the languages you will ask in"))
        return dict(languages)
    return own


def _prompts(path: Path, lang: str, added: dict[str, Scenario], taken: set[str],
             problems: list[Problem]) -> _OverlayPrompts | None:
    f = str(path)
    texts = read_model(path, _OverlayPrompts, f"prompts for language {lang!r}", problems,
                       missing_fix="translate the overlay's prompts/en.yaml into this file",
                       invalid_fix="an overlay's prompt file holds language and scenarios")
    if texts is None:
        return None
    # A taken name (a catalogue scenario's) is reported once, with its options file.
    text_rules.check_scenario_texts(f, lang, texts.language, texts.scenarios, added, problems,
                               how="system and situation", unknown=" in the overlay",
                               skip=taken)
    for name, text in texts.scenarios.items():
        for key, value in (("system", text.system), *((f"situation.{p}", getattr(
                text.situation, p)) for p in ("neutral", "female", "male"))):
            if rules.looks_like_placeholder(value):
                problems.append(Problem(f, f"scenarios.{name}.{key} is a placeholder: "
                                        f"{value[:40]!r}", column=f"scenarios.{name}.{key}",
                                        fix="write the text" + (
                                            "" if lang == "en" else " (translated from en.yaml)")))
    text_rules.check_personas(f, lang, {n: t for n, t in texts.scenarios.items()
                                        if n not in taken}, problems)
    return texts
