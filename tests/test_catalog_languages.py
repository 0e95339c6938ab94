"""A language is data: the catalogue with the staged names and prompts of es, pt, ar, hi,
id, it, tr and ru (probes/i18n) validates with 14 languages in the option_id format (which
frees `id` for Indonesian), and its rules catch a Latin placeholder in ar/hi/ru, a missing
name and a local country with fewer than 3 options in a scenario. (The new languages' local
countries and their options come with issue 16's catalogue; here they are nobody's local
language yet.)"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from monitor.catalog import read_catalog

STAGED = Path(__file__).resolve().parent.parent / "probes" / "i18n"
NEW = ("es", "pt", "ar", "hi", "id", "it", "tr", "ru")


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def _write(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _fourteen(catalog_dir: Path) -> Path:
    """The catalogue with the eight staged languages added, in the option_id format."""
    names = {lang: {(r["scenario"], r["id"]): r["name"] for r in _rows(STAGED / f"{lang}.csv")[1]}
             for lang in NEW}
    for path in sorted((catalog_dir / "options").glob("*.csv")):
        header, rows = _rows(path)
        out = []
        for row in rows:
            new = {"option_id": row["id"], **{k: v for k, v in row.items() if k != "id"}}
            for lang in NEW:
                new[lang] = names[lang][(path.stem, row["id"])]
            out.append(new)
        _write(path, ["option_id", *header[1:], *NEW], out)
    with (catalog_dir / "languages.yaml").open("a", encoding="utf-8") as fh:
        fh.write("".join(f"{lang}: []\n" for lang in NEW))
    for lang in NEW:
        shutil.copy(STAGED / "prompts" / f"{lang}.yaml", catalog_dir / "prompts" / f"{lang}.yaml")
    return catalog_dir


def test_the_catalogue_validates_with_fourteen_languages(catalog_dir: Path) -> None:
    catalog, problems = read_catalog(_fourteen(catalog_dir))
    assert problems == [], [str(p) for p in problems[:5]]
    assert catalog is not None and len(catalog.languages) == 14
    tsinghua = catalog.scenarios["university"].options["tsinghua"]
    assert tsinghua.names["id"].startswith("Universitas")  # Indonesian, not the option id


def test_the_older_format_cannot_take_an_indonesian_column(catalog_dir: Path) -> None:
    root = _fourteen(catalog_dir)
    path = root / "options" / "travel.csv"
    header, rows = _rows(path)
    with path.open("w", encoding="utf-8", newline="") as fh:  # back to `id,country,...`
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["id", *header[1:]])
        writer.writerows([[r["option_id"], *(r[c] for c in header[1:])] for r in rows])
    _, problems = read_catalog(root)
    assert any("needs the option_id format" in str(p) and "travel.csv" in str(p)
               for p in problems)


@pytest.mark.parametrize("lang", ["ar", "hi", "ru"])
def test_a_latin_placeholder_in_a_native_script_language_is_caught(
        catalog_dir: Path, lang: str) -> None:
    root = _fourteen(catalog_dir)
    path = root / "options" / "university.csv"
    header, rows = _rows(path)
    next(r for r in rows if r["option_id"] == "mit")[lang] = "MIT"
    _write(path, header, rows)
    _, problems = read_catalog(root)
    assert [str(p) for p in problems if "mit" in str(p)] == [
        next(str(p) for p in problems if "'MIT'" in str(p))]
    assert f"{lang} name 'MIT' has no" in str(problems[0])


def test_a_missing_name_in_a_new_language_is_caught(catalog_dir: Path) -> None:
    root = _fourteen(catalog_dir)
    path = root / "options" / "relocation.csv"
    header, rows = _rows(path)
    rows[0]["tr"] = ""
    _write(path, header, rows)
    _, problems = read_catalog(root)
    assert len(problems) == 1 and "tr name '' is blank" in str(problems[0])


def test_a_local_country_with_fewer_than_three_options_is_caught(catalog_dir: Path) -> None:
    root = _fourteen(catalog_dir)
    text = (root / "languages.yaml").read_text(encoding="utf-8")
    (root / "languages.yaml").write_text(text.replace("it: []", "it: [IT]"), encoding="utf-8")
    _, problems = read_catalog(root)
    msgs = [str(p) for p in problems]
    # Italy has options in travel only (Rome); none in university or relocation yet.
    assert len(msgs) == 3 and all("country IT (local to 'it'" in m for m in msgs)
    assert any("university.csv" in m and "0 option(s)" in m for m in msgs)
