"""The answer corpus (tests/corpus/answers/): realistic answers in every catalogue language
and the formats real assistants write (headings with the score on a later line, tables,
bold, "8 out of 10", lists of labels, final verdicts, damaged JSON, refusals), each with
the reading a careful person makes. <lang>.yaml holds every format, <lang>-labels.yaml the
lists and verdicts by label ("Final scores: A 8, B 6, C 7"), refusals and label traps.
The corpus was written apart from the parser (by helpers told not to read it) and
second-read (REVIEW-issue33.md for the files of issue 33). The bar is the issue's, in
every language: no invented score, no wrong option, >= 99% of the answers that carry
readable scores read, refusals refused, unreadable answers not read.

    python -m tests.test_answer_corpus    # the figures per language and per format
"""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog, load_catalog
from monitor.measure.parse import ParseResult, parse_answer
from monitor.yamlfile import load_yaml

CORPUS = Path(__file__).parent / "corpus" / "answers"
LANGS = ("en", "fr", "de", "ja", "zh", "ko", "es", "pt", "ar", "hi", "id", "it", "tr", "ru")


def _entries() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for lang in LANGS:
        for path in (CORPUS / f"{lang}.yaml", CORPUS / f"{lang}-labels.yaml"):
            data = load_yaml(path)
            assert isinstance(data, list), path
            out += [(lang, e) for e in data]
    return out


def _aliases(catalog: Catalog, lang: str, names: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """What a run passes: each option's other names (monitor.measure.prompts)."""
    out = {}
    for label, name in names.items():
        for scenario in catalog.scenarios.values():
            for option in scenario.options.values():
                if option.names.get(lang) == name:
                    out[label] = (*(n for n in option.names.values() if n != name),
                                  *option.aliases)
    return out


@cache
def _read() -> tuple[tuple[str, dict[str, Any], ParseResult], ...]:
    catalog = load_catalog()
    return tuple((lang, e, parse_answer(e["text"], e["names"], catalog.prompts[lang].refusals,
                                        _aliases(catalog, lang, e["names"])))
                 for lang, e in _entries())


def _right(e: dict[str, Any], r: ParseResult) -> bool:
    want = e["expect"]
    if r.status != want["status"]:
        return False
    return want["status"] != "ok" or {k: o.score for k, o in r.options.items()} == {
        k: float(v) for k, v in want["scores"].items()}


def test_the_corpus_is_well_formed() -> None:
    entries = _entries()
    ids = [e["id"] for _, e in entries]
    assert len(ids) == len(set(ids)) and len(ids) >= 900
    for lang, e in entries:
        assert e["id"].startswith(f"{lang}-") and set(e["names"]) == {"A", "B", "C"}
        assert e["expect"]["status"] in ("ok", "refused", "unparseable")
        if e["expect"]["status"] == "ok":
            assert set(e["expect"]["scores"]) == {"A", "B", "C"}
    formats = Counter(e["format"] for _, e in entries)
    assert len(formats) >= 28 and min(formats.values()) >= 6  # each format in 3+ languages
    for lang in LANGS:  # every language has readable answers, refusals and traps
        statuses = Counter(e["expect"]["status"] for lg, e in entries if lg == lang)
        assert statuses["ok"] >= 40 and statuses["refused"] >= 4 and statuses["unparseable"]


def test_no_score_is_invented_and_no_option_is_wrong() -> None:
    for _, e, r in _read():
        if r.status == "ok":
            assert e["expect"]["status"] == "ok", (e["id"], r)  # nothing read where none is
            assert _right(e, r), (e["id"], {k: o.score for k, o in r.options.items()})


@pytest.mark.parametrize("lang", LANGS)
def test_answers_with_readable_scores_are_read(lang: str) -> None:
    readable = [(e, r) for lg, e, r in _read() if lg == lang and e["expect"]["status"] == "ok"]
    missed = [e["id"] for e, r in readable if not _right(e, r)]
    assert (len(readable) - len(missed)) / len(readable) >= 0.99, missed


@pytest.mark.parametrize("lang", LANGS)
def test_refusals_are_refused_and_unreadable_answers_not_read(lang: str) -> None:
    for lg, e, r in _read():
        if lg == lang and e["expect"]["status"] != "ok":
            assert r.status == e["expect"]["status"], (e["id"], r.detail)


def figures() -> str:
    """Read / readable, refused / refusals, unreadable kept unread, per language and format."""
    by: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for lang, e, r in _read():
        want = e["expect"]["status"]
        for key in ((lang, "language"), (e["format"], "format")):
            by[key][f"{want} total"] += 1
            by[key][f"{want} right"] += _right(e, r)
    lines = ["| language / format | scores read | refusals refused | unreadable kept |",
             "|---|---|---|---|"]
    for kind in ("language", "format"):
        for (name, k), c in sorted(by.items(), key=lambda x: (LANGS.index(x[0][0])
                                                              if x[0][1] == "language"
                                                              else 99, x[0][0])):
            if k == kind:
                lines.append(f"| {name} | " + " | ".join(
                    f"{c[f'{s} right']}/{c[f'{s} total']}" if c[f"{s} total"] else "-"
                    for s in ("ok", "refused", "unparseable")) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(figures())
