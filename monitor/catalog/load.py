"""Reading the probe catalog (probes/) into its records.

The catalog is data; this module reads it and refuses to hand out a catalog
that fails any rule of monitor.catalog.rules. Every problem is collected
before failing, so a translator sees all of them at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from monitor.catalog import coverage, rules, text_rules
from monitor.catalog.overlay import OVERLAY_FILES, merge_overlay
from monitor.catalog.records import Catalog, Problem, Scenario
from monitor.errors import CatalogError

__all__ = ["catalog_version", "default_catalog_dir", "load_catalog", "read_catalog"]


def default_catalog_dir() -> Path:
    """The catalog shipped with the package (probes/ in the repo or the wheel)."""
    import probes

    return Path(probes.__file__).resolve().parent


def catalog_version(root: Path, extra: Sequence[Path] = ()) -> str:
    """A content hash of every data file, the overlays' included: results carry it so that
    runs on different catalogs are never compared. Without overlays it is the hash of the
    catalogue alone (what every earlier release stored)."""
    digest = hashlib.sha256()
    for path in sorted(_data_files(root)):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    for i, overlay in enumerate(extra):
        for path in sorted(p for pattern in OVERLAY_FILES for p in overlay.glob(pattern)):
            digest.update(f"extra{i}/{path.relative_to(overlay).as_posix()}".encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _data_files(root: Path) -> Iterator[Path]:
    for pattern in ("languages.yaml", "options/*.csv", "pairs/*.csv", "prompts/*.yaml"):
        yield from root.glob(pattern)


def read_catalog(root: Path | None = None, extra: Sequence[Path] = ()
                 ) -> tuple[Catalog | None, list[Problem]]:
    """Read and check the catalog and its overlays; returns it only when there is no problem."""

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
        options = text_rules.check_aliases(root / "aliases" / f"{name}.csv", options, problems)
        pairs = rules.check_pairs(root / "pairs" / f"{name}.csv", options, languages, problems)
        text_rules.check_sources(root / "sources" / f"{name}.csv", options, problems)
        scenarios[name] = Scenario(name, options, tuple(pairs))
    prompts = {
        lang: p
        for lang in languages
        if (p := text_rules.check_prompts(root / "prompts" / f"{lang}.yaml", lang, scenarios,
                                          problems))
    }
    for stray in sorted((root / "prompts").glob("*.yaml")):
        if stray.stem not in languages:
            problems.append(Problem(
                str(stray), f"language {stray.stem!r} is not in languages.yaml",
                f"add `{stray.stem}: [...]` to languages.yaml or remove the file"))
    coverage.check_local_coverage(languages, {n: s.options for n, s in scenarios.items()}, root,
                               problems)
    coverage.check_names_across({n: s.options for n, s in scenarios.items()}, root, problems)
    for overlay in extra:
        merge_overlay(Path(overlay), languages, scenarios, prompts, problems)
    if problems:
        return None, problems
    overlays = tuple(Path(p) for p in extra)
    return Catalog(root=root, version=catalog_version(root, overlays), languages=languages,
                   scenarios=scenarios, prompts=prompts,
                   extra=overlays), []


def load_catalog(root: Path | None = None, extra: Sequence[Path] = ()) -> Catalog:
    """The catalog with its overlays, or CatalogError listing every problem."""
    catalog, problems = read_catalog(root, extra)
    if catalog is None:
        raise CatalogError(list(problems))
    return catalog
