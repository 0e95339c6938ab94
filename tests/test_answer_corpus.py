"""The answer corpus (tests/corpus/answers/<lang>.yaml): realistic answers in every
catalogue language and the formats real assistants write (headings with the score on a
later line, tables, bold, "8 out of 10", final verdicts, damaged JSON, refusals), each with
the reading a careful person makes. The corpus was written apart from the parser (by
helpers told not to read it) and reviewed; the bar is the issue's: no invented score, no
wrong option, >= 99% of the answers that carry readable scores read, refusals refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog
from monitor.measure.parse import parse_answer
from monitor.yamlfile import load_yaml

CORPUS = Path(__file__).parent / "corpus" / "answers"
LANGS = ("en", "fr", "de", "ja", "zh", "ko")


def _entries() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for lang in LANGS:
        data = load_yaml(CORPUS / f"{lang}.yaml")
        assert isinstance(data, list)
        out += [(lang, e) for e in data]
    return out


def _aliases(catalog: Catalog, lang: str, names: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """What a run passes: each option's names in the other languages (monitor.measure.prompts)."""
    out = {}
    for label, name in names.items():
        for scenario in catalog.scenarios.values():
            for option in scenario.options.values():
                if option.names.get(lang) == name:
                    out[label] = tuple(n for n in option.names.values() if n != name)
    return out


def _read(catalog: Catalog) -> list[tuple[str, dict[str, Any], Any]]:
    return [(lang, e, parse_answer(e["text"], e["names"], catalog.prompts[lang].refusals,
                                   _aliases(catalog, lang, e["names"])))
            for lang, e in _entries()]


def test_the_corpus_is_well_formed() -> None:
    entries = _entries()
    ids = [e["id"] for _, e in entries]
    assert len(ids) == len(set(ids)) and len(ids) >= 300
    for lang, e in entries:
        assert e["id"].startswith(f"{lang}-") and set(e["names"]) == {"A", "B", "C"}
        assert e["expect"]["status"] in ("ok", "refused", "unparseable")
        if e["expect"]["status"] == "ok":
            assert set(e["expect"]["scores"]) == {"A", "B", "C"}
    formats = Counter(e["format"] for _, e in entries)
    assert len(formats) >= 25 and min(formats.values()) >= 6  # each format in 3+ languages


def test_no_score_is_invented_and_no_option_is_wrong(shipped_catalog: Catalog) -> None:
    for _, e, r in _read(shipped_catalog):
        want = e["expect"]
        if r.status == "ok":
            assert want["status"] == "ok", (e["id"], r)  # nothing read where none is
            got = {k: o.score for k, o in r.options.items()}
            assert got == {k: float(v) for k, v in want["scores"].items()}, (e["id"], got)


@pytest.mark.parametrize("lang", LANGS)
def test_answers_with_readable_scores_are_read(lang: str, shipped_catalog: Catalog) -> None:
    readable = [(e, r) for lg, e, r in _read(shipped_catalog)
                if lg == lang and e["expect"]["status"] == "ok"]
    missed = [e["id"] for e, r in readable if r.status != "ok"]
    # >= 99% over the corpus; per language at most one miss (an alias such as "UZH" for
    # Universität Zürich that no catalogue name gives).
    assert len(missed) <= 1, missed


def test_over_the_corpus_at_least_99_percent_are_read(shipped_catalog: Catalog) -> None:
    readable = [r for _, e, r in _read(shipped_catalog) if e["expect"]["status"] == "ok"]
    read = sum(r.status == "ok" for r in readable)
    assert read / len(readable) >= 0.99, (read, len(readable))


def test_refusals_in_every_language_are_refused(shipped_catalog: Catalog) -> None:
    for lang, e, r in _read(shipped_catalog):
        if e["expect"]["status"] == "refused":
            assert r.status == "refused", (lang, e["id"], r.detail)
        if e["expect"]["status"] == "unparseable":
            assert r.status == "unparseable", (e["id"], r.detail)
