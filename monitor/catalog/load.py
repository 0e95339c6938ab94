"""The probe catalog: options, comparison pairs, prompts and languages.

The catalog is data (probes/); this module reads it into frozen records and
refuses to hand out a catalog that fails any rule in `catalog_rules`. Every
problem is collected before failing, so a translator sees all of them at once.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from monitor.errors import CatalogError
from monitor.yamlfile import load_yaml

__all__ = [
    "VARIANTS",
    "Catalog",
    "Option",
    "Pair",
    "Problem",
    "PromptFile",
    "Scenario",
    "Triplet",
    "default_catalog_dir",
    "load_catalog",
    "load_yaml",
    "read_catalog",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")

#: Prompt variants: plain; chain-of-thought; female and male persona of the asker.
VARIANTS: tuple[str, ...] = ("plain", "cot", "female", "male")
LABELS: tuple[str, ...] = ("A", "B", "C")


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


class _ScenarioText(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    system: str = Field(min_length=1, description="The consultant role (system message).")
    situation: _Situation = Field(description="Who asks; ends by introducing the options.")


class PromptFile(BaseModel):
    """One language's prompts (probes/prompts/<lang>.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    language: str = Field(description="Language code; equals the file name.")
    language_name: str = Field(min_length=1, description="The language's own name.")
    scenarios: dict[str, _ScenarioText] = Field(description="Texts per scenario.")
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

    def triplets(self) -> Iterator[Triplet]:
        """Every target x pair, skipping pairs that already hold the target."""
        for target in self.options:
            for pair in self.pairs:
                if target in (pair.english_id, pair.non_english_id):
                    continue
                yield Triplet(
                    self.name, target, pair.pair_id, (target, pair.english_id, pair.non_english_id)
                )


@dataclass(frozen=True)
class Catalog:
    root: Path
    version: str
    languages: dict[str, tuple[str, ...]]  # language -> local countries
    scenarios: dict[str, Scenario]
    prompts: dict[str, PromptFile]

    def local_language(self, country: str) -> str | None:
        """The language whose local country this is, or None (HK, SG, CH...)."""
        for lang, countries in self.languages.items():
            if country in countries:
                return lang
        return None

    def option(self, scenario: str, option_id: str) -> Option:
        return self.scenarios[scenario].options[option_id]


def default_catalog_dir() -> Path:
    """The catalog shipped with the package (probes/ in the repo or the wheel)."""
    import probes

    return Path(probes.__file__).resolve().parent


def catalog_version(root: Path) -> str:
    """A content hash of every data file: results carry it so that runs on
    different catalogs are never compared."""
    digest = hashlib.sha256()
    for path in sorted(_data_files(root)):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _data_files(root: Path) -> Iterator[Path]:
    for pattern in ("languages.yaml", "options/*.csv", "pairs/*.csv", "prompts/*.yaml"):
        yield from root.glob(pattern)


def read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and (line number, row) pairs; line numbers count the header as 1.
    ValueError (one line) when the file is not UTF-8 CSV."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = [(i + 2, {k: (v if isinstance(v, str) else "") for k, v in row.items()
                             if k is not None}) for i, row in enumerate(reader)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except csv.Error as exc:
        raise ValueError(f"not valid CSV ({exc})") from None
    return header, rows


def read_catalog(root: Path | None = None) -> tuple[Catalog | None, list[Problem]]:
    """Read and check the catalog; returns it only when there is no problem."""
    from monitor.catalog import rules

    root = Path(root) if root is not None else default_catalog_dir()
    if not (root / "languages.yaml").is_file():
        return None, [Problem(str(root), "not a probe catalog: languages.yaml is missing",
                              "pass --catalog the folder that holds languages.yaml")]
    problems: list[Problem] = []
    languages = rules.check_languages(root / "languages.yaml", problems)
    option_files = sorted((root / "options").glob("*.csv"))
    if not option_files:
        problems.append(Problem(str(root / "options"), "no scenario: options/*.csv is empty",
                                "add options/<scenario>.csv"))
    scenarios: dict[str, Scenario] = {}
    for opt_file in option_files:
        name = opt_file.stem
        options = rules.check_options(opt_file, languages, problems)
        pairs = rules.check_pairs(root / "pairs" / f"{name}.csv", options, languages, problems)
        rules.check_sources(root / "sources" / f"{name}.csv", options, problems)
        scenarios[name] = Scenario(name, options, tuple(pairs))
    prompts = {
        lang: p
        for lang in languages
        if (p := rules.check_prompts(root / "prompts" / f"{lang}.yaml", lang, scenarios, problems))
    }
    for extra in sorted((root / "prompts").glob("*.yaml")):
        if extra.stem not in languages:
            problems.append(Problem(
                str(extra), f"language {extra.stem!r} is not in languages.yaml",
                f"add `{extra.stem}: [...]` to languages.yaml or remove the file"))
    if problems:
        return None, problems
    return Catalog(root, catalog_version(root), languages, scenarios, prompts), []


def load_catalog(root: Path | None = None) -> Catalog:
    """The catalog, or CatalogError listing every problem."""
    catalog, problems = read_catalog(root)
    if catalog is None:
        raise CatalogError(list(problems))
    return catalog
