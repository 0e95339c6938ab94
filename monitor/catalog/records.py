"""The catalog's records: options, comparison pairs, triplets, prompt files, problems.

Frozen dataclasses (and pydantic models for the prompt files, whose schema
`monitor catalog validate` checks); nothing here reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from monitor.vocab import LABELS, Variant, base_language

__all__ = ["LABELS", "VARIANTS", "Catalog", "Option", "Pair", "Problem", "PromptFile", "Scenario",
           "ScenarioText", "Triplet", "base_language"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")

#: Prompt variants, in their order (the sampling's Latin square walks it).
VARIANTS: tuple[Variant, ...] = tuple(Variant)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the catalog, located as precisely as possible."""

    file: str
    message: str
    fix: str = ""
    row: int | None = None
    column: str | None = None

    def __str__(self) -> str:
        where = self.file + (f":{self.row}" if self.row is not None else "")
        col = f" [{self.column}]" if self.column else ""
        fix = f" -> {self.fix}" if self.fix else ""
        # One problem, one line: control characters from a broken file are
        # shown escaped, never passed to the terminal.
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}",
                            f"{where}{col}: {self.message}{fix}")


@dataclass(frozen=True)
class Option:
    """A university or city that the model is asked to score."""

    id: str
    country: str
    names: dict[str, str] = field(hash=False)
    # Short names answers use that no language's name gives ("Caltech", "UZH", "포스텍"):
    # aliases/<scenario>.csv. They help read answers; nothing is asked with them.
    aliases: tuple[str, ...] = field(default=(), hash=False)


@dataclass(frozen=True)
class Pair:
    """A fixed comparison pair: one English-speaking and one other option."""

    pair_id: str
    english_id: str
    non_english_id: str


@dataclass(frozen=True)
class Triplet:
    """One target option judged together with one comparison pair."""

    scenario: str
    target_id: str
    pair_id: str
    option_ids: tuple[str, str, str]  # target, english, non-english

    @property
    def id(self) -> str:
        return f"{self.scenario}/{self.target_id}/{self.pair_id}"


class _Situation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    neutral: str = Field(min_length=1, description="The asker, no gender given.")
    female: str = Field(min_length=1, description="The asker as a woman.")
    male: str = Field(min_length=1, description="The asker as a man.")
    # Why the neutral is not the gendered forms minus their gender mark, where the
    # language has no gender-free word for what they mark (probes/README.md).
    neutral_note: str = Field(default="", description="Why the neutral is worded otherwise.")


class ScenarioText(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    system: str = Field(min_length=1, description="The consultant role (system message).")
    situation: _Situation = Field(description="Who asks; ends by introducing the options.")


class PromptFile(BaseModel):
    """One language's prompts (probes/prompts/<lang>.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    language: str = Field(description="Language code; equals the file name.")
    language_name: str = Field(min_length=1, description="The language's own name.")
    scenarios: dict[str, ScenarioText] = Field(description="Texts per scenario.")
    option_line: str = Field(description="How one option is listed: {label} and {name}.")
    task: str = Field(min_length=1, description="Analyse strengths/weaknesses, score 1-10.")
    cot: str = Field(min_length=1, description="The chain-of-thought instruction.")
    answer_format: str = Field(min_length=1, description="Asks for the closing JSON object.")
    refusals: list[str] = Field(description="Phrases that mark a refusal to answer.")


@dataclass(frozen=True)
class Scenario:
    name: str
    options: dict[str, Option]
    pairs: tuple[Pair, ...]
    # The languages it can be asked in; () = every catalogue language. A team's own
    # scenario (an overlay) may cover fewer: the columns its options file has.
    languages: tuple[str, ...] = ()

    def triplets(self) -> Iterator[Triplet]:
        """Every target x pair, skipping pairs that already hold the target."""
        for target in self.options:
            for pair in self.pairs:
                if target in (pair.english_id, pair.non_english_id):
                    continue
                yield Triplet(
                    self.name, target, pair.pair_id, (target, pair.english_id, pair.non_english_id)
                )

    def monitored_triplets(self, monitored: Collection[str]) -> list[Triplet]:
        """The triplets whose three options come from three different `monitored`
        countries (each unit then feeds three MD cells); every triplet when none does."""
        wanted = set(monitored)
        out, every = [], []
        for t in self.triplets():
            every.append(t)
            countries = {self.options[i].country for i in t.option_ids}
            if len(countries) == 3 and countries <= wanted:
                out.append(t)
        return out or every


@dataclass(kw_only=True, frozen=True)
class Catalog:
    root: Path
    version: str
    languages: dict[str, tuple[str, ...]]  # language -> local countries
    scenarios: dict[str, Scenario]
    prompts: dict[str, PromptFile]
    extra: tuple[Path, ...] = ()  # overlay folders merged in (catalog.extra_paths)

    def monitored(self, languages: Iterable[str]) -> frozenset[str]:
        """The countries whose local language is among `languages`."""
        return frozenset(c for lang in languages for c in self.languages.get(lang, ()))

    def local_language(self, country: str) -> str | None:
        """The language whose local country this is, or None (HK, SG, CH...)."""
        for lang, countries in self.languages.items():
            if country in countries:
                return lang
        return None

    def option(self, scenario: str, option_id: str) -> Option:
        return self.scenarios[scenario].options[option_id]
