"""Score statements in one line of an answer, in every catalogue language.

The vocabulary of reading prose (monitor.measure.prose reads the structure): numbers,
units ("/10", "out of 10", "sur 10", "von 10", "分", "点", "점"), score words ("Score",
"Insgesamt", "评分", "スコア", "점수"), the ten-first forms of CJK ("10点中8点", "10점 만점에
8점", "满分10分，我给深圳打8分") and ranges ("7-8/10"); declining to score is
monitor.measure.declining.
A number is a score only with a unit, a score word or a separator right before it and
nothing but closing punctuation after it. Every regex is linear (possessive or bounded).
Adding a language adds its words here (docs/contract.md, "Reading answers").
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["AFTER_NAME", "CLOSERS", "COLUMN", "HEADING", "KEYWORD", "LABELLED", "LEAD", "NUM",
           "NUMBER_RE", "OPTION_WORD", "OUT_OF", "OUT_OF_TEN", "RANGE", "RANK_TITLE", "UNIT",
           "fold", "number", "numbers_in", "score_at", "statements"]

NUM = r"[-+−]?\d{1,9}(?:[.,]\d{1,2})?"
# U+2212 survives NFKC, and "-3" must stay negative so that it is reported as out of range.
# At most two decimals, so "8,000" / "50.000" read as thousands (no score), not as 8 or 50.
NUMBER_RE = re.compile(rf"({NUM})(?!\d)")
OUT_OF = (r"(?:/ ?10(?![\d/])|(?:sur|von|out of|of|auf|su|de|sobre|em|из|en|dari|من|में से) "
          r"10(?!\d))")
UNIT = re.compile(rf"(?:{OUT_OF}|分(?!钟|鐘|間)|点(?!数)|점|points?\b|punkte?n?\b|pts\b|"
                   r"puan\b|балл|punti\b|puntos\b|pontos\b|نقاط|درجات|अंक)")
CLOSERS = " *_)]】」』.。!！,，;；:：、،؛।"
# Apostrophes made one; Arabic-Indic, Persian and Devanagari digits (which NFKC keeps) made
# ASCII, with the Arabic decimal and thousands marks; bidi marks of RTL text dropped.
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "٫": ".", "٬": ",", "\u200e": None,
                              "\u200f": None, "\u061c": None,
                              "\u093c": None,  # the Hindi press often leaves the nukta out
                              **{chr(0x0660 + d): str(d) for d in range(10)},
                              **{chr(0x06F0 + d): str(d) for d in range(10)},
                              **{chr(0x0966 + d): str(d) for d in range(10)}})
# Leading list markers, bold, heading marks, quotes, arrows, emoji and stars; possessive.
LEAD = re.compile(r"(?:[#>*+•·\-–—→⇒▶►✅✔☑️🔹🔸■□◆◇○●★☆\s]|\d{1,2}[.)] |"
                  r"[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]|"
                  r"第 ?\d{1,2} ?位[:：]?|\d{1,2} ?위\.?|#\d{1,2}[:.]?|\d{1,2}(?:st|nd|rd|th)"
                  r"(?: place)?[:.]? )*+")
HEADING = re.compile(r"^\s*#{1,6} ")
_SCORE_WORDS = (
    "overall score", "final score", "total score", "score", "scores", "rating", "rated",
    "overall", "verdict", "note finale", "note globale", "note", "notes", "évaluation",
    "evaluation", "note provisoire", "initial score",
    "punktzahl", "punkte", "bewertung", "gesamtbewertung", "gesamtnote", "note", "endnote",
    "insgesamt", "gesamt", "gesamteinschätzung", "einschätzung", "wertung", "endwertung",
    "评分", "得分", "总分", "综合评分", "最终评分", "初步评分", "评价", "打分", "分数",
    # zh-Hant (Taiwan, Hong Kong): the same words in Traditional characters
    "評分", "總分", "綜合評分", "最終評分", "初步評分", "評價", "分數",
    "スコア", "評価", "点数", "総合評価", "総合点", "最終スコア", "最終評価", "採点",
    "점수", "평점", "총점", "종합 점수", "종합 평가", "최종 점수", "평가",
    # es, pt, it, id, tr, ru, ar, hi (issue 16: the next languages)
    "puntuación", "puntuación final", "calificación", "valoración", "puntaje", "nota final",
    "nota", "pontuação", "avaliação", "punteggio", "voto", "valutazione", "skor", "nilai",
    "penilaian", "puan", "değerlendirme", "оценка", "итоговая оценка", "балл", "баллы",
    "рейтинг", "الدرجة", "درجة", "التقييم", "تقييم", "النتيجة", "अंक", "स्कोर", "रेटिंग",
    "मूल्यांकन",
    # "overall" in the newer languages: the line a breakdown ends with (issue 33)
    "global", "puntuación global", "general", "total", "totale", "complessivo", "geral",
    "nota geral", "genel", "toplam", "итог", "итого", "общая оценка", "الإجمالي", "إجمالي",
    "المجموع", "कुल", "कुल अंक", "keseluruhan", "secara keseluruhan",
)
KEYWORD = re.compile(
    r"(?:my |meine? |ma |mon |最终|最終|初步|综合|綜合|総合|종합 |최종 )?(?:"
    + "|".join(re.escape(w) for w in sorted(set(_SCORE_WORDS), key=len, reverse=True))
    + r")(?![a-zà-ÿа-яё\u0600-\u06ff])")  # CJK needs no word boundary: "評価は8点"
# Keyword, then up to 25 characters of no digit (", for Harvard:", "**", "★★★★☆ ("), then a number.
_KEYWORD_STATEMENT = re.compile(KEYWORD.pattern + r"[^\d\n]{0,25}?(" + NUM + r")(?!\d)")
# A number out of ten in prose: "8/10", "8 out of 10", "8 sur 10".
OUT_OF_TEN = re.compile(rf"(?<![\d.,/])({NUM}) ?(?:分|点|점|points?|punkte?)? ?{OUT_OF}")
# Ten first: "10点中8点", "10点満点中8点", "10점 만점에 8점", "满分10分，我给深圳打8分"
# (滿分 in Traditional), "10 में से 8", "10 üzerinden 8".
_TEN_FIRST = re.compile(
    rf"(?:10 ?点 ?(?:満点)?中 ?|10 ?점 ?만점에 ?|[满滿]分 ?10 ?分[,，]? ?[^\d\n]{{0,12}}?)"
    rf"({NUM}) ?(?:点|점|分)|(?:10 में से|10 üzerinden) ({NUM})(?![\d.,/])")
# A rating verb before a number with a point unit: "给它打8分" (給), "8点をつけ", "8점을 주".
_CJK_RATED = re.compile(rf"(?:打|给|給|評価|つけ|付け)[^\d\n]{{0,8}}?({NUM}) ?(?:分|点)|"
                        rf"({NUM}) ?(?:点を(?:つけ|付け)|점을 (?:주|드리|매기))")
RANGE = re.compile(rf"(?<![\d.,]){NUM} ?(?:分|点|점)? ?(?:[-–~〜～]|to|bis|à|或|또는|or|ou|oder) ?"
                    rf"{NUM} ?(?:{OUT_OF}|分|点|점)")
# "Job market: 9/10": a short subject (a few words, no sentence), a colon, a number out of 10.
LABELLED = re.compile(r"([^:\d\n,.!?…。，！？]{2,30}?) ?: ?(?:\*\*|__)?+ ?(" + NUM + r") ?"
                       + OUT_OF)
OPTION_WORD = (r"(?:option|choice|choix|opción|opção|opzione|opsi|pilihan|seçenek|вариант|"
               r"الخيار|خيار|विकल्प|选项|選項|選択肢|オプション|옵션|선택지) ?")
# A list under a title of ranks ("QS rank: A 3, B 5, C 7") holds places, not scores.
RANK_TITLE = re.compile(r"\brank|classement|\bplatz|rangliste|rang\b|排名|順位|순위|место|"
                        r"sıra|peringkat|posizion|clasificación|classificação|रैंक|ترتيب")
# Score words that may head a table column.
COLUMN = re.compile(KEYWORD.pattern.replace(r"(?![a-zà-ÿа-яё\u0600-\u06ff])", ""))


def fold(s: str) -> str:
    """Canonical form for matching: NFKC, casefolded, one space between words. Turkish
    "İ" casefolds to "i" + a combining dot: dropped, so "İstanbul" matches "Istanbul"."""
    folded = unicodedata.normalize("NFKC", s).casefold().replace("i\u0307", "i")
    return " ".join(folded.translate(_APOSTROPHES).split())


def score_at(s: str) -> float | None:
    """The number at the start of `s` if it ends the text or carries a unit ("8/10", "8分")."""
    m = NUMBER_RE.match(s)
    if m is None:
        return None
    rest = s[m.end():].lstrip(" *_")
    if rest.strip(CLOSERS) and not UNIT.match(rest):
        return None
    return number(m.group(1))


def number(text: str) -> float:
    return float(text.replace("−", "-").replace(",", "."))


def _ends(s: str, end: int) -> bool:
    """Nothing but closing punctuation, a unit or a new clause follows position `end`."""
    rest = s[end:].lstrip(" *_")
    return not rest or rest[0] in CLOSERS or bool(UNIT.match(rest)) or rest[0] in "(（-–—"


def statements(s: str) -> list[float | None]:
    """The score statements of folded text `s`: a value each, None for an ambiguous one."""
    values: list[float] = []
    if RANGE.search(s):
        return [None]
    tens = [m.span() for m in _TEN_FIRST.finditer(s)]  # the "10" of "10点中8点" is no score
    for m in _KEYWORD_STATEMENT.finditer(s):
        if _ends(s, m.end()) and not any(a <= m.start(1) < b for a, b in tens):
            values.append(number(m.group(1)))
    values += [number(m.group(1)) for m in OUT_OF_TEN.finditer(s)]
    values += [number(m.group(1) or m.group(2)) for m in _TEN_FIRST.finditer(s)]
    for m in _CJK_RATED.finditer(s):
        if not any(a <= m.start() < b or a <= m.start(1) < b for a, b in tens):
            values.append(number(m.group(1) or m.group(2)))
    if not values:
        bare = score_at(s.lstrip("(（[【 "))
        if bare is not None:
            values.append(bare)
    distinct = set(values)
    return [values[-1]] if len(distinct) == 1 else [None] if distinct else []


# The "10" of a scale: "/10", "out of 10", "10点中", "10점 만점에", "满分10分", "10 में से".
_SCALE = re.compile(rf"{OUT_OF}|10 ?点 ?(?:満点)?中|10 ?점 ?만점에|[满滿]分 ?10 ?分|10 में से|"
                    r"10 üzerinden")


def numbers_in(s: str) -> set[float]:
    """The distinct numbers 1..10 of folded text `s`, whether stated as scores or not, the
    10 of a scale ("8/10", "10点中8点") left out: a sentence that holds two of them about one
    option says two things about it."""
    values = {number(m.group(1)) for m in NUMBER_RE.finditer(_SCALE.sub(" ", s))}
    return {v for v in values if 1 <= v <= 10}


AFTER_NAME = re.compile(r"(?:\*\*|__)?+ ?(?:[:=|：]|[-–—―](?= ))?+ ?(?:\*\*|__)?+ ?[(\[]?+ ?")
