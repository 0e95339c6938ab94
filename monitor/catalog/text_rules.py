"""The rules of a scenario's companion files and texts: aliases (short names answers
use), sources (where each option's names come from), the prompt files, and the gender
variants of each persona as minimal pairs (probes/README.md, "Gender variants")."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from monitor.catalog.files import read_csv, read_model
from monitor.catalog.records import LABELS, Option, Problem, PromptFile, ScenarioText, base_language
from monitor.catalog.rules import looks_like_placeholder, todo_rows

__all__ = ["check_aliases", "check_personas", "check_prompts", "check_scenario_texts",
           "check_sources", "persona_edit"]

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
    check_personas(f, lang, prompt.scenarios, problems)
    return prompt


# A gendered form may drop this many of the neutral's tokens and add this many: room for
# an article and a noun or adjective ("una", "female", "Je suis une femme,") and a word
# that agrees with it, not for a rebuilt sentence (probes/README.md, "Gender variants").
MAX_DROPPED, MAX_ADDED = 2, 5
# Written without spaces: a token is a character, and the limits are doubled (女, 女性).
_BY_CHARACTER = frozenset({"zh", "ja"})


def _by_character(lang: str) -> bool:
    return (base_language(lang) or lang) in _BY_CHARACTER


def _tokens(text: str, lang: str) -> list[str]:
    """The text's tokens, case-folded ("Je" at a sentence's start is "je" after "Je suis
    une femme,"); punctuation stays with its word."""
    if _by_character(lang):
        return [c for c in text.casefold() if not c.isspace()]
    return text.casefold().split()


def persona_edit(a: Sequence[str], b: Sequence[str]) -> tuple[int, int, list[tuple[int, int]]]:
    """The token-level LCS edit from `a` to `b`: tokens of `a` dropped, tokens of `b`
    added, and where: the spans [start, end) of `a` each run of edits replaces (start ==
    end for a pure insertion). Ties go to the earliest match, the same way for any two
    forms, so two forms that mark gender at one place give one span."""
    n, m = len(a), len(b)
    lcs = [[0] * (m + 1) for _ in range(n + 1)]  # lcs[i][j]: of a[i:] and b[j:]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            lcs[i][j] = (lcs[i + 1][j + 1] + 1 if a[i] == b[j]
                         else max(lcs[i + 1][j], lcs[i][j + 1]))
    spans: list[tuple[int, int]] = []
    i = j = 0
    start: int | None = None
    while i < n or j < m:
        if i < n and j < m and a[i] == b[j] and lcs[i][j] == lcs[i + 1][j + 1] + 1:
            if start is not None:
                spans.append((start, i))
                start = None
            i, j = i + 1, j + 1
            continue
        start = i if start is None else start
        if j == m or (i < n and lcs[i + 1][j] >= lcs[i][j + 1]):
            i += 1
        else:
            j += 1
    if start is not None:
        spans.append((start, n))
    return n - lcs[0][0], m - lcs[0][0], spans


def check_personas(f: str, lang: str, scenarios: Mapping[str, ScenarioText],
                   problems: list[Problem]) -> None:
    """Each persona's female and male forms are the neutral with a small edit at the same
    places; where situation.neutral_note says the language has no gender-free form, the
    female and male forms are a small edit of each other instead. Placeholder texts are
    reported elsewhere, once."""
    for name, text in scenarios.items():
        sit = text.situation
        forms = {"neutral": sit.neutral, "female": sit.female, "male": sit.male}
        if any(looks_like_placeholder(t) for t in forms.values()):
            continue
        toks = {k: _tokens(t, lang) for k, t in forms.items()}
        times = 2 if _by_character(lang) else 1
        unit = "character" if times == 2 else "word"
        where = f"language {lang}, the asker persona of scenario {name!r}"
        fix = ("let the female and male forms differ only in the words that mark gender"
               if sit.neutral_note else "write the neutral as the female and male forms "
               "without the words that mark gender, or, where the language has no gender-free "
               "form, say so in situation.neutral_note")
        if toks["female"] == toks["male"]:
            problems.append(Problem(f, f"{where}: the female and male forms are the same",
                                    column=f"scenarios.{name}.situation.male",
                                    fix="mark the gender in each"))
            continue
        pairs = (("female", "male"),) if sit.neutral_note else (("neutral", "female"),
                                                                  ("neutral", "male"))
        spans = []
        for src, dst in pairs:
            dropped, added, at = persona_edit(toks[src], toks[dst])
            spans.append(at)
            if not at:
                problems.append(Problem(f, f"{where}: the {dst} form is the {src} unchanged",
                                        column=f"scenarios.{name}.situation.{dst}",
                                        fix=f"mark the gender in the {dst} form"))
                break
            if dropped > MAX_DROPPED * times or added > MAX_ADDED * times:
                problems.append(Problem(
                    f, f"{where}: the {dst} form is no small edit of the {src}: it drops "
                    f"{dropped} and adds {added} {unit}s (at most {MAX_DROPPED * times} and "
                    f"{MAX_ADDED * times})", column=f"scenarios.{name}.situation.{dst}",
                    fix=fix))
                break
        else:
            if len(spans) == 2 and spans[0] != spans[1]:
                problems.append(Problem(
                    f, f"{where}: the female and male forms edit the neutral at different "
                    f"places ({unit}s {_spans(spans[0])} vs {_spans(spans[1])})",
                    column=f"scenarios.{name}.situation.male",
                    fix="mark the gender at the same place in both forms"))


def _spans(spans: list[tuple[int, int]]) -> str:
    return ", ".join(f"{s + 1}-{e}" if e > s else f"before {s + 1}" for s, e in spans)
