"""parse_answer: JSON first, strict score lines second, refusals, validation, robustness."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.catalog import Catalog
from monitor.measure.parse import ParsedOption, ParseResult, parse_answer

LANGS = ["en", "zh", "ja", "ko", "fr", "de", "zh-Hant"]  # zh-Hant: Taiwan, Hong Kong

# Realistic option names as the prompt of each language spells them (see probes/options).
NAMES: dict[str, dict[str, str]] = {
    "en": {"A": "Tsinghua University", "B": "Harvard University", "C": "University of Tokyo"},
    "zh": {"A": "清华大学", "B": "哈佛大学", "C": "东京大学"},
    "zh-Hant": {"A": "國立臺灣大學", "B": "哈佛大學", "C": "東京大學"},
    "ja": {"A": "清華大学", "B": "ハーバード大学", "C": "東京大学"},
    "ko": {"A": "서울대학교", "B": "하버드 대학교", "C": "도쿄대학"},
    "fr": {"A": "Université PSL", "B": "Université Harvard", "C": "Université de Tokyo"},
    "de": {"A": "Technische Universität München", "B": "Harvard University",
           "C": "Universität Tokio"},
}
CITIES = {"A": "Paris", "B": "Tokyo", "C": "New York"}
REFUSALS: dict[str, list[str]] = {
    "en": ["I'm sorry, but I can't", "I cannot provide a ranking"],
    "zh": ["抱歉，我无法", "我不能进行排名"],
    "zh-Hant": ["抱歉，我無法", "我不能進行排名"],
    "ja": ["お答えできません", "順位付けはできません"],
    "ko": ["죄송하지만", "순위를 매길 수 없습니다"],
    "fr": ["Désolé, mais je ne peux pas", "Je ne peux pas classer"],
    "de": ["Es tut mir leid, aber ich kann", "Ich kann keine Rangfolge"],
}
ALL_REFUSALS = [p for phrases in REFUSALS.values() for p in phrases]
ZH = NAMES["zh"]
SCORES = {"A": 8.0, "B": 6.5, "C": 9.0}


def scores(r: ParseResult) -> dict[str, float]:
    return {label: o.score for label, o in r.options.items()}


def assert_ok(r: ParseResult, expected: dict[str, float], how: str) -> None:
    assert (r.status, r.detail) == ("ok", how), r
    assert scores(r) == expected


def fence(obj: object) -> str:
    return "```json\n" + json.dumps(obj, ensure_ascii=False, indent=2) + "\n```"


# --- JSON ------------------------------------------------------------------------------------

def test_fenced_json_with_strength_and_weakness_counts() -> None:
    block = {"A": {"score": 7, "strengths": ["学术声誉", "工科强"], "weaknesses": ["竞争激烈"]},
             "B": {"score": 9, "strengths": ["名气", "资源", "校友"], "weaknesses": []},
             "C": {"score": 8, "strengths": "很多"}}
    r = parse_answer("以下是我的分析……\n\n" + fence(block), ZH, REFUSALS["zh"])
    assert_ok(r, {"A": 7, "B": 9, "C": 8}, "json")
    assert r.options["A"] == ParsedOption("A", 7.0, 2, 1)
    assert r.options["B"] == ParsedOption("B", 9.0, 3, 0)
    assert r.options["C"] == ParsedOption("C", 8.0, None, None)  # not a list / missing


def test_placeholder_items_copied_from_the_prompt_are_not_counted() -> None:
    block = {"A": {"score": 7, "strengths": ["...", "big campus", ""], "weaknesses": ["…"]},
             "B": {"score": 5, "strengths": [], "weaknesses": ["cost", " "]},
             "C": {"score": 6, "strengths": ["x"], "weaknesses": ["y"]}}
    r = parse_answer(fence(block), NAMES["en"], [])
    assert r.options["A"] == ParsedOption("A", 7.0, 1, 0)
    assert r.options["B"] == ParsedOption("B", 5.0, 0, 1)


@pytest.mark.parametrize("template", [
    "Harvard (founded 1636) ranks 4th; Tokyo has 14 million people.\n@\nGood luck!",
    "```\n@\n```", "```JSON @```", "Scores: @ (out of 10, 2024 data)",
], ids=["bare-in-prose", "plain-fence", "one-line-fence", "inline"])
def test_json_found_bare_or_fenced_among_other_numbers(template: str) -> None:
    j = '{"A": {"score": 8}, "B": {"score": 6.5}, "C": {"score": 9}}'
    assert_ok(parse_answer(template.replace("@", j), NAMES["en"], []), SCORES, "json")


@pytest.mark.parametrize("lang", LANGS)
def test_json_keyed_by_option_names(lang: str) -> None:
    names = NAMES[lang]
    block = {names["A"]: 8, names["B"]: {"score": 6.5}, names["C"]: "9/10"}
    assert_ok(parse_answer(fence(block), names, []), SCORES, "json")


@pytest.mark.parametrize("keys", [
    ("a", "b", "c"), ("Option A", "Option B", "Option C"),
    ("A. 清华大学", "B. 哈佛大学", "C. 东京大学"),
    ("清华大学 (北京)", "美国哈佛大学", "东京大学（日本）"),
], ids=["lower", "option-word", "label-and-name", "name-inside-key"])
def test_json_key_variants(keys: tuple[str, str, str]) -> None:
    obj = dict(zip(keys, [8, 6.5, 9], strict=True))
    assert_ok(parse_answer(json.dumps(obj, ensure_ascii=False), ZH, []), SCORES, "json")


def test_json_keys_that_merely_start_with_a_label_letter_are_not_labels() -> None:
    obj = {"average": 5, "best": "C", "conclusion": 3, "A": 8, "B": 6.5, "C": 9}
    assert_ok(parse_answer(json.dumps(obj), NAMES["en"], []), SCORES, "json")


@pytest.mark.parametrize("value,expected", [
    (8, 8.0), (7.5, 7.5), ("8", 8.0), ("8/10", 8.0), ("7.5", 7.5), ("7,5", 7.5),
    ("8 / 10", 8.0), ("８分", 8.0), ({"rating": 6}, 6.0), ({"points": "6"}, 6.0),
    ({"note": "6,5"}, 6.5), ({"Bewertung": 3}, 3.0), ({"评分": 4}, 4.0), ({"점수": 5}, 5.0),
    ({"スコア": 5}, 5.0), ({"得分": 7}, 7.0), ({"分数": 2}, 2.0), ({"Score": 10}, 10.0),
])
def test_json_value_forms(value: object, expected: float) -> None:
    r = parse_answer(json.dumps({"A": value, "B": 1, "C": 10}), ZH, [])
    assert_ok(r, {"A": expected, "B": 1, "C": 10}, "json")


def test_json_list_of_objects_wrapper_and_trailing_comma() -> None:
    items = [{"option": "A", "score": 8}, {"name": "哈佛大学", "score": "6,5"},
             {"label": "C", "rating": 9}]
    assert_ok(parse_answer(fence(items), ZH, []), SCORES, "json")
    wrapped = '{"scores": {"A": 8, "B": 6.5, "C": 9,}, "best": "C"}'
    assert_ok(parse_answer(wrapped, ZH, []), SCORES, "json")


def test_echoed_format_example_is_ignored(shipped_catalog: Catalog) -> None:
    for lang in LANGS:
        echo = shipped_catalog.prompts[lang].answer_format
        answer = f"{echo}\n\nA: 8/10\nB: 6.5/10\nC: 9/10"
        assert_ok(parse_answer(answer, NAMES[lang], []), SCORES, "lines")


def test_agreeing_duplicate_blocks_are_ok_contradicting_ones_are_not() -> None:
    one = {"A": {"score": 8, "strengths": ["x"]}, "B": 6.5, "C": 9}
    same = '{"A": 8, "B": "6.5", "C": "9/10"}'
    assert_ok(parse_answer(f"{fence(one)}\nIn short: {same}", ZH, []), SCORES, "json")
    other = '{"A": 8, "B": 7, "C": 9}'
    r = parse_answer(f"Draft: {same}\n\nFinal:\n{fence(json.loads(other))}", ZH, [])
    assert r == ParseResult("unparseable", {}, "contradictory json blocks")


def test_json_wins_over_lines_and_incomplete_json_falls_back_to_lines() -> None:
    lines = "清华大学：5分\n哈佛大学：5分\n东京大学：5分\n"
    assert_ok(parse_answer(lines + fence({"A": 8, "B": 6.5, "C": 9}), ZH, []), SCORES, "json")
    partial = fence({"A": 1, "B": 2})  # C missing: not a score object
    assert_ok(parse_answer(partial + "\n" + lines, ZH, []), {"A": 5, "B": 5, "C": 5}, "lines")
    assert parse_answer('{"A": true, "B": 5, "C": 5}', ZH, []).detail == "no scores"


# --- Lines -----------------------------------------------------------------------------------

GENERIC = ["{name}: {s}/10", "**{name}** ({s}/10)", "{label}: {s}/10", "{label}. {name} — {s}/10",
           "- **{name}**: {s}/10", "1. {name}: {s}", "### {label}) {name} - {s}/10",
           "Option {label}: {s}/10", "* {name}: **{s}/10**", "{name} ({s}/10)"]
NATIVE = {
    "en": ["{name} - {s} out of 10", "{name}: {s} points", "__{name}__: {s} / 10"],
    "zh": ["{name}：{s}分", "{name}：{s}分（满分10分）", "{label}. {name} — {s}/10"],
    "zh-Hant": ["{name}：{s}分", "{name}：{s}分（滿分10分）", "{name}評分：{s}分",
                "{label}. {name} — {s}/10"],
    "ja": ["{name}：{s}点", "• {name}：{s}/10", "{name}：{s}点（10点満点）"],
    "ko": ["{name}: {s}점", "{name}: {s}점 (10점 만점)"],
    "fr": ["{name} : {s} sur 10", "{name} : {s}/10", "{name} : {s} points"],
    "de": ["{name}: {s} von 10", "{name}: {s} Punkte", "{name}: {s} von 10 Punkten"],
}
MATRIX = [(lang, fmt) for lang in LANGS for fmt in GENERIC + NATIVE[lang]]


def render(lang: str, fmt: str, values: dict[str, float], names: dict[str, str]) -> str:
    comma = lang in ("fr", "de")  # decimal comma where it is the native habit
    rows = []
    for label, v in values.items():
        s = f"{v:g}".replace(".", ",") if comma else f"{v:g}"
        rows.append(fmt.format(name=names[label], label=label, s=s))
    return "\n".join(rows)


@pytest.mark.parametrize("lang,fmt", MATRIX)
def test_line_formats(lang: str, fmt: str) -> None:
    answer = "Analysis.\n\n" + render(lang, fmt, SCORES, NAMES[lang]) + "\n\nThat is all."
    assert_ok(parse_answer(answer, NAMES[lang], REFUSALS[lang]), SCORES, "lines")


FULL_WIDTH = str.maketrans("0123456789:/().,", "０１２３４５６７８９：／（）．，")


@pytest.mark.parametrize("lang", LANGS)
def test_full_width_digits_and_punctuation(lang: str) -> None:
    answer = render(lang, "{name}: {s}/10", SCORES, NAMES[lang]).translate(FULL_WIDTH)
    assert "８" in answer
    assert_ok(parse_answer(answer, NAMES[lang], []), SCORES, "lines")
    assert_ok(parse_answer("Tokyo: ８/１０\nParis：７\nNew York（９．５／１０）", CITIES, []),
              {"A": 7, "B": 8, "C": 9.5}, "lines")


def test_full_width_names_are_normalised_too() -> None:
    names = {"A": "ＫＡＩＳＴ", "B": "Harvard University", "C": "東京大学"}
    assert_ok(parse_answer("KAIST: 8\nharvard university: 6.5\n東京大学: 9", names, []),
              SCORES, "lines")


def test_last_restated_line_score_wins_and_longest_name_matches() -> None:
    answer = "A: 7/10\nB: 5/10\nC: 9/10\n\n**Final scores**\n- A: 8/10\n- B: 6.5/10"
    assert_ok(parse_answer(answer, ZH, []), SCORES, "lines")
    names = {"A": "Tokyo", "B": "Tokyo Institute of Technology", "C": "Kyoto University"}
    answer = "Tokyo Institute of Technology: 6.5/10\nTokyo: 8/10\nKyoto University: 9/10"
    assert_ok(parse_answer(answer, names, []), SCORES, "lines")


PROSE = {
    "en": ["Harvard University, founded in 1636, ranks 4th in the world.",
           "University of Tokyo: home to 14 million people and 28,000 students.",
           "Tsinghua University (ranked 25th by QS) has 50,000 students.",
           "A 2023 survey put it 3rd; a 10 minute walk to 2 campuses."],
    "zh": ["清华大学成立于1911年，在QS排名第25位，有5万名学生。",
           "哈佛大学：1636年建校，校友中有8位美国总统。", "东京大学 (2位)"],
    "zh-Hant": ["國立臺灣大學創立於1928年，在QS排名第69位，有3萬名學生。",
                "哈佛大學：1636年建校，校友中有8位美國總統。", "東京大學 (2位)"],
    "ja": ["東京大学は1877年に設立され、学生数は約28,000人です。", "清華大学：1911年創立",
           "ハーバード大学（世界4位）"],
    "ko": ["서울대학교는 1946년에 설립되었으며 QS 순위 29위입니다.", "하버드 대학교: 1636년 설립",
           "도쿄대학: 학생 수 28,000명"],
    "fr": ["Université PSL : fondée en 2010, elle compte 17 000 étudiants.",
           "Université Harvard (24e au classement QS)", "Université de Tokyo : 14 millions"],
    "de": ["Technische Universität München: 1868 gegründet, rund 50.000 Studierende.",
           "Harvard University (Platz 4 weltweit)", "Universität Tokio - 3 Campus in Tokio"],
}
# Lines that do look like "name: number" but whose number is not a score.
NEAR_MISSES = ["University of Tokyo: 8,000", "University of Tokyo: 50.000",
               "University of Tokyo: 8/10/2024", "University of Tokyo: 8:30",
               "University of Tokyo: 85%", "University of Tokyo: 3/4 of students",
               "C 2023 survey: 9/10", "Cities: 9/10"]


@pytest.mark.parametrize("lang", LANGS)
def test_prose_with_numbers_is_not_a_score(lang: str) -> None:
    prose = "\n".join(PROSE[lang])
    assert parse_answer(prose, NAMES[lang], REFUSALS[lang]) == \
        ParseResult("unparseable", {}, "no scores")
    then_lines = prose + "\n\n" + render(lang, "{label}. {name}: {s}/10", SCORES, NAMES[lang])
    assert_ok(parse_answer(then_lines, NAMES[lang], []), SCORES, "lines")
    then_json = prose + "\n" + fence({"A": 8, "B": 6.5, "C": 9})
    assert_ok(parse_answer(then_json, NAMES[lang], []), SCORES, "json")


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_near_miss_lines_are_not_scores(line: str) -> None:
    answer = f"Tsinghua University: 8/10\nHarvard University: 6.5/10\n{line}"
    r = parse_answer(answer, NAMES["en"], [])
    # Not a score of C; a "Name: 9/10" line of no option makes the list unreadable as a whole.
    assert (r.status, r.options) == ("unparseable", {})
    assert r.detail in ("missing C", f"score for a name that is no option: {line.split(':')[0]}"
                        .casefold())


# --- Validation, refusals, failures ------------------------------------------------------------

@pytest.mark.parametrize("bad", ["0", "11", "-3", "85", "10.5", "−3"])
@pytest.mark.parametrize("form", ["json", "lines"])
def test_out_of_range_is_unparseable_and_names_the_value(bad: str, form: str) -> None:
    answer = (f'{{"A": 8, "B": {bad.replace("−", "-")}, "C": 9}}' if form == "json"
              else f"A: 8/10\nB: {bad}/10\nC: 9/10")
    shown = bad.replace("−", "-")
    assert parse_answer(answer, ZH, []) == \
        ParseResult("unparseable", {}, f"score out of range: B={shown}")


def test_bounds_are_inclusive() -> None:
    assert_ok(parse_answer("A: 1/10\nB: 10/10\nC: 1,0", ZH, []), {"A": 1, "B": 10, "C": 1},
              "lines")


@pytest.mark.parametrize("lang", LANGS)
def test_refusals(lang: str) -> None:
    answer = f"{REFUSALS[lang][0]} … 清华大学: 8/10"  # a partial answer is still a refusal
    r = parse_answer(answer, NAMES[lang], ALL_REFUSALS)
    assert (r.status, r.options) == ("refused", {})
    shouting = REFUSALS[lang][1].upper().replace("'", "’").replace(",", "，")
    assert parse_answer(shouting, NAMES[lang], REFUSALS[lang]).status == "refused"


def test_catalog_refusal_phrases_are_recognised(shipped_catalog: Catalog) -> None:
    for lang, prompts in shipped_catalog.prompts.items():
        for phrase in prompts.refusals:
            r = parse_answer(f"... {phrase} ...", NAMES.get(lang, ZH), prompts.refusals)
            assert r.status == "refused", (lang, phrase)


def test_complete_scores_beat_a_refusal_phrase() -> None:
    answer = "抱歉，我无法保证准确，但：\nA: 8/10\nB: 6.5/10\nC: 9/10"
    assert_ok(parse_answer(answer, ZH, REFUSALS["zh"]), SCORES, "lines")


def test_options_not_in_the_prompt_are_not_scored() -> None:
    answer = "MIT: 9/10\nStanford University: 8/10\nYale: 7/10\n" + \
        fence({"MIT": 9, "Stanford University": 8, "Yale": 7})
    assert parse_answer(answer, NAMES["en"], REFUSALS["en"]).detail == "no scores"
    r = parse_answer("A: 8/10\nB: 6/10\nYale: 7/10", NAMES["en"], [])
    # Yale is no option: maybe the model's name for C, so C is not read as missing but unclear.
    assert r == ParseResult("unparseable", {}, "score for a name that is no option: yale")


@pytest.mark.parametrize("text", ["", "   \n\t ", "\u3000"])
def test_empty_answer(text: str) -> None:
    assert parse_answer(text, ZH, ["x"]) == ParseResult("unparseable", {}, "empty answer")


# --- Robustness ------------------------------------------------------------------------------

@pytest.mark.parametrize("filler", [
    "清华大学成立于1911年，有5万名学生。Harvard ranks 4th {see note} \"quoted\n",
    "{" * 64, "`" * 50, "-" * 80 + "\n", '{"x": "\\', "[[[[" * 20, "1" * 100, "{}" * 10,
], ids=["prose", "open-braces", "backticks", "dashes", "open-string", "brackets", "digits",
        "empty-objects"])
def test_one_megabyte_answer_is_fast(filler: str) -> None:
    body = filler * (1_000_000 // len(filler))
    answer = body + "\n" + fence({"A": 8, "B": 6.5, "C": 9})
    start = time.perf_counter()
    r = parse_answer(answer, ZH, REFUSALS["zh"])
    assert time.perf_counter() - start < 3.0
    assert_ok(r, SCORES, "json")


def check_invariants(r: ParseResult, labels: set[str]) -> None:
    assert r.status in ("ok", "unparseable", "refused")
    assert not r.detail.startswith("internal error"), r.detail
    if r.status == "ok":
        assert set(r.options) == labels
        assert all(1 <= o.score <= 10 for o in r.options.values())
    else:
        assert r.options == {}


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    check_invariants(parse_answer(text, ZH, REFUSALS["zh"]), {"A", "B", "C"})


TOKENS = [*"{}[]\"\\:,.-−*#`()/ \n0123456789ABCabc分点점",
          "清华大学", "score", "```json", "/10", "Option ", "sur 10", "**"]
ANSWERY = st.lists(st.sampled_from(TOKENS), max_size=200).map("".join)


@settings(max_examples=300, deadline=None)
@given(ANSWERY, st.dictionaries(st.sampled_from("ABC"), st.text(max_size=8), min_size=1))
def test_never_raises_on_answer_like_text_and_odd_names(text: str, names: dict[str, str]) -> None:
    check_invariants(parse_answer(text, names, ["", "sorry"]), set(names))
    check_invariants(parse_answer(text, ZH, []), {"A", "B", "C"})


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({k: st.integers(1, 10) for k in "ABC"}), st.text(max_size=40),
       st.sampled_from(["json", "lines"]))
def test_well_formed_scores_round_trip(values: dict[str, int], noise: str, form: str) -> None:
    noise = noise.replace("`", "").replace("{", "")  # keep the noise from opening a block
    body = fence(values) if form == "json" else "\n".join(f"{k}: {v}/10" for k, v in
                                                          values.items())
    r = parse_answer(f"{noise}\n{body}", ZH, [])
    assert_ok(r, {k: float(v) for k, v in values.items()}, form)


# --- What real assistants write (issue 15) ---------------------------------------------------

BOSTON = {"A": "Boston", "B": "Chicago", "C": "Bâle"}


@pytest.mark.parametrize("lines", [
    "Boston — Score: 7\nChicago — Score: 8\nBâle — Score: 6",
    "**Boston**\n- Score: 7/10\n**Chicago**\n- Score: 8/10\n**Bâle**\n- Score: 6/10",
    "Boston\nRating: 7/10\n\nChicago\nRating: 8/10\n\nBâle\nRating: 6/10",
    "Boston: Score 7/10\nChicago: Score 8/10\nBâle: Score 6/10",
    "### A. Boston\n**Pros:**\n- jobs\n**Cons:**\n- winters\n**Score:** 7/10\n"
    "### B. Chicago\n**Score:** **8/10**\n### C. Bâle\nI'd give it 6 out of 10.",
    "| Option | Strengths | Score |\n|---|---|---|\n| A. Boston | jobs | 7 |\n"
    "| B. Chicago | food | 8 |\n| C. Bâle | art | 6 |",
    "A. Boston: 5/10\nB. Chicago: 8/10\nC. Bâle: 6/10\n\n## Final scores\n"
    "- **Boston: 7/10**\n- **Chicago: 8/10**\n- **Bâle: 6/10**",
    "Boston ★★★★☆ (7/10)\nChicago ★★★★☆ (8/10)\nBâle ★★★☆☆ (6/10)",
])
def test_the_formats_real_assistants_write(lines: str) -> None:
    assert_ok(parse_answer(lines, BOSTON, []), {"A": 7, "B": 8, "C": 6}, "lines")


def test_a_name_with_a_non_ascii_letter_is_not_a_label() -> None:
    # "Bâle" once read as label B: the label's lookahead was ASCII-only.
    r = parse_answer("Boston: 7/10\nChicago: 8/10\nBâle: 6/10", BOSTON, [])
    assert_ok(r, {"A": 7, "B": 8, "C": 6}, "lines")


@pytest.mark.parametrize("text", [
    "Boston: 7/10\nChicago: 8/10 if you work in finance, 6/10 otherwise\nBâle: 6/10",
    "Boston: 7/10\nChicago: 7-8/10\nBâle: 6/10",
])
def test_two_scores_for_one_option_are_ambiguous_not_guessed(text: str) -> None:
    assert parse_answer(text, BOSTON, []) == ParseResult(
        "unparseable", {}, "ambiguous score for B")


def test_a_breakdown_is_not_the_score_but_its_overall_line_is() -> None:
    text = ("**Boston**\n- Jobs: 9/10\n- Cost: 4/10\n- **Overall: 7/10**\n"
            "**Chicago**\n- Jobs: 8/10\n- Cost: 6/10\n- **Overall: 8/10**\n"
            "**Bâle**\n- Jobs: 5/10\n- Cost: 3/10\n")
    assert parse_answer(text, BOSTON, []) == ParseResult(
        "unparseable", {}, "ambiguous score for C")  # no overall for Bâle: not guessed
    assert_ok(parse_answer(text + "- Overall: 6/10", BOSTON, []), {"A": 7, "B": 8, "C": 6},
              "lines")


@pytest.mark.parametrize(("lang", "text"), [
    ("ja", "申し訳ありませんが、評価はできません。"),
    ("fr", "Désolé, je ne peux pas noter ces options."),
    ("de", "Es tut mir leid, aber ich kann diese Optionen nicht bewerten."),
    ("en", "I'd rather not assign numerical scores to these cities."),
    ("zh", "抱歉，我无法对这些选项进行打分。"),
    ("ko", "죄송하지만 점수를 매길 수 없습니다."),
])
def test_plain_refusals_are_refusals_without_a_configured_phrase(lang: str, text: str) -> None:
    r = parse_answer(text, NAMES[lang], [])
    assert (r.status, r.detail) == ("refused", "refusal: declines to score")


def test_an_answer_that_only_lacks_scores_is_not_a_refusal() -> None:
    r = parse_answer("Boston is great. Chicago cannot be beaten for food.", BOSTON, [])
    assert (r.status, r.detail) == ("unparseable", "no scores")


@pytest.mark.parametrize("body", [
    '{"A": {"score": 7, "strengths": ["a line\nbroken by the model"], "weaknesses": []},'
    ' "B": {"score": 8, "strengths": ["a\ttab"]}, "C": {"score": 6}}',
    '{"A": {"score": 7, "strengths": ["use ``` fences"]}, "B": {"score": 8},'
    ' "C": {"score": 6},}',
])
def test_json_a_model_damaged_is_still_read(body: str) -> None:
    assert_ok(parse_answer(f"Here you go.\n```json\n{body}\n```", BOSTON, []),
              {"A": 7, "B": 8, "C": 6}, "json")


def test_a_name_the_catalogue_gives_in_another_language_is_recognised() -> None:
    names = {"A": "한국과학기술원", "B": "서울대학교", "C": "연세대학교"}
    text = "KAIST: 9/10\n서울대: 8/10\n연세대학교: 7/10"
    assert parse_answer(text, names, []).status == "unparseable"  # KAIST: which option?
    assert_ok(parse_answer(text, names, [], {"A": ("KAIST",)}), {"A": 9, "B": 8, "C": 7},
              "lines")


# --- The next languages (issue 16): digits, scripts and phrases ----------------------------

@pytest.mark.parametrize(("names", "text"), [
    ({"A": "جامعة هارفارد", "B": "جامعة طوكيو", "C": "جامعة تسينغهوا"},
     "\u200fجامعة هارفارد: ٨ من ١٠\nجامعة طوكيو: ٧ من ١٠\nجامعة تسينغهوا: ٦ من ١٠"),
    ({"A": "हार्वर्ड विश्वविद्यालय", "B": "टोक्यो विश्वविद्यालय", "C": "सिंघुआ विश्वविद्यालय"},
     "### हार्वर्ड विश्वविद्यालय\nअंक: १० में से ८\n### टोक्यो विश्वविद्यालय\nअंक: १० में से ७\n"
     "### सिंघुआ विश्वविद्यालय\nअंक: १० में से ६"),
    ({"A": "Università di Harvard", "B": "Università di Tokyo", "C": "Università Tsinghua"},
     "**Università di Harvard**\nPunteggio: 8 su 10\n**Università di Tokyo**\nPunteggio: 7 su 10"
     "\n**Università Tsinghua**\nPunteggio: 6 su 10"),
    ({"A": "Universidad de Harvard", "B": "Universidad de Tokio", "C": "Universidad Tsinghua"},
     "Universidad de Harvard — Puntuación: 8 de 10\nUniversidad de Tokio — Puntuación: 7 de 10\n"
     "Universidad Tsinghua — Puntuación: 6 de 10"),
    ({"A": "Harvard Üniversitesi", "B": "Tokyo Üniversitesi", "C": "Tsinghua Üniversitesi"},
     "Harvard Üniversitesi: 8/10 puan\nTokyo Üniversitesi: 7/10 puan\n"
     "Tsinghua Üniversitesi: 10 üzerinden 6"),
    ({"A": "Гарвардский университет", "B": "Токийский университет", "C": "Университет Цинхуа"},
     "Гарвардский университет: 8 из 10\nТокийский университет — оценка: 7/10\n"
     "Университет Цинхуа: оценка 6 из 10"),
    ({"A": "Universitas Harvard", "B": "Universitas Tokyo", "C": "Universitas Tsinghua"},
     "Universitas Harvard: nilai 8 dari 10\nUniversitas Tokyo: skor 7/10\n"
     "Universitas Tsinghua: 6 dari 10"),
    ({"A": "Universidade Harvard", "B": "Universidade de Tóquio", "C": "Universidade Tsinghua"},
     "Universidade Harvard: nota 8 de 10\nUniversidade de Tóquio: 7/10\n"
     "Universidade Tsinghua: pontuação 6"),
])
def test_scores_in_the_next_languages_are_read(names: dict[str, str], text: str) -> None:
    assert_ok(parse_answer(text, names, []), {"A": 8, "B": 7, "C": 6}, "lines")


def test_a_dotted_capital_i_matches_its_plain_spelling() -> None:
    names = {"A": "İstanbul", "B": "Ankara", "C": "İzmir"}
    assert_ok(parse_answer("Istanbul: 8/10\nAnkara: 7/10\nIzmir: 6/10", names, []),
              {"A": 8, "B": 7, "C": 6}, "lines")


@pytest.mark.parametrize("text", [
    "Lo siento, pero no puedo puntuar estas opciones.",
    "Desculpe, mas não posso atribuir uma nota a essas opções.",
    "Mi dispiace, ma non posso assegnare un punteggio a queste opzioni.",
    "Maaf, saya tidak dapat memberikan skor untuk pilihan ini.",
    "Üzgünüm, bu seçeneklere puan veremem.",
    "Извините, но я не могу выставить оценки этим вариантам.",
    "عذرًا، لا أستطيع إعطاء درجات لهذه الخيارات.",
    "क्षमा करें, मैं इन विकल्पों को अंक नहीं दे सकता।",
])
def test_refusals_in_the_next_languages(text: str) -> None:
    r = parse_answer(text, BOSTON, [])
    assert (r.status, r.detail) == ("refused", "refusal: declines to score")


def test_arabic_indic_digits_in_prose_are_no_score() -> None:
    names = {"A": "جامعة هارفارد", "B": "جامعة طوكيو", "C": "جامعة تسينغهوا"}
    text = "جامعة هارفارد: تأسست عام ١٦٣٦\nجامعة طوكيو: ٨ من ١٠\nجامعة تسينغهوا: ٦ من ١٠"
    assert parse_answer(text, names, []).detail == "missing A"


# --- Lists of labels and verdicts (issue 33) ------------------------------------------------

TORONTO = {"A": "Toronto", "B": "Osaka", "C": "Lyon"}
HEADINGS = "### A. Toronto\nGreat transit.\n### B. Osaka\nFriendly.\n### C. Lyon\nGood food.\n\n"


@pytest.mark.parametrize("text", [
    "Final scores: A 8, B 6, C 7", "A: 8, B: 6, C: 7", "A=8; B=6; C=7",
    "**A:** 8 | **B:** 6 | **C:** 7", "Scores — A: 8/10, B: 6/10, C: 7/10",
    "Option A: 8, Option B: 6, Option C: 7", "Scores: A (Toronto) 8, B (Osaka) 6, C (Lyon) 7",
    "A – 8/10 | B – 6/10 | C – 7/10", "Final scores: A 8/10; B 6/10; C 7/10.",
    "Final scores:\nA 8\nB 6\nC 7", "Final scores:\n- A: 8\n- B: 6\n- C: 7",
    HEADINGS + "**Final scores:** A 8, B 6, C 7",
    "Notes finales : A 8, B 6 et C 7", "Endbewertung: A 8, B 6 und C 7", "Punkte: A=8; B=6; C=7",
    "Puntuaciones finales: A 8, B 6 y C 7", "Notas finais: A 8, B 6 e C 7",
    "Punteggi finali: A 8, B 6 e C 7", "Skor akhir: A 8, B 6, dan C 7",
    "Son puanlar: A 8, B 6 ve C 7", "Итоговые оценки: A — 8, B — 6, C — 7",
    "Оценки: вариант A — 8 баллов, вариант B — 6 баллов, вариант C — 7 баллов",
    "الدرجات النهائية: A 8، B 6، C 7", "अंतिम अंक: A 8, B 6, C 7", "A को 8, B को 6, C को 7 अंक",
    "最终评分：A 8分，B 6分，C 7分", "最终评分：A为8分，B为6分，C为7分",
    "最終スコア：A 8点、B 6点、C 7点",
    "Aは8点、Bは6点、Cは7点", "최종 점수: A 8점, B 6점, C 7점", "A는 8점, B는 6점, C는 7점",
    "| 选项 | 评分 |\n|---|---|\n| A | 8 |\n| B | 6 |\n| C | 7 |",
    "| Option | Punkte |\n|---|---|\n| A (Toronto) | 8/10 |\n| B (Osaka) | 6/10 |\n"
    "| C (Lyon) | 7/10 |",
])
def test_a_list_of_labels_is_read_in_every_language(text: str) -> None:
    assert_ok(parse_answer(text, TORONTO, []), {"A": 8, "B": 6, "C": 7}, "lines")


@pytest.mark.parametrize("text", [
    "QS rank: A 3, B 5, C 7", "QS rank: Toronto 3, Osaka 5, Lyon 7", "排名：A 3，B 5，C 7",
    "Founded: A 1636, B 1877, C 1911", "Plan A 2, B 3 and C 4 are the options.",
    "A 2019 survey rated Toronto 8/10.",
])
def test_labels_with_numbers_that_are_no_scores_are_not_read(text: str) -> None:
    assert parse_answer(text, TORONTO, []).status == "unparseable"


@pytest.mark.parametrize("text", [
    "I don't think it's appropriate to put a number on these cities.",
    "Je préfère ne pas attribuer de note à ces villes, car tout dépend de vos priorités.",
    "Ich möchte keine Punkte für diese Städte vergeben.",
    "Ich werde hier bewusst keine Noten vergeben, weil das zu subjektiv wäre.",
    "Prefiero no asignar puntuaciones a estas ciudades.",
    "Prefiro não dar notas a essas cidades.",
    "Preferisco non assegnare un punteggio a queste città.",
    "Saya lebih memilih untuk tidak memberikan skor pada kota-kota ini.",
    "Bu şehirlere puan vermek istemiyorum.", "Bu seçeneklere not vermeyeceğim.",
    "Я бы не стал выставлять баллы этим городам.", "Я предпочёл бы не ставить оценки.",
    "أفضل عدم إعطاء درجات لهذه المدن.", "मैं इन शहरों को अंक देना उचित नहीं समझता।",
    "我不太方便给具体的地方打分。", "这里我就不打分了。",
    "我不太方便給具體的地方打分。", "這裡我就不給分數了。",
    "具体的点数を付けるのは控えさせていただきます。", "점수는 드리지 않겠습니다.",
])
def test_declining_to_score_is_a_refusal_in_every_language(text: str) -> None:
    r = parse_answer(text, TORONTO, [])
    assert (r.status, r.detail) == ("refused", "refusal: declines to score")


def test_a_sentence_about_scores_beside_the_scores_is_no_refusal() -> None:
    text = "A single score cannot capture everything.\n\nFinal scores: A 8, B 6, C 7"
    assert_ok(parse_answer(text, TORONTO, []), {"A": 8, "B": 6, "C": 7}, "lines")
