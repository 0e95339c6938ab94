"""Reading the probe catalog (probes/) into its records.

The catalog is data; this module reads it and refuses to hand out a catalog
that fails any rule of monitor.catalog.rules. Every problem is collected
before failing, so a translator sees all of them at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from monitor.catalog import rules
from monitor.catalog.records import Catalog, Problem, Scenario
from monitor.errors import CatalogError

__all__ = ["catalog_version", "default_catalog_dir", "load_catalog", "read_catalog"]


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


def read_catalog(root: Path | None = None) -> tuple[Catalog | None, list[Problem]]:
    """Read and check the catalog; returns it only when there is no problem."""

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
