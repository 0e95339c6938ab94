"""Read the three option scores out of a chat model's free-text answer.

The prompt asks for analysis that ends with a ```json block, but models add prose, restate
scores, skip the fence, translate keys or write "清华大学：8分" lines instead. The parser tries,
in order, the readings least likely to be wrong:

1. JSON. Every fenced block and every balanced bare ``{...}`` counts as a candidate. A candidate
   counts only if it scores *all* options (keys may be labels or names, values numbers, numeric
   strings or objects with a score key), so the echoed format example and stray braces in prose
   drop out on their own. If two complete objects disagree the answer is ambiguous, and we report
   that instead of guessing which one the model meant.
2. Lines. A line gives a score only if it *starts* with a label or name and the number follows
   right after a separator; a bare number must end the line or carry a unit. That rule is what
   keeps "清华大学成立于1911年" or "Tokyo: home to 14 million people" out of the data. If an option
   is scored on several lines the last wins, since models restate a final verdict.
3. Otherwise the answer is refused (a configured phrase occurs) or unparseable. Scores outside
   1..10 make a complete set unparseable, naming the offending value.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

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

_SCORE_KEYS = frozenset(
    {"score", "rating", "points", "note", "bewertung", "评分", "점수", "スコア", "得分", "分数"})
# Models sometimes translate the keys the prompt gave in English.
_STRENGTH_KEYS = ("strengths", "pros", "stärken", "forces", "points forts", "优势", "優勢",
                  "長所", "強み", "강점", "장점")
_WEAKNESS_KEYS = ("weaknesses", "cons", "schwächen", "faiblesses", "points faibles", "劣势",
                  "短所", "弱み", "약점", "단점")
_ID_FIELDS = ("label", "option", "name", "id", "choice", "key")

_OPTION_WORD = r"(?:option|choice|choix|选项|選択肢|オプション|옵션) ?"
# U+2212 survives NFKC, and "-3" must stay negative so that it is reported as out of range.
# At most two decimals, so "8,000" / "50.000" read as thousands (no score), not as 8 or 50.
_NUMBER = r"([-+−]?\d{1,9}(?:[.,]\d{1,2})?)(?!\d)"
_NUMBER_RE = re.compile(_NUMBER)
# List markers and an opening bold; possessive so a long run of "-" or "*" cannot backtrack.
_MARKERS = re.compile(r"(?:[-*•#>+]++ ?|\d{1,2}[.)] )*+(?:\*\*|__)?+ ?")
# Between the name and the score: closing bold, one separator, "(" and opening bold. A dash
# separates only when a space follows, so "A -3" reads as minus three.
_AFTER = re.compile(r"(?:\*\*|__)?+ ?(?:[:=|]|[-–—](?= ))?+ ?[(\[]?+ ?(?:\*\*|__)?+ ?" + _NUMBER)
_UNIT = re.compile(r"(?:/ ?10(?![\d/])|分|点|점|(?:sur|von|out of|of|auf) 10(?!\d)|points?\b|"
                   r"punkte?n?\b|pts\b)")
_CLOSERS = " *_)]】」.。!,，;"
_BRACES = re.compile(r'[{}"\\\n]')
_TRAILING_COMMA = re.compile(r",\s*+([}\]])")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'"})


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


def _fold(s: str) -> str:
    """Canonical form for matching: NFKC, casefolded, one space between words."""
    return " ".join(unicodedata.normalize("NFKC", s).casefold().translate(_APOSTROPHES).split())


def _score_at(s: str) -> float | None:
    """The number at the start of `s` if it ends the text or carries a unit ("8/10", "8分")."""
    m = _NUMBER_RE.match(s)
    if m is None:
        return None
    rest = s[m.end():].lstrip(" *_")
    if rest.strip(_CLOSERS) and not _UNIT.match(rest):
        return None
    return float(m.group(1).replace("−", "-").replace(",", "."))


class _Options:
    """The labels and names of one prompt, folded once and matched against keys and lines."""

    def __init__(self, names: dict[str, str]) -> None:
        self.labels = tuple(sorted(names))
        self.by_fold = {_fold(lab): lab for lab in self.labels}
        # Longest name first so "Tokyo Institute of Technology" beats "Tokyo".
        pairs = [(_fold(n), lab) for lab, n in names.items() if _fold(n)]
        self.names = sorted(pairs, key=lambda p: -len(p[0]))
        self.own = {lab: name for name, lab in pairs}
        # "(?!)" never matches: labels that fold to nothing can only be found by name.
        alts = "|".join(re.escape(f) for f in sorted(self.by_fold, key=len, reverse=True) if f)
        # A letter must not continue the label, or the English article "a ..." would match.
        self.label_re = re.compile(rf"(?:{_OPTION_WORD})?({alts or '(?!)'})(?![a-z0-9])[.)]?")

    def key_label(self, key: str) -> str | None:
        k = _fold(key).strip(" \"'*_:")
        for name, lab in self.names:
            if k == name:
                return lab
        m = self.label_re.match(k)
        if m:
            return self.by_fold[m.group(1)]
        return next((lab for name, lab in self.names if name in k), None)

    def line_score(self, line: str) -> tuple[str, float] | None:
        s = _fold(line)
        if lead := _MARKERS.match(s):
            s = s[lead.end():]
        label, pos = None, 0
        m = self.label_re.match(s)
        if m:
            label, pos = self.by_fold[m.group(1)], m.end()
            # "B. 东京大学 — 9/10": the label may be followed by its own name.
            own = self.own.get(label, "")
            rest = s[pos:].lstrip(" *_")
            if own and rest.startswith(own):
                pos = len(s) - len(rest) + len(own)
        else:
            hit = next(((n, lab) for n, lab in self.names if s.startswith(n)), None)
            if hit is None:
                return None
            label, pos = hit[1], len(hit[0])
        after = _AFTER.match(s, pos)
        if after is None:
            return None
        score = _score_at(s[after.start(1):])
        return None if score is None else (label, score)


def _value_score(v: Any) -> float | None:
    if isinstance(v, bool):  # bool is an int subclass; true is not a score of 1
        return None
    if isinstance(v, int | float):
        return float(v)
    return _score_at(_fold(v)) if isinstance(v, str) else None


def _option(label: str, v: Any) -> ParsedOption | None:
    if not isinstance(v, dict):
        score = _value_score(v)
        return None if score is None else ParsedOption(label, score, None, None)
    folded = {_fold(str(k)): val for k, val in v.items()}
    score = next((s for k, val in folded.items() if k in _SCORE_KEYS
                  and (s := _value_score(val)) is not None), None)
    if score is None:
        return None

    def count(keys: tuple[str, ...]) -> int | None:
        # Blank items ("", "...") are placeholders copied from the prompt, not points.
        lists = [folded[k] for k in keys if isinstance(folded.get(k), list)]
        return (sum(1 for x in lists[0] if str(x).strip(" .…")) if lists else None)

    return ParsedOption(label, score, count(_STRENGTH_KEYS), count(_WEAKNESS_KEYS))


def _json_options(obj: Any, opts: _Options, depth: int = 0) -> dict[str, ParsedOption] | None:
    """A complete label -> option mapping from a decoded JSON value, or None."""
    found: dict[str, ParsedOption] = {}
    items: list[Any] = list(obj.values()) if isinstance(obj, dict) else \
        obj if isinstance(obj, list) else []
    if isinstance(obj, dict):
        keyed = [(opts.key_label(str(k)), v) for k, v in obj.items()]
    else:  # [{"label": "A", "score": 8}, ...]: the first id field that names an option
        keyed = [(next((lb for f in _ID_FIELDS if isinstance(it.get(f), str)
                        and (lb := opts.key_label(it[f]))), None), it)
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


def _decode(s: str) -> Any:
    for attempt in (s, _TRAILING_COMMA.sub(r"\1", s)):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            continue
    return None


def _from_json(text: str, opts: _Options) -> list[dict[str, ParsedOption]]:
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


def _parse(text: str, names: dict[str, str], refusals: Sequence[str]) -> ParseResult:
    text = unicodedata.normalize("NFKC", text)
    if not text.strip():
        return ParseResult(CallStatus.UNPARSEABLE, {}, "empty answer")
    if not names:
        return ParseResult(CallStatus.UNPARSEABLE, {}, "no options")
    opts = _Options(names)
    complete = _from_json(text, opts)
    if complete:
        scores = {tuple(sorted((k, o.score) for k, o in c.items())) for c in complete}
        if len(scores) > 1:
            return ParseResult(CallStatus.UNPARSEABLE, {}, "contradictory json blocks")
        return _judge(complete[0], "json")  # newest first: the final block
    found: dict[str, float] = {}
    for line in text.splitlines():
        if hit := opts.line_score(line):
            found[hit[0]] = hit[1]  # later lines overwrite: the restated score wins
    if len(found) == len(opts.labels):
        return _judge({k: ParsedOption(k, v, None, None) for k, v in found.items()}, "lines")
    folded = _fold(text)
    phrase = next((p for p in refusals if _fold(p) and _fold(p) in folded), None)
    if phrase is not None:
        return ParseResult(CallStatus.REFUSED, {}, f"refusal: {phrase}")
    missing = [lab for lab in opts.labels if lab not in found]
    why = f"missing {', '.join(missing)}" if found else "no scores"
    return ParseResult(CallStatus.UNPARSEABLE, {}, why)


def parse_answer(text: str, names: dict[str, str], refusals: Sequence[str]) -> ParseResult:
    """Parse one answer; see the module docstring for the order of readings."""
    try:
        return _parse(text, names, refusals)
    except Exception as exc:  # a monitoring run must survive any one answer
        return ParseResult(CallStatus.UNPARSEABLE, {}, f"internal error: {type(exc).__name__}")
