"""The rules of a scenario's companion files and texts: aliases (short names answers
use), sources (where each option's names come from), and the prompt files."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from monitor.catalog.files import read_csv, read_model
from monitor.catalog.records import LABELS, Option, Problem, PromptFile, base_language
from monitor.catalog.rules import todo_rows

__all__ = ["check_aliases", "check_prompts", "check_scenario_texts", "check_sources"]

# In prose (prompt texts) a question mark is no placeholder; a TODO or <...> is.
_TEXT_PLACEHOLDER = re.compile(r"\b(?:TODO|TBD|FIXME|XXX)\b|<[^>]*>|\{\w*\}", re.I)

def check_aliases(path: Path, options: dict[str, Option], problems: list[Problem]
                  ) -> dict[str, Option]:
    """The options with their aliases from aliases/<scenario>.csv (optional; option_id,
    alias): each alias names one option, and is no other option's name or alias, or an
    answer that uses it could not be placed."""
    if not path.is_file():
        return options
    f = str(path)
    try:
        header, rows = read_csv(path)
    except ValueError as exc:
        problems.append(Problem(f, str(exc)))
        return options
    if header != ["option_id", "alias"]:
        problems.append(Problem(f, f"header is {header}, expected ['option_id', 'alias']", row=1))
        return options
    taken = {" ".join(n.casefold().split()): o.id for o in options.values()
             for n in o.names.values()}
    found: dict[str, list[str]] = {}
    for line, row in rows:
        oid, alias = row["option_id"].strip(), row["alias"]
        key = " ".join(alias.casefold().split())
        if oid not in options:
            problems.append(Problem(f, f"unknown option {oid!r}", row=line, column="option_id",
                                    fix=f"use an id from options/{path.name}"))
        elif not alias.strip() or alias != alias.strip():
            problems.append(Problem(f, f"option {oid}: alias {alias!r} is blank or has stray "
                                    "spaces", row=line, column="alias"))
        elif taken.get(key, oid) != oid:
            problems.append(Problem(f, f"option {oid}: alias {alias!r} also names "
                                    f"{taken[key]}", row=line, column="alias",
                                    fix="an alias must name one option"))
        else:
            taken[key] = oid
            found.setdefault(oid, []).append(alias)
    return {oid: replace(o, aliases=tuple(found.get(oid, ()))) for oid, o in options.items()}


def check_sources(path: Path, options: dict[str, Option], problems: list[Problem]) -> None:
    f = str(path)
    if not path.is_file():
        problems.append(Problem(f, "missing sources file", fix="add id,source,rank,note rows"))
        return
    try:
        header, rows = read_csv(path)
    except ValueError as exc:
        problems.append(Problem(f, str(exc)))
        return
    if header[:2] != ["id", "source"]:
        problems.append(Problem(f, f"header {header} must start with id,source", row=1))
        return
    rows = todo_rows(f, rows, "id", "one row per option: its id, where it comes from "
                      "(source), its rank there and a note", problems)
    ids = [row["id"].strip() for _, row in rows]
    for oid in sorted(set(options) - set(ids)):
        problems.append(Problem(f, f"option {oid} has no source row", fix="say where it came from"))
    for line, row in rows:
        if row["id"].strip() not in options:
            problems.append(Problem(f, f"unknown option {row['id']!r}", row=line, column="id"))
        elif not row["source"].strip():
            problems.append(Problem(f, f"option {row['id']}: blank source", row=line,
                                    column="source"))


def check_scenario_texts(f: str, lang: str, language: str, texts: Iterable[str],
                         wanted: Iterable[str], problems: list[Problem], *, how: str,
                         unknown: str, skip: Collection[str] = ()) -> None:
    """A prompt file's language and scenario texts against the scenarios it must cover
    (catalogue and overlay prompt files alike): `how` says where to look for a missing
    text, `unknown` ends the message of a text without options; `skip` is reported elsewhere."""
    if language != lang:
        problems.append(Problem(f, f"language: {language!r} but the file is for {lang!r}",
                                column="language", fix=f"set `language: {lang}`"))
    texts, wanted = list(texts), list(wanted)
    for name in wanted:
        if name not in texts:
            problems.append(Problem(f, f"no texts for scenario {name!r}", column="scenarios",
                                    fix=f"add scenarios.{name} ({how})"))
    for name in texts:
        if name not in wanted and name not in skip:
            problems.append(Problem(f, f"scenario {name!r} has no options file{unknown}",
                                    column="scenarios", fix=f"add options/{name}.csv or drop it"))


def check_prompts(path: Path, lang: str, scenarios: Mapping[str, object],
                  problems: list[Problem]) -> PromptFile | None:
    """A language's prompt file; a locale's (pt-PT) holds only what it writes otherwise than
    its language (pt), whose file gives the rest."""
    f = str(path)
    base = base_language(lang)
    prompt = read_model(path, PromptFile, f"prompts for language {lang!r}", problems,
                        missing_fix=(f"write the texts that differ from prompts/{base}.yaml "
                                     f"into this file, with `language: {lang}`" if base else
                                     "translate prompts/en.yaml into this file"),
                        invalid_fix="compare with prompts/en.yaml",
                        under=path.with_name(f"{base}.yaml") if base else None)
    if prompt is None:
        return None
    check_scenario_texts(f, lang, prompt.language, prompt.scenarios, scenarios, problems,
                         how="see prompts/en.yaml", unknown="")
    fields = set(re.findall(r"\{(\w*)\}", prompt.option_line))
    if fields != {"label", "name"}:
        problems.append(Problem(f, f"option_line must use exactly {{label}} and {{name}}, has "
                                f"{sorted(fields)}", column="option_line"))
    for key in ("score", "strengths", "weaknesses", *(f'"{x}"' for x in LABELS)):
        if key not in prompt.answer_format:
            problems.append(Problem(f, f"answer_format does not show {key}",
                                    column="answer_format",
                                    fix="keep the JSON example of prompts/en.yaml verbatim"))
    if not prompt.refusals or any(not r.strip() for r in prompt.refusals):
        problems.append(Problem(f, "refusals must list non-blank phrases", column="refusals"))
    return prompt
