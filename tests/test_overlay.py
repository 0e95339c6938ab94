"""A team's own scenarios: a catalogue overlay (catalog.extra_paths) is validated by the
catalogue's rules, merged, part of the catalogue version, asked by a run, and shows up in
`probe --json`, the metrics and the report; `new-scenario` writes its skeleton."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog, default_catalog_dir, load_catalog, read_catalog
from monitor.yamlfile import load_yaml
from tests.support.helpers import write_config

NAME = "weekend"


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})


def make_overlay(root: Path, name: str = NAME) -> Path:
    """An overlay scenario built from the shipped travel data under a new name, with texts
    of its own ("weekend city break"), so the simulated model tells the two apart."""
    shipped = default_catalog_dir()
    for sub in ("options", "pairs", "sources", "prompts"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("options", "pairs", "sources"):
        shutil.copy(shipped / sub / "travel.csv", root / sub / f"{name}.csv")
    for path in sorted((shipped / "prompts").glob("*.yaml")):
        data = load_yaml(path)
        assert isinstance(data, dict)
        travel = data["scenarios"]["travel"]
        texts = {"system": f"(Weekend) {travel['system']}",
                 "situation": {k: f"(Weekend) {v}" for k, v in travel["situation"].items()}}
        (root / "prompts" / path.name).write_text(json.dumps(
            {"language": data["language"], "scenarios": {name: texts}}, ensure_ascii=False),
            encoding="utf-8")
    return root


def test_an_overlay_validates_merges_and_changes_the_version(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    overlay = make_overlay(tmp_path / "extra")
    cat = load_catalog(None, [overlay])
    assert list(cat.scenarios) == [*shipped_catalog.scenarios, NAME]
    assert all(NAME in p.scenarios for p in cat.prompts.values())
    assert cat.version != shipped_catalog.version and cat.extra == (overlay,)
    # The overlay's content is part of the version.
    edit = overlay / "sources" / f"{NAME}.csv"
    edit.write_text(edit.read_text(encoding="utf-8") + "", encoding="utf-8")
    assert load_catalog(None, [overlay]).version == cat.version
    edit.write_text(edit.read_text(encoding="utf-8").replace("Euromonitor", "Euromonitor "),
                    encoding="utf-8")
    assert load_catalog(None, [overlay]).version != cat.version
    out = _cli("catalog", "validate", "--extra", str(overlay))
    assert out.returncode == 0, out.stderr
    assert f"4 scenarios ({', '.join([*shipped_catalog.scenarios, NAME])})" in out.stdout


def _break(overlay: Path, how: str) -> str:
    """Damage the overlay one way; the file the one-line error must name."""
    if how == "shipped name":
        for sub in ("options", "pairs", "sources"):
            (overlay / sub / f"{NAME}.csv").rename(overlay / sub / "travel.csv")
        for path in (overlay / "prompts").glob("*.yaml"):
            path.write_text(path.read_text(encoding="utf-8").replace(f'"{NAME}"', '"travel"'),
                            encoding="utf-8")
        return "travel.csv"
    if how == "missing prompt file":
        (overlay / "prompts" / "ko.yaml").unlink()
        return "prompts/ko.yaml"
    if how == "own languages":
        (overlay / "languages.yaml").write_text("en: [US]\n", encoding="utf-8")
        return "languages.yaml"
    if how == "placeholder text":
        path = overlay / "prompts" / "de.yaml"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["scenarios"][NAME]["system"] = "TODO translate"
        path.write_text(json.dumps(data), encoding="utf-8")
        return "prompts/de.yaml"
    if how == "bad country":
        path = overlay / "options" / f"{NAME}.csv"
        rows = list(csv.reader(path.open(encoding="utf-8")))
        rows[1][1] = "XX"
        with path.open("w", encoding="utf-8", newline="") as fh:
            csv.writer(fh).writerows(rows)
        return f"options/{NAME}.csv"
    if how == "foreign column":  # an overlay cannot add a language: the fix says so
        path = overlay / "options" / f"{NAME}.csv"
        rows = list(csv.reader(path.open(encoding="utf-8")))
        with path.open("w", encoding="utf-8", newline="") as fh:
            csv.writer(fh).writerows([[*rows[0], "xx"], *([*r, "x"] for r in rows[1:])])
        return "not a language in the catalogue -> name the column after a catalogue language"
    if how == "too few pairs":
        path = overlay / "pairs" / f"{NAME}.csv"
        path.write_text("\n".join(path.read_text(encoding="utf-8").splitlines()[:50]) + "\n",
                        encoding="utf-8")
        return f"pairs/{NAME}.csv"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["shipped name", "missing prompt file", "own languages",
                                 "placeholder text", "bad country", "foreign column",
                                 "too few pairs"])
def test_bad_overlay_input_fails_with_one_line_naming_the_file(tmp_path: Path, how: str) -> None:
    overlay = make_overlay(tmp_path / "extra")
    where = _break(overlay, how)
    catalog, problems = read_catalog(None, [overlay])
    # Each problem is one line; the first names the file (a bad country also unbalances the
    # pairs and leaves its real country with fewer options: their own problems and lines).
    assert catalog is None and 1 <= len(problems) <= 3, [str(p) for p in problems]
    assert where in str(problems[0]) and all("\n" not in str(p) for p in problems)
    out = _cli("catalog", "validate", "--extra", str(overlay))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == len(problems) + 1 and where in lines[0]
    assert f"{len(problems)} problem" in lines[-1]


def test_a_missing_overlay_folder_in_the_config_is_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}],
                       catalog={"extra_paths": ["no-such-dir"]})
    out = _cli("probe", "--once", "--config", str(cfg))
    assert out.returncode == 2
    assert "no-such-dir" in out.stderr and "catalog overlay folder not found" in out.stderr


def test_an_overlay_scenario_is_asked_and_reported(tmp_path: Path) -> None:
    make_overlay(tmp_path / "extra")
    port_free = 0  # the exporter is rendered in-process below
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo",
                                   "params": {"seed": 4, "bias_points": 1.0}}],
                       catalog={"extra_paths": ["extra"]},  # relative to the config file
                       sampling={"triplets_per_run": 12, "scenarios": [NAME, "travel"]})
    out = _cli("probe", "--once", "--config", str(cfg), "--json", cwd=tmp_path.parent)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    (run,) = doc["endpoints"]
    scenarios = {row["scenario"] for row in run["md"]}
    assert NAME in scenarios, scenarios
    assert run["status_counts"]["ok"] == run["calls"] > 0
    # The metrics carry the scenario.
    from monitor.serve.exporter import make_registry, render
    from monitor.serve.metrics import MetricsState
    from monitor.store import Store

    state = MetricsState()
    state.refresh(Store(tmp_path / "monitor.duckdb"), "sim")
    text = render(make_registry(state)).decode()
    assert f'scenario="{NAME}"' in text and port_free == 0
    # And the report.
    report = tmp_path / "report"
    out = _cli("report", "--config", str(cfg), "--out", str(report), "--format", "md")
    assert out.returncode == 0, out.stderr
    body = "".join(p.read_text(encoding="utf-8") for p in report.glob("*.md"))
    assert NAME in body


def test_new_scenario_writes_a_skeleton_that_validate_explains(tmp_path: Path) -> None:
    """The default languages (sampling.languages' default): one line per TODO marker."""
    out = _cli("catalog", "new-scenario", "banking", "--dir", str(tmp_path / "mine"))
    assert out.returncode == 0, out.stderr
    mine = tmp_path / "mine"
    for f in ("options/banking.csv", "sources/banking.csv", *(f"prompts/{lang}.yaml" for lang in
                                                              ("en", "ja", "zh", "fr", "de",
                                                               "ko"))):
        assert (mine / f).is_file(), f
    check = _cli("catalog", "validate", "--extra", str(mine))
    assert check.returncode == 2
    # What is left to do, each once: the options, sources and pairs rows, 4 texts x 6.
    assert "catalog invalid: 27 problem(s)" in check.stderr, check.stderr
    assert "monitor catalog pairs banking --dir" in check.stderr
    again = _cli("catalog", "new-scenario", "banking", "--dir", str(mine))
    assert again.returncode == 2 and "exists" in again.stderr
    shipped = _cli("catalog", "new-scenario", "travel", "--dir", str(mine))
    assert shipped.returncode == 2 and "shipped catalogue" in shipped.stderr
    # A second scenario in the same overlay appends its texts to the prompt files.
    assert _cli("catalog", "new-scenario", "insurance", "--dir", str(mine)).returncode == 0
    en = load_yaml(mine / "prompts" / "en.yaml")
    assert isinstance(en, dict) and set(en["scenarios"]) == {"banking", "insurance"}


def test_pairs_are_drawn_for_an_overlay_scenario(tmp_path: Path) -> None:
    overlay = make_overlay(tmp_path / "extra")
    (overlay / "pairs" / f"{NAME}.csv").unlink()
    out = _cli("catalog", "pairs", NAME, "--dir", str(overlay))
    assert out.returncode == 0, out.stderr
    assert "wrote 100 pairs" in out.stdout
    assert read_catalog(None, [overlay])[1] == []


def test_the_worked_example_validates_and_the_cli_draws_its_pairs(tmp_path: Path) -> None:
    """docs/examples/overlay-banking/ as its README says: validate with the CLI, and
    `monitor catalog pairs` on a copy gives its pairs file byte for byte."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "overlay-banking"
    catalog, problems = read_catalog(None, [example])
    assert problems == [] and catalog is not None
    banking = catalog.scenarios["banking"]
    assert len(banking.options) == 36 and len(banking.pairs) == 100
    assert banking.options["jpmorgan_chase"].aliases == ("Chase",)
    copy = tmp_path / "overlay-banking"
    shutil.copytree(example, copy)
    (copy / "pairs" / "banking.csv").unlink()
    out = _cli("catalog", "pairs", "banking", "--dir", str(copy))
    assert out.returncode == 0 and "wrote 100 pairs" in out.stdout, out.stderr
    assert (copy / "pairs" / "banking.csv").read_bytes() == (
        example / "pairs" / "banking.csv").read_bytes()
    check = _cli("catalog", "validate", "--extra", str(copy))
    assert check.returncode == 0 and "catalog ok" in check.stdout, check.stderr


def test_an_overlay_may_cover_fewer_languages_and_is_asked_only_in_those(
        tmp_path: Path) -> None:
    overlay = make_overlay(tmp_path / "extra")
    path = overlay / "options" / f"{NAME}.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    keep = ["option_id", "country", "en", "ja", "zh"]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, keep, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    for lang in ("fr", "de", "ko"):
        (overlay / "prompts" / f"{lang}.yaml").unlink()
    catalog, problems = read_catalog(None, [overlay])
    assert problems == [] and catalog is not None
    assert catalog.scenarios[NAME].languages == ("en", "ja", "zh")
    assert catalog.scenarios["travel"].languages == ()  # the shipped ones: every language
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}],
                       catalog={"extra_paths": [str(overlay)]},
                       sampling={"triplets_per_run": 6, "scenarios": [NAME]})
    out = _cli("probe", "--once", "--config", str(cfg))  # the six default languages
    assert out.returncode == 2
    assert "has no names in fr, de, ko" in out.stderr and len(out.stderr.splitlines()) == 1
    out = _cli("probe", "--once", "--config", str(cfg), "--languages", "en,ja,zh", "--json")
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)["endpoints"]
    assert run["status_counts"]["ok"] == 18
    # Without en the pairs have no English-speaking side: one clear line.
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, ["option_id", "country", "ja", "zh"], extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    _, problems = read_catalog(None, [overlay])
    assert any("needs names in en" in str(p) for p in problems)


# --- a team's own scenario, sized for its domain -----------------------------------------

BANKS = [("chase", "US", "JPMorgan Chase"), ("bofa", "US", "Bank of America"),
         ("citi", "US", "Citibank"), ("bnp", "FR", "BNP Paribas"),
         ("credit_agricole", "FR", "Crédit Agricole"), ("socgen", "FR", "Société Générale"),
         ("deutsche", "DE", "Deutsche Bank"), ("commerzbank", "DE", "Commerzbank"),
         ("ing_de", "DE", "ING Deutschland")]
EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "overlay-banking"


def small_overlay(root: Path, banks: list[tuple[str, str, str]] = BANKS) -> Path:
    """9 banks in 3 countries asked in en, fr, de (the example's texts), pairs not drawn."""
    for sub in ("options", "pairs", "sources", "prompts"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    with (root / "options" / "banking.csv").open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(
            [["option_id", "country", "en", "fr", "de"],
             *([oid, country, name, name, name] for oid, country, name in banks)])
    (root / "sources" / "banking.csv").write_text(
        "id,source,rank,note\n" + "".join(f"{oid},annual report 2024,,\n" for oid, _, _ in banks),
        encoding="utf-8")
    for lang in ("en", "fr", "de"):
        shutil.copy(EXAMPLE / "prompts" / f"{lang}.yaml", root / "prompts" / f"{lang}.yaml")
    return root


def test_a_small_scenario_is_paired_from_its_options_and_validates(tmp_path: Path) -> None:
    overlay = small_overlay(tmp_path / "mine")
    _, problems = read_catalog(None, [overlay])
    assert [str(p) for p in problems] == [
        f"{overlay / 'pairs' / 'banking.csv'}: missing pairs file -> draw them: "
        f"monitor catalog pairs banking --dir {overlay}"]
    out = _cli("catalog", "pairs", "banking", "--dir", str(overlay))
    assert out.returncode == 0, out.stderr
    assert "wrote 18 pairs" in out.stdout and "9 options allow 18 distinct pairs" in out.stdout
    catalog, problems = read_catalog(None, [overlay])
    assert problems == [] and catalog is not None
    banking = catalog.scenarios["banking"]
    assert banking.languages == ("en", "fr", "de")
    pairs = {(p.english_id, p.non_english_id) for p in banking.pairs}
    assert len(pairs) == len(banking.pairs) == 18  # every US x (FR, DE) pair, once
    # Every monitored triplet holds the three countries: US in the pair, FR and DE each
    # a target or in the pair.
    assert len(banking.monitored_triplets(catalog.monitored(["en", "fr", "de"]))) == 54
    # More than the options allow is said, and nothing is written.
    before = (overlay / "pairs" / "banking.csv").read_bytes()
    more = _cli("catalog", "pairs", "banking", "--dir", str(overlay), "--count", "100")
    assert more.returncode == 2 and len(more.stderr.strip().splitlines()) == 1
    assert "give at most 18 distinct pairs" in more.stderr and "--count 18" in more.stderr
    assert (overlay / "pairs" / "banking.csv").read_bytes() == before
    # Hand-cut pairs are too few for these options (the documented minimum).
    path = overlay / "pairs" / "banking.csv"
    path.write_text("\n".join(before.decode().splitlines()[:11]) + "\n", encoding="utf-8")
    _, problems = read_catalog(None, [overlay])
    assert any("10 pairs, expected at least 18" in str(p) for p in problems)


@pytest.mark.parametrize(("banks", "needle"), [
    (BANKS[:-1], "country DE (local to 'de') has 2 option(s) in banking, fewer than 3"),
    (BANKS[3:], "no option in an English-speaking country"),
    ([*BANKS[:3], ("hsbc", "GB", "HSBC"), ("barclays", "GB", "Barclays"),
      ("lloyds", "GB", "Lloyds Bank")], "options only in English-speaking countries"),
])
def test_a_small_scenario_missing_a_side_or_thin_is_one_line(
        tmp_path: Path, banks: list[tuple[str, str, str]], needle: str) -> None:
    overlay = small_overlay(tmp_path / "mine", banks)
    out = _cli("catalog", "pairs", "banking", "--dir", str(overlay))
    assert out.returncode == 2 and needle in out.stderr, out.stderr
    assert "nothing was drawn" in out.stderr and "Traceback" not in out.stderr


def test_a_skeleton_with_indonesian_has_one_id_column_and_only_its_todos(
        tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    out = _cli("catalog", "new-scenario", "banking", "--dir", str(mine), "--languages",
               "en,id")
    assert out.returncode == 0, out.stderr
    header = (mine / "options" / "banking.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "option_id,country,en,id"
    assert "option_id,country" in out.stdout and "id,country" not in out.stdout.replace(
        "option_id,country", "")
    check = _cli("catalog", "validate", "--extra", str(mine))
    lines = check.stderr.strip().splitlines()
    assert lines[-1] == "catalog invalid: 11 problem(s)", check.stderr  # 3 rows + 4 x 2 texts
    assert all("TODO" in line for line in lines[:-1]), lines
    assert not (mine / "prompts" / "fr.yaml").exists()
    bad = _cli("catalog", "new-scenario", "loans", "--dir", str(mine), "--languages", "fr,de")
    assert bad.returncode == 2 and "needs en" in bad.stderr


def test_the_old_pairs_hint_for_a_team_scenario_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "monitor.catalog.pairs", "--scenario", "banking"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "monitor catalog pairs banking --dir DIR" in out.stderr
