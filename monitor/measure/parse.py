"""Read the three option scores out of a chat model's free-text answer.

The prompt asks for analysis that ends with a ```json block, but models add prose, restate
scores, skip the fence, translate keys or write "清华大学：8分" lines instead. The parser tries,
in order, the readings least likely to be wrong:

1. JSON. Every fenced block and every balanced bare ``{...}`` counts as a candidate. A candidate
   counts only if it scores *all* options (keys may be labels, names, short names or the
   option's name in another catalogue language; values numbers, numeric strings or objects
   with a score key, in any catalogue language), so the echoed format example and stray braces
   in prose drop out on their own. Trailing commas and raw newlines or tabs inside strings
   (which strict JSON forbids and models write) are forgiven. If two complete objects disagree
   the answer is ambiguous, and we report that instead of guessing which one the model meant.
2. Prose, section by section (monitor.measure.prose and .statements): an option's heading
   or first mention opens its section, its score is the score statement in it ("Score: 7",
   "Rating 7/10", "7 out of 10", "10点中8点", a table's score column, a list "Final scores: A 8,
   B 6, C 7" or "A=8; B=6"); the last one about an option wins, since models restate a
   final verdict. A number from prose such as "清华大学成立于1911年"
   or "Tokyo: home to 14 million people" is never a score; two scores in one statement, or a
   score for a name that is no option after the others were read, make the answer
   unparseable with the reason rather than a guess.
3. Otherwise the answer is refused (a configured phrase occurs, or with no score at all a
   sentence declines to score, in the words of any catalogue language: .declining) or
   unparseable. Scores outside 1..10 make a complete set
   unparseable, naming the offending value.

Everything is NFKC-normalised first (full-width digits, colons and brackets become ASCII), and
matching is casefolded with whitespace collapsed. Every scan is linear or capped, regexes use
possessive quantifiers, and `parse_answer` has a last-resort guard because one bad answer must
never stop a monitoring run; the tests assert that guard never fires.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.measure.declining import declines
from monitor.measure.prose import Options, read_prose
from monitor.measure.statements import fold, score_at
from monitor.vocab import CallStatus

__all__ = ["ParseResult", "ParsedOption", "parse_answer"]

# A score object with strengths in CJK is a few KB; anything far larger is prose around a stray
# brace. The budget bounds total json.loads work on brace soup; newest candidates are tried first
# because the prompt asks for the JSON at the end.
_MAX_OBJECT = 50_000
_JSON_BUDGET = 2_000_000
_MAX_DECODES = 1_000
_MAX_NESTING = 64
_MAX_DEPTH = 3  # wrapper objects we look through, e.g. {"scores": {"A": 8, ...}}

# Keys as models write them, in every catalogue language (matched folded, "_" and "-" as
# spaces): models translate the keys the prompt gave in English.
_SCORE_KEYS = frozenset(
    {"score", "rating", "points", "note", "bewertung", "punktzahl", "punkte", "wertung",
     "评分", "评价", "得分", "分数", "总分", "評分", "評價", "分數", "總分", "スコア", "点数",
     "評価", "점수", "평점", "총점",
     "puntuación", "puntuacion", "puntaje", "calificación", "nota", "pontuação", "pontuacao",
     "avaliação", "punteggio", "voto", "valutazione", "skor", "nilai", "puan", "оценка", "балл",
     "баллы", "рейтинг", "الدرجة", "درجة", "التقييم", "تقييم", "النتيجة", "अंक", "स्कोर",
     "रेटिंग"})
_STRENGTH_KEYS = ("strengths", "pros", "stärken", "forces", "points forts", "优势", "優勢",
                  "長所", "強み", "강점", "장점", "fortalezas", "puntos fuertes", "ventajas",
                  "pontos fortes", "forças", "vantagens", "punti di forza", "punti forti",
                  "vantaggi", "kelebihan", "kekuatan", "keunggulan", "güçlü yönler", "güçlü",
                  "guclu", "artılar",
                  "сильные стороны", "плюсы", "نقاط القوة", "المزايا", "ताकत", "ताक़त",
                  "खूबियाँ", "मजबूत पक्ष", "शक्तियाँ")
_WEAKNESS_KEYS = ("weaknesses", "cons", "schwächen", "faiblesses", "points faibles", "劣势",
                  "劣勢",
                  "短所", "弱み", "약점", "단점", "debilidades", "puntos débiles", "desventajas",
                  "pontos fracos", "fraquezas", "desvantagens", "punti deboli", "svantaggi",
                  "kekurangan", "kelemahan", "zayıf yönler", "zayıf", "zayif", "eksiler",
                  "слабые стороны",
                  "минусы", "نقاط الضعف", "العيوب", "कमजोरियाँ", "कमज़ोरियाँ", "कमियाँ",
                  "कमजोर पक्ष")
_ID_FIELDS = ("label", "option", "name", "id", "choice", "key", "選択肢", "选项", "選項",
              "옵션", "名前", "名称", "名稱", "이름", "都市", "城市", "도시", "大学", "대학",
              "city", "university",
              "opción", "opcion", "opção", "opcao", "opzione", "opsi", "pilihan", "seçenek",
              "secenek",
              "вариант", "الخيار", "خيار", "विकल्प", "etiqueta", "etichetta", "nombre", "nome",
              "nama", "isim", "название", "имя", "الاسم", "नाम", "ciudad", "cidade", "città",
              "kota", "şehir", "город", "المدينة", "शहर", "universidad", "universidade",
              "università", "universitas", "üniversite", "университет", "الجامعة",
              "विश्वविद्यालय")


def _key(k: object) -> str:
    """A JSON key as matched: folded, "_" and "-" as spaces ("punti_di_forza")."""
    return " ".join(fold(str(k)).replace("_", " ").replace("-", " ").split())


_BRACES = re.compile(r'[{}"\\\n]')
_TRAILING_COMMA = re.compile(r",\s*+([}\]])")


@dataclass(frozen=True)
class ParsedOption:
    label: str  # "A", "B" or "C"
    score: float  # 1..10 once validated
    strengths: int | None  # number of strengths listed in the JSON, None if not given
    weaknesses: int | None


@dataclass(frozen=True)
class ParseResult:
    status: CallStatus  # ok, unparseable or refused (never failed: that is the call's)
    options: dict[str, ParsedOption]  # label -> parsed; all labels when ok, else {}
    detail: str  # short reason: "json", "lines", "no scores", "missing C", ...


def _value_score(v: Any) -> float | None:
    if isinstance(v, bool):  # bool is an int subclass; true is not a score of 1
        return None
    if isinstance(v, int | float):
        return float(v)
    return score_at(fold(v)) if isinstance(v, str) else None


def _option(label: str, v: Any) -> ParsedOption | None:
    if not isinstance(v, dict):
        score = _value_score(v)
        return None if score is None else ParsedOption(label, score, None, None)
    folded = {_key(k): val for k, val in v.items()}
    score = next((s for k, val in folded.items() if k in _SCORE_KEYS
                  and (s := _value_score(val)) is not None), None)
    if score is None:
        return None

    def count(keys: tuple[str, ...]) -> int | None:
        # Blank items ("", "...") are placeholders copied from the prompt, not points.
        lists = [folded[k] for k in keys if isinstance(folded.get(k), list)]
        return (sum(1 for x in lists[0] if str(x).strip(" .…")) if lists else None)

    return ParsedOption(label, score, count(_STRENGTH_KEYS), count(_WEAKNESS_KEYS))


def _json_options(obj: Any, opts: Options, depth: int = 0) -> dict[str, ParsedOption] | None:
    """A complete label -> option mapping from a decoded JSON value, or None."""
    found: dict[str, ParsedOption] = {}
    items: list[Any] = list(obj.values()) if isinstance(obj, dict) else \
        obj if isinstance(obj, list) else []
    if isinstance(obj, dict):
        keyed = [(opts.key_label(str(k)), v) for k, v in obj.items()]
    else:  # [{"label": "A", "score": 8}, ...]: the first id field that names an option
        keyed = [(next((lb for k, v in it.items() if _key(k) in _ID_FIELDS
                        and isinstance(v, str) and (lb := opts.key_label(v))), None), it)
                 for it in items if isinstance(it, dict)]
    for lab, v in keyed:
        if lab and lab not in found and (o := _option(lab, v)):
            found[lab] = o
    if set(found) == set(opts.labels):
        return found
    if depth < _MAX_DEPTH:
        for v in items:
            if isinstance(v, dict | list) and (sub := _json_options(v, opts, depth + 1)):
                return sub
    return None


def _candidates(text: str) -> Iterator[str]:
    """Fenced block bodies, then every balanced {...} (newest first), as strings to decode."""
    parts = text.split("```")
    for body in reversed(parts[1::2]):
        head, _, rest = body.partition("\n")
        yield rest if re.fullmatch(r"[\w+-]*", head.strip()) else body
    spans: list[tuple[int, int]] = []
    stack: deque[int] = deque(maxlen=_MAX_NESTING)  # drops the oldest of unclosed braces
    in_str, skip = False, -1
    for m in _BRACES.finditer(text):
        i, ch = m.start(), m.group()
        if i == skip:
            continue
        if in_str:
            if ch == "\\":
                skip = i + 1
            elif ch in '"\n':  # a raw newline ends it: JSON strings never hold one
                in_str = False
        elif ch == '"':
            in_str = bool(stack)  # quotes only matter inside a candidate object
        elif ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            start = stack.pop()
            if i - start < _MAX_OBJECT:
                spans.append((start, i + 1))
    for start, end in reversed(spans):
        yield text[start:end]


def _controls_escaped(s: str) -> str:
    """Raw newlines and tabs inside strings escaped: models write them, strict JSON forbids
    them, and the object is plainly meant (issue 15 saw 11 of 72 such answers)."""
    out, in_str, escaped = [], False, False
    for ch in s:
        if in_str and not escaped and ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "", "\t": "\\t"}[ch])
            continue
        out.append(ch)
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = in_str
        elif ch == '"':
            in_str = not in_str
    return "".join(out)


def _decode(s: str) -> Any:
    trimmed = _TRAILING_COMMA.sub(r"\1", s)
    error: Exception | None = None
    for attempt in (s, trimmed):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError) as exc:
            error = exc
    # Escaping (a character-by-character scan) mends only a raw control character in a
    # string, which json reports as such: other failures skip it.
    if isinstance(error, json.JSONDecodeError) and "control character" in error.msg:
        try:
            return json.loads(_controls_escaped(trimmed))
        except (ValueError, RecursionError):
            pass
    return None


def _from_json(text: str, opts: Options) -> list[dict[str, ParsedOption]]:
    complete, budget, decodes = [], _JSON_BUDGET, _MAX_DECODES
    for cand in _candidates(text):
        s = cand.strip()
        # {"a":1,"b":2,"c":3} is the shortest useful candidate; prose bodies fail fast here.
        if not 15 <= len(s) <= _MAX_OBJECT or s[0] not in "{[" or ":" not in s:
            continue
        budget, decodes = budget - len(s), decodes - 1
        if budget < 0 or decodes < 0:
            break
        found = _json_options(_decode(s), opts)
        if found:
            complete.append(found)
    return complete


def _judge(options: dict[str, ParsedOption], how: str) -> ParseResult:
    bad = [f"{lab}={o.score:g}" for lab, o in sorted(options.items())
           if not 1 <= o.score <= 10]  # NaN fails this too
    if bad:
        return ParseResult(CallStatus.UNPARSEABLE, {}, "score out of range: " + ", ".join(bad))
    return ParseResult(CallStatus.OK, dict(sorted(options.items())), how)


def _parse(text: str, names: dict[str, str], refusals: Sequence[str],
           aliases: Mapping[str, Sequence[str]] | None) -> ParseResult:
    text = unicodedata.normalize("NFKC", text)
    if not text.strip():
        return ParseResult(CallStatus.UNPARSEABLE, {}, "empty answer")
    if not names:
        return ParseResult(CallStatus.UNPARSEABLE, {}, "no options")
    opts = Options(names, aliases)
    complete = _from_json(text, opts)
    if complete:
        scores = {tuple(sorted((k, o.score) for k, o in c.items())) for c in complete}
        if len(scores) > 1:
            return ParseResult(CallStatus.UNPARSEABLE, {}, "contradictory json blocks")
        return _judge(complete[0], "json")  # newest first: the final block
    reading = read_prose(text, opts)
    found = reading.scores
    if reading.unknown and found:
        # A score for a name we cannot place may be the restated score of an option: the
        # last word on that option is unclear, so nothing is read rather than a stale score.
        return ParseResult(CallStatus.UNPARSEABLE, {},
                           f"score for a name that is no option: {reading.unknown[0][:40]}")
    if len(found) == len(opts.labels):
        return _judge({k: ParsedOption(k, v, None, None) for k, v in found.items()}, "lines")
    if reading.ambiguous:
        return ParseResult(CallStatus.UNPARSEABLE, {},
                           f"ambiguous score for {', '.join(reading.ambiguous)}")
    folded = fold(text)
    phrase = next((p for p in refusals if fold(p) and fold(p) in folded), None)
    if phrase is not None:
        return ParseResult(CallStatus.REFUSED, {}, f"refusal: {phrase}")
    if not found and declines(text):
        return ParseResult(CallStatus.REFUSED, {}, "refusal: declines to score")
    missing = [lab for lab in opts.labels if lab not in found]
    why = f"missing {', '.join(missing)}" if found else "no scores"
    return ParseResult(CallStatus.UNPARSEABLE, {}, why)


def parse_answer(text: str, names: dict[str, str], refusals: Sequence[str],
                 aliases: Mapping[str, Sequence[str]] | None = None) -> ParseResult:
    """Parse one answer; see the module docstring for the order of readings. `aliases` are
    other names of each label's option (its names in the catalogue's other languages)."""
    try:
        return _parse(text, names, refusals, aliases)
    except Exception as exc:  # a monitoring run must survive any one answer
        return ParseResult(CallStatus.UNPARSEABLE, {}, f"internal error: {type(exc).__name__}")
