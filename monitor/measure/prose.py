"""Scores read out of prose the way a careful person reads them, section by section.

Real assistants write a heading per option and put its score on a later line
("**Score:** 8/10", "Rating: ★★★★☆ (8/10)", "→ 10점 만점에 8점"), a line per
option ("Boston — Score: 7", "清华大学：8分"), a markdown table with a score
column (or the options as columns and an "Overall" row), a list of names ("Final
scores: Singapore 8, Tokyo 6, London 7") or of labels ("Final scores: A 8, B 6, C 7",
"A: 8, B: 6", "A=8; B=6", "A는 8점, B는 6점", "最终评分：A 8分，B 6分"), or a final verdict
that restates (and sometimes changes) the scores. A list is two or more items that
make up the whole line after its title, each number in 1..10 unless a score word or
unit says it is a score; under a title of ranks ("QS rank: A 3, B 5") it is no list.
The reading (the line's score statements: monitor.measure.statements):

- A line that starts with an option (its label followed by a delimiter, its
  name, a short form such as "Harvard", "清华", "TUM", or its name in another
  catalogue language such as "KAIST") opens that option's section; a markdown
  heading that names no option, at the section's level or above, closes it.
- In a section, a score statement gives the option's score. "Job market: 9/10"
  lines are a breakdown: one alone is the score, several are not, unless an
  "Overall" line says which.
- The last statement about an option wins (a final verdict restates). Two
  different scores in one statement ("8/10 if ..., 6/10 otherwise", "7-8/10")
  make that option ambiguous, which is reported, not guessed; so is a "Name:
  7/10" line for a name that is no option among option lines, since it may be
  the model's name for one of them (a stale score would otherwise stand).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from monitor.measure.statements import (
    AFTER_NAME,
    COLUMN,
    HEADING,
    KEYWORD,
    LABELLED,
    LEAD,
    NUM,
    NUMBER_RE,
    OPTION_WORD,
    OUT_OF,
    OUT_OF_TEN,
    RANK_TITLE,
    UNIT,
    fold,
    number,
    score_at,
    statements,
)

__all__ = ["Options", "ProseReading", "read_prose"]

_GENERIC = re.compile(
    r"\b(?:the|university|universit[yé]|université|universität|universidad|college|"
    r"institute|institut|school|of|de|du|des|la|le|der|die|das|city)\b|\b[dl]'|大学|大學|"
    r"대학교|학교|공과|시|市")


# What may stand between a label and its number besides a colon: particles (ko, ja, zh, hi).
_PARTICLE = r"(?:은|는|이|가|は|が|为|為|得|是| को)"
# Between the items of a list of labels: punctuation or "and" in a catalogue language.
_LIST_SEP = re.compile(r" ?(?:[,;、|/·،] ?)?(?:(?:and|et|und|y|e|и|ve|dan|و|और|和|및)(?!\w) ?)?")
# Where a list's title ends: "Final scores:", "Scores —".
_TITLE_END = re.compile(r"[:：]|\s[—–-]\s")
_TITLE = 60  # the most characters a list's title ("Final scores (out of 10)") may have


@lru_cache(maxsize=65536)
def _short_forms(name: str) -> tuple[str, ...]:
    """Short names a model uses for an option: "Harvard", "Tokyo", "清华", "서울대"."""
    out = []
    # "córdoba, argentina" / "コルドバ (アルゼンチン)": a qualifier the answer may leave out.
    base = re.split(r" ?[(（]|, ", name)[0].strip()
    if base and base != name and len(base) >= 2:
        out.append(base)
    bare = " ".join(_GENERIC.sub(" ", name).split())
    if bare and bare != name and len(bare) >= 2:
        out.append(bare)
        first = bare.split()[0]
        if first != bare and len(first) >= 3:  # "imperial college london" -> "imperial"
            out.append(first)
    for suffix, short in (("大学", ""), ("大學", ""), ("대학교", "대")):
        if name.endswith(suffix) and len(name) > len(suffix) + 1:
            out.append(name[: -len(suffix)] + short)
    if len(name) == 4 and name.endswith(("大学", "大學")):  # 東京大学 -> 東大, 北京大学 -> 北大
        out.append(name[0] + "大")
    plain = "".join(c for c in unicodedata.normalize("NFD", name) if not unicodedata.combining(c))
    words = [w for w in re.split(r"[\s-]+", plain) if w]
    if len(words) >= 3:  # "massachusetts institute of technology" -> "mit", "école ..." -> "epfl"
        out.append("".join(w[0] for w in words if w not in ("of", "de", "the", "und", "and")))
    return tuple(s for s in out if len(s) >= 2)


class Options:
    """The labels and names of one prompt, folded once and matched against keys and lines."""

    def __init__(self, names: dict[str, str],
                 aliases: Mapping[str, Sequence[str]] | None = None) -> None:
        self.labels = tuple(sorted(names))
        self.by_fold = {fold(lab): lab for lab in self.labels}
        pairs = [(f, lab) for lab, n in names.items() if (f := fold(n))]
        # The option's names in the catalogue's other languages ("KAIST" in a Korean answer
        # about 한국과학기술원) and short forms of all of them.
        known = [*names.items(), *((lab, a) for lab, al in (aliases or {}).items() for a in al)]
        short: dict[str, set[str]] = {}
        for lab, original in known:
            folded = fold(original)
            if folded and (folded, lab) not in pairs:
                short.setdefault(folded, set()).add(lab)
            for s in _short_forms(folded):
                short.setdefault(s, set()).add(lab)
            first = original.split()[0] if original.split() else ""
            if len(original.split()) > 1 and len(first) >= 2 and first.isupper():
                short.setdefault(fold(first), set()).add(lab)  # "ETH Zürich" -> "eth"
        full = {n for n, _ in pairs}
        # A short form counts only if it points at one option and is not another's name.
        extra = [(s, next(iter(labs))) for s, labs in short.items()
                 if len(labs) == 1 and s not in full
                 and not any(n.startswith(s) and lab not in labs for n, lab in pairs)]
        # Longest first so "tokyo institute of technology" beats "tokyo".
        self.names = sorted(pairs, key=lambda p: -len(p[0]))
        self.all_names = sorted([*pairs, *extra], key=lambda p: -len(p[0]))
        self.name_label = dict(self.all_names)
        self._label_alts = "|".join(
            re.escape(f) for f in sorted(self.by_fold, key=len, reverse=True) if f)

    # The patterns are compiled when first used: a JSON answer (most of them) needs only
    # the labels', and the names' alternation (every name in every catalogue language
    # and its short forms) costs milliseconds to compile for each prompt.
    @cached_property
    def list_re(self) -> re.Pattern[str]:
        """"Singapore 8," / "Tokyo: 6/10;" / "**TUM 8**": one item of a score list."""
        names_alt = "|".join(re.escape(n) for n, _ in self.all_names)
        return re.compile(
            rf"(?<![\w])({names_alt or '(?!)'})(?![\w]) ?[:：]? ?(?:\*\*)?({NUM})(?:/ ?10)?"
            rf"(?:\*\*)?(?=[,;.，、。]| (?:and|und|et|i|와|과|和) |$)")

    @cached_property
    def label_re(self) -> re.Pattern[str]:
        # Labels that fold to nothing are found by name only. No letter (of any script:
        # "Bâle") may continue the label: "a ..." is an article.
        alts = self._label_alts or "(?!)"
        return re.compile(rf"(?:{OPTION_WORD})?({alts})(?!\w)[.)]?")

    @cached_property
    def opener_re(self) -> re.Pattern[str]:
        # To open a section a bare label needs a delimiter: "A." "A)" "A:" "A=" "A -", not
        # "A bit", or to be the whole line with its number: "A 8", "A 8/10" (not "A 2019
        # survey rated it 8/10").
        alts = self._label_alts or "(?!)"
        return re.compile(
            rf"(?:{OPTION_WORD}({alts})(?!\w)|({alts})(?: ?[.):=|：]| ?[-–—]|\*\*|$|"
            rf"(?= ?[(（][^)）\n]{{1,40}}[)）])|"
            rf"(?= {NUM}(?!\d) ?(?:{UNIT.pattern})?[ .]*$)))[.)]?")

    @cached_property
    def label_item_re(self) -> re.Pattern[str]:
        """ "a 8" / "option b: 6/10" / "c=7" / "a (toronto): 8" / "a는 8점": one label and its
        number, an item of a list of labels."""
        alts = self._label_alts or "(?!)"
        return re.compile(
            rf"(?:\*\*|__)?+(?:{OPTION_WORD})?({alts})(?:(?!\w)|(?={_PARTICLE}))[.)]?+"
            rf"(?: ?[(（][^)）\d]{{1,40}}[)）])?+(?:\*\*|__)?+ ?(?:[:=]|[-–—→](?= )|"
            rf"{_PARTICLE})?+ ?(?:\*\*|__)?+ ?({NUM})(?!\d)( ?(?:{UNIT.pattern})\w*)?"
            rf"(?:\*\*|__)?+")

    def key_label(self, key: str) -> str | None:
        k = fold(key).strip(" \"'*_:")
        for name, lab in self.all_names:
            if k == name:
                return lab
        m = self.label_re.match(k)
        if m:
            return self.by_fold[m.group(1)]
        return next((lab for name, lab in self.names if name in k), None)

    def opens(self, s: str) -> tuple[str, int] | None:
        """(label, end of the option's mention) if folded line `s` starts with an option."""
        m = self.opener_re.match(s)
        if m:
            label = self.by_fold[m.group(1) or m.group(2)]
            pos = m.end()
            # "B. 东京大学 — 9/10": the label may be followed by its own name.
            rest = s[pos:].lstrip(" *_")
            own = next((n for n, lab in self.all_names if lab == label and rest.startswith(n)),
                       None)
            if own:
                pos = len(s) - len(rest) + len(own)
            return label, pos
        for name, lab in self.all_names:
            # A Latin name must end at a word's end; CJK names need no word boundary.
            if s.startswith(name) and (not name.isascii()
                                       or not s[len(name):len(name) + 1].isalnum()):
                return lab, len(name)
        return None


@dataclass
class _Section:
    label: str
    level: int  # markdown heading level of its opening line; 7 when not a heading
    listing: bool = False  # opened by "Name: 8/10": the lines after it may be other names
    strong: list[float | None] = field(default_factory=list)  # None: an ambiguous statement
    labelled: dict[str, float] = field(default_factory=dict)  # "job market" -> 9

    def value(self) -> float | str | None:
        """The section's score, "ambiguous", or None when it states none."""
        if self.strong:
            last = self.strong[-1]
            return "ambiguous" if last is None else last
        if len(set(self.labelled.values())) == 1:
            return next(iter(self.labelled.values()))
        return "ambiguous" if self.labelled else None


@dataclass(frozen=True)
class ProseReading:
    """What the prose says: scores per label, and what makes it unreadable."""

    scores: dict[str, float]  # label -> its last clear score
    ambiguous: list[str]  # labels whose last statement had two different scores
    unknown: list[str] = field(default_factory=list)  # scored subjects that are no option


def _table_row(s: str) -> list[str] | None:
    return [c.strip(" *_") for c in s.strip().strip("|").split("|")] if s.startswith("|") else None


class _Table:
    """A markdown table: options as rows (a score column) or as columns (an overall row)."""

    def __init__(self) -> None:
        self.score_col: int | None = None
        self.columns: dict[int, str] = {}  # column -> label, when options head the columns
        self.rows = 0

    def row(self, cells: list[str], opts: Options, final: dict[str, float | str]) -> None:
        if all(set(c) <= set("-: ") for c in cells):
            return  # the |---|---| rule
        heads = {i: hit[0] for i, c in enumerate(cells) if (hit := opts.opens(c))}
        self.rows += 1
        if self.rows == 1 and len(set(heads.values())) >= 2:  # | | Bordeaux | Séville | Porto |
            self.columns = heads
            return
        if self.columns:
            if KEYWORD.match(cells[0]):  # the "Overall" row; criteria rows are a breakdown
                for i, label in self.columns.items():
                    if i < len(cells) and (v := score_at(cells[i])) is not None:
                        final[label] = v
            return
        if not heads:  # a header row: which column holds the score
            self.score_col = next((i for i, c in enumerate(cells) if COLUMN.search(c)), None)
            return
        label = next(iter(heads.values()))
        col = self.score_col
        value = score_at(cells[col]) if col is not None and col < len(cells) else None
        if value is None:  # no score column: a cell such as "8/10"
            found = [v for c in cells for v in statements(c) if OUT_OF_TEN.search(c)]
            value = found[-1] if len(found) == 1 else None
        if value is not None:
            final[label] = value


def _listed(s: str, opts: Options) -> dict[str, float] | None:
    """ "Final scores (out of 10): Singapore 8, Tokyo 6, London 7": two or more options, each
    with its number, in one line; with a score word, or every number in 1..10."""
    found = list(opts.list_re.finditer(s))
    items = {opts.name_label[m.group(1)]: number(m.group(2)) for m in found}
    if len(items) < 2 or RANK_TITLE.search(s[:found[0].start()]):
        return None
    if KEYWORD.search(s) or re.search(OUT_OF, s) or all(1 <= v <= 10 for v in items.values()):
        return items
    return None


def _label_items(s: str, start: int, opts: Options) -> list[tuple[str, float, bool]] | None:
    """(label, number, with a unit) of each item when `s` from `start` to its end is
    nothing but a list of labels with their numbers, else None."""
    items, pos = [], start
    while True:
        m = opts.label_item_re.match(s, pos)
        if m is None:
            return None
        items.append((opts.by_fold[m.group(1)], number(m.group(2)), bool(m.group(3))))
        pos = m.end()
        if pos >= len(s):
            return items
        sep = _LIST_SEP.match(s, pos)
        if sep is None:
            return None
        pos = sep.end()


def _label_list(s: str, opts: Options) -> dict[str, float] | None:
    """ "Final scores: A 8, B 6, C 7", "A: 8, B: 6", "A=8; B=6", "最终评分：A 8分、B 6分": a line
    that, after an optional title ending in a colon, is only two or more labels each with
    its number; with a score word, a unit, or every number in 1..10."""
    body = s.rstrip(" .。!*_")
    starts = [0, *(m.end() for m in _TITLE_END.finditer(body, 0, _TITLE) if m.start() > 0)]
    for start in starts:
        items = _label_items(body, start + len(body[start:]) - len(body[start:].lstrip(" *_")),
                             opts)
        if (items is None or len(items) < 2 or len({lab for lab, _, _ in items}) < len(items)
                or RANK_TITLE.search(body[:start])):
            continue
        if (KEYWORD.search(body[:start]) or any(unit for _, _, unit in items)
                or all(1 <= v <= 10 for _, v, _ in items)):
            return {lab: v for lab, v, _ in items}
    return None


def read_prose(text: str, opts: Options) -> ProseReading:
    final: dict[str, float | str] = {}
    unknown: list[str] = []
    section: _Section | None = None
    table: _Table | None = None

    def close() -> None:
        nonlocal section
        if section is not None and (v := section.value()) is not None:
            final[section.label] = v
        section = None

    for raw in text.splitlines():
        s = fold(raw)
        if not s:
            continue
        cells = _table_row(s)
        if cells is not None:
            close()
            table = table or _Table()
            table.row(cells, opts, final)
            continue
        table = None
        body = s[m.end():] if (m := LEAD.match(s)) else s
        body = body.lstrip("*_ ")
        if (listed := _listed(body, opts) or _label_list(body, opts)) is not None:
            close()
            final.update(listed)
            continue
        opened = opts.opens(body)
        if opened is not None:
            close()
            heading = HEADING.match(raw)
            section = _Section(opened[0], raw.strip().count("#", 0, 7) if heading else 7)
            rest = body[opened[1]:]
            after = AFTER_NAME.match(rest)
            tail = rest[after.end():] if after else rest
            direct = score_at(tail) if NUMBER_RE.match(tail) else None
            said = statements(rest)
            if direct is not None:
                # "Chicago: 8/10 if you work in finance, 6/10 otherwise" is no one score.
                clash = any(v is None or v != direct for v in said)
                section.strong.append(None if clash else direct)
                section.listing = True
            else:
                section.strong += said
            continue
        if HEADING.match(raw):
            level = len(raw.strip()) - len(raw.strip().lstrip("#"))
            if section is None or level <= section.level:
                close()  # "## Final verdict" ends the last option's section, "### Pros" not
            continue
        lab = LABELLED.match(body)
        subject = lab.group(1).strip(" *_") if lab else ""
        if lab and not KEYWORD.match(subject):
            if section is None or section.listing:
                # "Imperial: 7/10" among option lines, or under "## Verdict": a score of
                # something that reads as no option (a name we do not know).
                unknown.append(subject)
            else:
                section.labelled[subject] = number(lab.group(2))
            continue
        if section is not None:
            section.strong += statements(body)
    close()
    scores = {k: v for k, v in final.items() if not isinstance(v, str)}
    return ProseReading(scores, sorted(k for k, v in final.items() if isinstance(v, str)),
                        unknown)
