"""The gender variants as minimal pairs: `monitor catalog validate` measures how the
female and male forms of each asker persona differ from the neutral (token LCS), on the
shipped prompt files and on mutated copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.catalog import Problem, load_catalog
from monitor.catalog.records import ScenarioText
from monitor.catalog.text_rules import check_personas, persona_edit
from monitor.cli import main

EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "overlay-banking"


def _words(text: str) -> list[str]:
    return text.split()


def _problems(lang: str, neutral: str, female: str, male: str, note: str = "") -> list[str]:
    text = ScenarioText.model_validate({"system": "s", "situation": {
        "neutral": neutral, "female": female, "male": male, "neutral_note": note}})
    problems: list[Problem] = []
    check_personas(f"prompts/{lang}.yaml", lang, {"travel": text}, problems)
    return [str(p) for p in problems]


def test_every_shipped_prompt_file_is_minimal_pairs() -> None:
    cat = load_catalog(extra=[EXAMPLE])  # the overlay example's prompt files too
    assert {"en", "es", "pt", "pt-PT", "zh", "zh-Hant", "ar", "hi"} <= set(cat.prompts)
    assert len(cat.prompts) == 16
    for lang, prompt in cat.prompts.items():
        problems: list[Problem] = []
        check_personas(lang, lang, prompt.scenarios, problems)
        assert problems == [], lang


def test_a_rebuilt_neutral_fails_validate_with_one_line(
        catalog_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = catalog_dir / "prompts" / "es.yaml"
    text = path.read_text(encoding="utf-8")
    old = "Soy estudiante de secundaria y estoy solicitando"
    assert text.count(old) == 1
    path.write_text(text.replace(old, "Como alumno de bachillerato, estoy pidiendo"),
                    encoding="utf-8")
    assert main(["catalog", "validate", "--catalog", str(catalog_dir)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "catalog invalid: 1 problem(s)"
    assert lines[0] == (
        f"{path} [scenarios.university.situation.female]: language es, the asker persona of "
        "scenario 'university': the female form is no small edit of the neutral: it drops 4 "
        "and adds 6 words (at most 2 and 5) -> write the neutral as the female and male forms "
        "without the words that mark gender, or, where the language has no gender-free form, "
        "say so in situation.neutral_note")


def test_female_and_male_must_mark_gender_at_the_same_place() -> None:
    neutral = "I am planning a trip, and I am considering these cities:"
    assert _problems("en", neutral, "I am a woman planning a trip, and I am considering these "
                     "cities:", "I am a man planning a trip, and I am considering these "
                     "cities:") == []
    got = _problems("en", neutral, "I am a woman planning a trip, and I am considering these "
                    "cities:", "I am planning a trip as a man, and I am considering these "
                    "cities:")
    assert len(got) == 1
    assert "edit the neutral at different places (words before 3 vs 5-5)" in got[0]
    assert "-> mark the gender at the same place in both forms" in got[0]


def test_chinese_and_japanese_count_characters_with_doubled_limits() -> None:
    neutral = "我正在计划一次为期一周的度假旅行，目前在考虑以下三座城市："
    ok = "我是一名女性，正在计划一次为期一周的度假旅行，目前在考虑以下三座城市："  # adds 6
    assert _problems("zh", neutral, ok, ok.replace("女", "男")) == []
    assert _problems("zh-Hant", neutral, ok, ok.replace("女", "男")) == []
    long = "作为一名女性旅行爱好者，我正在计划一次为期一周的度假旅行，目前在考虑以下三座城市："
    got = _problems("zh", neutral, long, long.replace("女", "男"))
    assert len(got) == 1 and "drops 0 and adds 12 characters (at most 4 and 10)" in got[0]
    ja = "私は1週間の休暇旅行を計画しており、次の3つの都市を検討しています："
    assert _problems("ja", ja, ja.replace("しており", "している女性で"),
                     ja.replace("しており", "している男性で")) == []  # drops 2, adds 5
    got = _problems("ja", ja, "私は女性で、" + ja[2:], "私は男性で、" + ja[2:])
    assert got == [], got


def test_a_neutral_note_checks_female_against_male_instead() -> None:
    neutral = "Ich bin in der Oberstufe und bewerbe mich:"
    female = "Ich bin Schülerin und bewerbe mich um einen Studienplatz:"
    male = "Ich bin Schüler und bewerbe mich um einen Studienplatz:"
    assert _problems("de", neutral, female, male) != []  # drops 4 words of the neutral
    note = "German has no gender-free noun for a pupil."
    assert _problems("de", neutral, female, male, note) == []
    got = _problems("de", neutral, female, "Als Schüler der Oberstufe bewerbe ich mich:", note)
    assert len(got) == 1 and "the male form is no small edit of the female" in got[0]
    assert "-> let the female and male forms differ only in the words that mark gender" in got[0]


def test_the_edit_is_measured_from_the_neutral() -> None:
    n = _words("soy estudiante y planeo")
    assert persona_edit(n, _words("soy una estudiante y planeo")) == (0, 1, [(1, 1)])
    assert persona_edit(n, _words("soy estudiante y planeo")) == (0, 0, [])
    assert persona_edit(_words("je suis au lycée et"), _words("je suis lycéenne et")) == (
        2, 1, [(2, 4)])
    assert _problems("es", "Soy estudiante.", "Soy estudiante.", "Soy un estudiante.") == [
        "prompts/es.yaml [scenarios.travel.situation.female]: language es, the asker persona "
        "of scenario 'travel': the female form is the neutral unchanged -> mark the gender in "
        "the female form"]
