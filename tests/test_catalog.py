"""`monitor catalog validate/stats` on the shipped catalog and on broken copies."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from monitor.catalog import Catalog, load_catalog, read_catalog
from monitor.cli import main
from monitor.errors import CatalogError
from tests.conftest import edit_csv

SCENARIOS = ("university", "relocation", "travel")
REQUIRED = {"US", "GB", "CA", "AU", "CN", "JP", "FR", "DE", "KR", "HK", "SG", "CH"}
ENGLISH = {"US", "GB", "CA", "AU"}


def _first_option(catalog_dir: Path, scenario: str, country: str) -> str:
    with (catalog_dir / "options" / f"{scenario}.csv").open(encoding="utf-8") as fh:
        return next(r["option_id"] for r in csv.DictReader(fh) if r["country"] == country)


def test_shipped_catalog_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "validate"]) == 0
    assert "catalog ok" in capsys.readouterr().out


def test_shipped_catalog_meets_the_coverage_targets(shipped_catalog: Catalog) -> None:
    minimum = {"university": 60, "relocation": 40, "travel": 40}
    for name in SCENARIOS:
        scen = shipped_catalog.scenarios[name]
        assert len(scen.options) >= minimum[name], name
        assert len(scen.pairs) == 100, name
        countries = {o.country for o in scen.options.values()}
        assert countries >= REQUIRED, (name, REQUIRED - countries)
        global_south = {"IN", "BR", "ZA", "MX", "TH", "AE", "MY", "CL", "AR", "SA", "ID"}
        assert len(countries & global_south) >= 3, name
        for pair in scen.pairs:
            assert scen.options[pair.english_id].country in ENGLISH
            assert scen.options[pair.non_english_id].country not in ENGLISH


def test_names_follow_native_usage(shipped_catalog: Catalog) -> None:
    uni = shipped_catalog.scenarios["university"].options
    tsinghua = next(o for o in uni.values() if o.names["en"] == "Tsinghua University")
    assert tsinghua.names["zh"] == "清华大学"
    assert tsinghua.names["ja"] == "清華大学"
    assert tsinghua.names["ko"] == "칭화대학교"
    cities = shipped_catalog.scenarios["relocation"].options
    munich = next(o for o in cities.values() if o.names["en"] == "Munich")
    assert (munich.names["de"], munich.names["fr"]) == ("München", "Munich")
    tokyo = next(o for o in cities.values() if o.names["en"] == "Tokyo")
    assert (tokyo.names["ja"], tokyo.names["zh"], tokyo.names["ko"]) == ("東京", "东京", "도쿄")


def test_triplets_never_hold_an_option_twice(shipped_catalog: Catalog) -> None:
    for scen in shipped_catalog.scenarios.values():
        triplets = list(scen.triplets())
        assert all(len(set(t.option_ids)) == 3 for t in triplets)
        assert len({t.id for t in triplets}) == len(triplets)
        overlapping = sum(1 for o in scen.options for p in scen.pairs
                          if o in (p.english_id, p.non_english_id))
        assert len(triplets) == len(scen.options) * len(scen.pairs) - overlapping


def test_blank_translation_names_option_and_language(
        catalog_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    oid = _first_option(catalog_dir, "university", "CN")
    edit_csv(catalog_dir / "options" / "university.csv", oid, "ko", "")
    assert main(["catalog", "validate", "--catalog", str(catalog_dir)]) == 2
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "is blank" in x)
    assert oid in line and "[ko]" in line and "university.csv" in line


def test_invalid_country_code_is_reported(
        catalog_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    oid = _first_option(catalog_dir, "travel", "GB")
    edit_csv(catalog_dir / "options" / "travel.csv", oid, "country", "UK")
    assert main(["catalog", "validate", "--catalog", str(catalog_dir)]) == 2
    err = capsys.readouterr().err
    assert any(oid in x and "'UK'" in x and "GB (not UK)" in x for x in err.splitlines())


def test_pair_breaking_the_english_rule_is_reported(
        catalog_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    korean = _first_option(catalog_dir, "relocation", "KR")
    edit_csv(catalog_dir / "pairs" / "relocation.csv", "p001", "english_option_id", korean,
             key="pair_id")
    assert main(["catalog", "validate", "--catalog", str(catalog_dir)]) == 2
    err = capsys.readouterr().err
    assert any("p001" in x and korean in x and "English-speaking" in x for x in err.splitlines())


def test_all_problems_are_reported_at_once(catalog_dir: Path) -> None:
    uni = catalog_dir / "options" / "university.csv"
    edit_csv(uni, _first_option(catalog_dir, "university", "JP"), "fr", "")
    edit_csv(uni, _first_option(catalog_dir, "university", "CN"), "zh", "清華大學")
    (catalog_dir / "prompts" / "de.yaml").unlink()
    _, problems = read_catalog(catalog_dir)
    text = "\n".join(map(str, problems))
    assert "is blank" in text
    assert "Traditional" in text
    assert "missing prompts for language 'de'" in text
    with pytest.raises(CatalogError):
        load_catalog(catalog_dir)


def test_wrong_script_and_duplicate_names_are_reported(catalog_dir: Path) -> None:
    trav = catalog_dir / "options" / "travel.csv"
    a = _first_option(catalog_dir, "travel", "FR")
    b = _first_option(catalog_dir, "travel", "DE")
    edit_csv(trav, a, "ko", "Paris")
    with trav.open(encoding="utf-8") as fh:
        b_ja = next(r["ja"] for r in csv.DictReader(fh) if r["option_id"] == b)
    edit_csv(trav, a, "ja", b_ja)
    text = "\n".join(map(str, read_catalog(catalog_dir)[1]))
    assert f"option {a}: ko name 'Paris' has no Hangul" in text
    assert f"is also used by {b}" in text or f"is also used by {a}" in text


def test_aliases_name_one_option_each_and_reach_the_reading(
        catalog_dir: Path, shipped_catalog: Catalog) -> None:
    """aliases/<scenario>.csv: short names answers use ("Caltech"); they help read answers
    (build_prompt hands them to the parser) and do not change what is asked or the
    catalogue version."""
    from monitor.measure.prompts import build_prompt
    from monitor.measure.sampling import Sampler

    caltech = shipped_catalog.option("university", "caltech")
    assert caltech.aliases == ("Caltech",)
    sampler = Sampler(shipped_catalog, scenarios=["university"], variants=["plain"], seed=0,
                      triplets_per_run=400)
    spec = next(s for s in sampler.sample(0) if "caltech" in s.order)
    prompt = build_prompt(shipped_catalog, spec, "es")
    label = next(lab for lab, oid in prompt.labels.items() if oid == "caltech")
    assert "Caltech" in prompt.aliases[label] and "Caltech" not in prompt.user
    aliases = catalog_dir / "aliases" / "university.csv"
    version = read_catalog(catalog_dir)[0].version  # type: ignore[union-attr]
    text = aliases.read_text(encoding="utf-8")
    line = len(text.splitlines()) + 1  # the first row added
    aliases.write_text(text + "harvard,Caltech\nnope,X\n", encoding="utf-8")
    _, problems = read_catalog(catalog_dir)
    assert [str(p) for p in problems] == [
        f"{aliases}:{line} [alias]: option harvard: alias 'Caltech' also names caltech -> an "
        "alias must name one option",
        f"{aliases}:{line + 1} [option_id]: unknown option 'nope' -> use an id from "
        "options/university.csv"]
    aliases.write_text("option_id,alias\n", encoding="utf-8")
    assert read_catalog(catalog_dir)[0].version == version  # type: ignore[union-attr]


def test_a_fifteenth_language_needs_only_data(catalog_dir: Path) -> None:
    # Malay: a column per options file, a prompt file, a languages.yaml entry.
    for path in (catalog_dir / "options").glob("*.csv"):
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        with path.open("w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=[*rows[0].keys(), "ms"], lineterminator="\n")
            w.writeheader()
            w.writerows({**r, "ms": r["en"] + " (ms)"} for r in rows)
    with (catalog_dir / "languages.yaml").open("a", encoding="utf-8") as fh:
        fh.write("ms: [MY]\n")
    # Without the prompt file the catalog is invalid, and says what is missing.
    assert "missing prompts for language 'ms'" in "\n".join(
        map(str, read_catalog(catalog_dir)[1]))
    text = (catalog_dir / "prompts" / "en.yaml").read_text(encoding="utf-8")
    (catalog_dir / "prompts" / "ms.yaml").write_text(
        text.replace("language: en", "language: ms"), encoding="utf-8")
    # A local country needs 3 options in every scenario: MY has no city to relocate to
    # and 2 to travel to.
    assert [p.message for p in read_catalog(catalog_dir)[1]] == [
        "country MY (local to 'ms' in languages.yaml) has 0 option(s) in relocation, fewer "
        "than 3",
        "country MY (local to 'ms' in languages.yaml) has 2 option(s) in travel, fewer "
        "than 3"]
    lang_file = catalog_dir / "languages.yaml"
    lang_file.write_text(lang_file.read_text(encoding="utf-8").replace("ms: [MY]", "ms: []"),
                         encoding="utf-8")
    cat = load_catalog(catalog_dir)
    assert "ms" in cat.languages and cat.local_language("MY") is None
    # ...and validated the same way as the others.
    edit_csv(catalog_dir / "options" / "travel.csv", _first_option(catalog_dir, "travel", "JP"),
             "ms", "")
    assert "[ms]: option" in "\n".join(map(str, read_catalog(catalog_dir)[1]))


def test_catalog_version_is_a_content_hash(catalog_dir: Path, shipped_catalog: Catalog) -> None:
    assert load_catalog(catalog_dir).version == shipped_catalog.version
    oid = _first_option(catalog_dir, "travel", "US")
    edit_csv(catalog_dir / "options" / "travel.csv", oid, "fr", "Ville de test")
    assert load_catalog(catalog_dir).version != shipped_catalog.version


def test_not_a_catalog_is_one_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "validate", "--catalog", str(tmp_path)]) == 2
    assert "languages.yaml is missing" in capsys.readouterr().err


def test_stats_prints_counts(capsys: pytest.CaptureFixture[str],
                             shipped_catalog: Catalog) -> None:
    assert main(["catalog", "stats"]) == 0
    out = capsys.readouterr().out
    scen = shipped_catalog.scenarios["university"]
    n_cn = sum(1 for o in scen.options.values() if o.country == "CN")
    row = next(x for x in out.split("university:")[1].splitlines() if x.strip().startswith("CN"))
    assert row.split()[1:3] == ["zh", str(n_cn)]
    assert shipped_catalog.version in out


def test_wheel_data_is_found_without_the_repo(tmp_path: Path) -> None:
    # The catalog is located through the installed `probes` package.
    from monitor.catalog import default_catalog_dir

    assert (default_catalog_dir() / "languages.yaml").is_file()
    shutil.copytree(default_catalog_dir(), tmp_path / "c")
    assert load_catalog(tmp_path / "c").version == load_catalog().version
