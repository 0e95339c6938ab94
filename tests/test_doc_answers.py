"""Every example of an answer in README.md and docs/contract.md is read as documented.

The contract's "Reading answers" holds the examples with their readings (a table of
one-line examples, and fenced answers each after a "Read as ..." line); every code span
of that section's prose and of the README's "What a run does" reading list must be one
of the table's examples, so no example stands in the docs without a test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.measure.parse import ParseResult, parse_answer

ROOT = Path(__file__).parent.parent
NAMES = {"A": "Boston", "B": "Osaka", "C": "Lyon"}
_SPAN = re.compile(r"`([^`]+)`")  # a code span may wrap: its line break is a space


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


CONTRACT = _section((ROOT / "docs" / "contract.md").read_text(encoding="utf-8"),
                    "## Reading answers", "\n## Slack")
PROSE, EXAMPLES = CONTRACT.split("### Examples")
README = _section((ROOT / "README.md").read_text(encoding="utf-8"),
                  "parses the scores", "and stores every")
ROWS = [tuple(c.strip() for c in line.strip("|").split("|"))
        for line in EXAMPLES.splitlines() if line.startswith("| `")]
TABLE = {row[0].strip("`"): (row[1], row[2]) for row in ROWS}
FENCED = re.findall(r"Read as ([^(:\n]+?)(?: \([^)]*\))?:\n\n```text\n(.*?)\n```", EXAMPLES,
                    re.DOTALL)


def _answer(example: str, where: str) -> str:
    if where == "the answer":
        return example
    if where == "under each option":
        return "".join(f"### {lab}. {name}\nA fine place to live and work.\n{example}\n\n"
                       for lab, name in NAMES.items())
    assert where == "a line per option", where
    return "\n".join(example.replace(NAMES["A"], name) for name in NAMES.values())


def _check(result: ParseResult, reading: str) -> None:
    if reading.startswith(("refused", "unparseable")):
        status, _, detail = reading.partition(": ")
        assert (result.status, result.detail if detail else "") == (status, detail), result
        return
    each = re.fullmatch(r"(\d+) each", reading)
    want = ({lab: float(each.group(1)) for lab in NAMES} if each else
            {lab: float(v) for lab, v in re.findall(r"([ABC]) (\d+)", reading)})
    assert result.status == "ok", result
    assert {lab: o.score for lab, o in result.options.items()} == want


def test_the_examples_are_there() -> None:
    assert len(TABLE) == len(ROWS) >= 30 and len(FENCED) == 3


@pytest.mark.parametrize("example", list(TABLE))
def test_an_example_line_is_read_as_documented(example: str) -> None:
    where, reading = TABLE[example]
    _check(parse_answer(_answer(example, where), NAMES, []), reading)


@pytest.mark.parametrize(("reading", "answer"), FENCED)
def test_an_example_answer_is_read_as_documented(reading: str, answer: str) -> None:
    _check(parse_answer(answer, NAMES, []), reading)


@pytest.mark.parametrize(("where", "text"), [("README.md", README),
                                             ("docs/contract.md", PROSE)])
def test_every_example_in_the_docs_has_its_documented_reading(where: str, text: str) -> None:
    spans = [" ".join(s.split()) for s in _SPAN.findall(text)]
    assert spans, where
    assert [s for s in spans if s not in TABLE] == [], where
