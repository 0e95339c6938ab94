"""Scores read out of prose the way a careful person reads them, section by section.

Real assistants write a heading per option and put its score on a later line
("**Score:** 8/10", "Rating: ★★★★☆ (8/10)", "→ 10점 만점에 8점"), a line per
option ("Boston — Score: 7", "清华大学：8分", "Puntuación Dubái: 7"), a paragraph
per option that names it anywhere, a markdown table with a score column (or the
options as columns and an "Overall" row), a list of names ("Final scores:
Singapore 8, Tokyo 6, London 7") or of labels ("Final scores: A 8, B 6, C 7",
"A: 8, B: 6", "A=8; B=6", "A는 8점, B는 6점", "最终评分：A 8分，B 6分"), or a final
verdict that restates (and sometimes changes) the scores. The reading (the line's
score statements: monitor.measure.statements; the options' names:
monitor.measure.options):

- A line, or a sentence of it that scores, that starts with an option (its label
  followed by a delimiter, its name or a short form, after an article or a score
  word if any: "El MIT obtiene un 9 sobre 10", "Оценка Москвы: 9") opens that
  option's section; so does, outside a section, a paragraph with a score
  statement that names one option anywhere. A markdown heading that names no
  option, at the section's level or above, closes it.
- In a section, a score statement gives the option's score. "Job market: 9/10"
  lines are a breakdown: one alone is the score, several are not, unless an
  "Overall" line says which.
- A list is two or more items that make up the line after its title (or the
  line's first sentence), each number in 1..10 unless a score word or unit says
  it is a score; under a title of ranks ("QS rank: A 3, B 5") it is no list.
- The last statement about an option wins (a final verdict restates). Two
  different scores in one statement ("8/10 if ..., 6/10 otherwise", "7-8/10",
  "ETH 8 ya da 9"), or a later line that names a label with two numbers ("Für C
  gebe ich doch 8 Punkte – oder eher 6"), make that option ambiguous, which is
  reported, not guessed; so is a "Name: 7/10" line for a name that is no option
  among option lines, since it may be the model's name for one of them (a stale
  score would otherwise stand).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from monitor.measure.options import Options
from monitor.measure.statements import (
    AFTER_NAME,
    HEADING,
    KEYWORD,
    LABELLED,
    LEAD,
    NUM,
    NUMBER_RE,
    OUT_OF,
    RANK_TITLE,
    fold,
    number,
    numbers_in,
    score_at,
    statements,
)
from monitor.measure.tables import Table, table_row

__all__ = ["Options", "ProseReading", "read_prose"]  # Options: monitor.measure.options

# Between the items of a list of labels: punctuation or "and" in a catalogue language.
_LIST_SEP = re.compile(r"(?: ?[,;、|/·،؛] ?| [—–-] | ?)(?:(?:and|et|und|y|e|и|ve|dan|و|और|和|및)"
                       r"(?!\w) ?)?")
# Where a list's title ends ("Final scores:", "Scores —", "评分 ——"), and where a list
# ends before the line goes on ("(A) 9, (B) 8, (C) 7. Seoul for culture ...").
_TITLE_END = re.compile(r"[:：]|\s[—–-]+\s")
_LIST_END = re.compile(r" ?(?:[.。!！;؛।]|\s[—–-]+\s)")
# A letter of a script that spaces its words: a label right after one is part of a word.
_IN_WORD = re.compile(r"[a-zà-ÿ\u0400-\u04ff\u0600-\u06ff\u0900-\u097f]")
# A line's last word, a number after a dash or colon, and nothing between it and the
# option but a few words without a digit: "A. IIT दिल्ली — 9", "B. МГУ: 9/10".
_LINE_SCORE = re.compile(rf"^[^\d\n]{{0,40}}?(?:[:=]|\s[—–-]+) ?(?:\*\*)?({NUM})(?!\d) ?"
                         rf"(?:/ ?10)?(?:\*\*)?[ .]*$")
_SENTENCE_END = re.compile(r"[.!?;](?: +)|[。！？；]")
# A label named in a sentence, as written (case kept): "für C", "B应该是9分", "C को"; not the
# article "A" opening an English sentence ("A good choice").
_LABEL_MENTION = re.compile(r"(?<![A-Za-zÀ-ÿ])(?!A [a-zà-ÿ])([ABC])(?![A-Za-zÀ-ÿ'’])")
# "Puntuación Dubái: 7", "Nota de Munique: 8", "Score for Boston: 8": a score word, a small
# word of, then the option and its number.
_OF = re.compile(r"(?:de|di|du|for|für|von|pour|per|para|для|للـ|के लिए) ")
_TITLE = 60  # the most characters a list's title ("Final scores (out of 10)") may have


@dataclass
class _Section:
    label: str
    level: int  # markdown heading level of its opening line; 7 when not a heading
    listing: bool = False  # opened by "Name: 8/10": the lines after it may be other names
    mentioned: bool = False  # opened by a paragraph naming it: the next may name another
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


def _listed(s: str, opts: Options) -> dict[str, float | str] | None:
    """ "Final scores (out of 10): Singapore 8, Tokyo 6, London 7": two or more options, each
    with its number, in one line; with a score word, or every number in 1..10. An option
    given two numbers in it ("ETH 8 ya da 9") is "ambiguous"."""
    found = list(opts.list_re.finditer(s))
    items = {opts.name_label[m.group(1)]: number(m.group(2)) for m in found}
    either: dict[str, float | str] = {opts.name_label[m.group(1)]: "ambiguous"
                                      for m in opts.either_re.finditer(s)
                                      if m.group(2) != m.group(3)}
    if len(items) + len(either) < 2 or (found and RANK_TITLE.search(s[:found[0].start()])):
        return None
    if KEYWORD.search(s) or re.search(OUT_OF, s) or all(1 <= v <= 10 for v in items.values()):
        return {**items, **either}
    return None


def _label_items(s: str, start: int, opts: Options) -> list[tuple[str, float, bool]] | None:
    """(label, number, with a unit) of each item when `s` from `start` is a list of labels
    with their numbers, to its end or to the end of a sentence, else None."""
    items: list[tuple[str, float, bool]] = []
    pos = end = start
    while True:
        m = opts.label_item_re.match(s, pos)
        if m is None:
            # The line may go on after the list (a sentence, a dash): "(A) 9, (B) 8, (C) 7.
            # Seoul for culture ...".
            return items if len(items) >= 2 and _LIST_END.match(s, end) else None
        items.append((opts.by_fold[m.group(1)], number(m.group(2)), bool(m.group(3))))
        end = m.end()
        if end >= len(s):
            return items
        pos = _LIST_SEP.match(s, end).end()  # type: ignore[union-attr]  # all optional


def _label_list(s: str, opts: Options) -> dict[str, float] | None:
    """ "Final scores: A 8, B 6, C 7", "A: 8, B: 6", "A=8; B=6", "最终评分：A 8分、B 6分": a line
    that, after an optional title ending in a colon, is only two or more labels each with
    its number; with a score word, a unit, or every number in 1..10."""
    body = s.rstrip(" .。!*_।")
    # The list opens the line, follows a title ("Final scores:"), or a few words
    # ("결론부터 말씀드리면 A→8점, ...", "I'd give A 8, B 6 and C 7").
    starts = [0, *(m.end() for m in _TITLE_END.finditer(body, 0, _TITLE) if m.start() > 0),
              *(m.start() for m in opts.label_item_re.finditer(body, 1, _TITLE)
                if not _IN_WORD.match(body, m.start() - 1))]
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


def _direct(rest: str) -> float | None:
    """The number right after an option's name ("Chicago: 8/10", "Boston — 7"), if any."""
    after = AFTER_NAME.match(rest)
    tail = rest[after.end():] if after else rest
    return score_at(tail) if NUMBER_RE.match(tail) else None


class _Reader:
    """The reading of one answer, line by line (read_prose)."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.final: dict[str, float | str] = {}
        self.unknown: list[str] = []
        self.section: _Section | None = None
        self.table: Table | None = None

    def close(self) -> None:
        if self.section is not None and (v := self.section.value()) is not None:
            self.final[self.section.label] = v
        self.section = None

    def line(self, raw: str) -> None:
        s = fold(raw)
        if not s:
            return
        cells = table_row(s)
        if cells is not None:
            self.close()
            self.table = self.table or Table()
            self.table.row(cells, self.opts, self.final)
            return
        self.table = None
        body = s[m.end():] if (m := LEAD.match(s)) else s
        body = body.lstrip("*_ ")
        listed: dict[str, float | str] | None = _listed(body, self.opts)
        if listed is None and (labels := _label_list(body, self.opts)) is not None:
            listed = dict(labels)
        if listed is not None:
            self.close()
            self.final.update(listed)
            return
        if HEADING.match(raw) and self.opts.opens(body) is None:
            level = len(raw.strip()) - len(raw.strip().lstrip("#"))
            if self.section is None or level <= self.section.level:
                self.close()  # "## Final verdict" ends the last option's section, "### Pros" not
            return
        level = raw.strip().count("#", 0, 7) if HEADING.match(raw) else 7
        if self.section is None and self.final and not self._revised(raw, body):
            return
        for part in _sentences(body, self.opts):
            self.part(part, level)

    def _revised(self, raw: str, body: str) -> bool:
        """A line outside every section after scores were read that names a label ("Für C
        gebe ich doch 8 Punkte – oder eher 6"): two numbers make that label ambiguous, one
        score statement restates it. False when the line should be read as any other."""
        if self.opts.opens(body) is not None:
            return True
        named = {lab for lab in _LABEL_MENTION.findall(unicodedata.normalize("NFKC", raw))
                 if lab in self.final}
        if len(named) != 1:
            return True
        label = named.pop()
        said = statements(body)
        if len(numbers_in(body)) >= 2 or None in said:
            self.final[label] = "ambiguous"
        elif len(said) == 1:
            self.final[label] = said[0]  # type: ignore[assignment]  # None excluded above
        return False

    def part(self, body: str, level: int) -> None:
        """One sentence (or the whole line) of prose."""
        opts = self.opts
        opened = opts.opens(body)
        if opened is None and (kw := KEYWORD.match(body)):
            # "Puntuación Dubái: 7", "Оценка Москвы: 9": the option after a score word is
            # the line's subject, when its number follows it.
            after_kw = body[kw.end():].lstrip(" *_")
            after_kw = after_kw[m.end():] if (m := _OF.match(after_kw)) else after_kw
            named = opts.opens(after_kw)
            if named is not None and _direct(after_kw[named[1]:]) is not None:
                body, opened = after_kw, named
        if opened is not None:
            self.close()
            section = self.section = _Section(opened[0], level)
            rest = body[opened[1]:]
            direct = _direct(rest)
            if direct is None and (end := _LINE_SCORE.search(rest)):
                # "A. IIT दिल्ली — 9": a label, its name in words we may not know, a number.
                direct = number(end.group(1))
            said = statements(rest)
            if direct is not None:
                # "Chicago: 8/10 if you work in finance, 6/10 otherwise" is no one score.
                clash = any(v is None or v != direct for v in said)
                section.strong.append(None if clash else direct)
                section.listing = True
            else:
                section.strong += said
            return
        if (self.section is None or self.section.mentioned) and (said := statements(body)):
            about = opts.mentioned(body)
            if len(about) == 1:
                # A paragraph about one option, named anywhere in it ("تأسست جامعة الملك
                # سعود عام 1957 ... تقييمي لها: 8 من 10"): its first mention opens its section.
                self.close()
                self.section = _Section(about.pop(), level, mentioned=True)
                self.section.strong += said
                return
        lab = LABELLED.match(body)
        subject = lab.group(1).strip(" *_") if lab else ""
        if lab and not KEYWORD.match(subject):
            if self.section is None or self.section.listing:
                # "Imperial: 7/10" among option lines, or under "## Verdict": a score of
                # something that reads as no option (a name we do not know).
                self.unknown.append(subject)
            else:
                self.section.labelled[subject] = number(lab.group(2))
            return
        if self.section is not None:
            self.section.strong += statements(body)


def _sentences(body: str, opts: Options) -> list[str]:
    """The line, cut before each sentence that opens with an option and scores it ("El MIT
    obtiene un 9 sobre 10: ... Caltech se lleva un 8 sobre 10: ..."): each opens its
    section. A sentence that only mentions an option first ("서울에서 KTX로 약 2시간") does
    not: it belongs to the section it stands in."""
    ends = [m.end() for m in _SENTENCE_END.finditer(body)]
    parts, start = [], 0
    for i, end in enumerate(ends):
        if end >= len(body) or opts.opens(body[end:]) is None:
            continue
        sentence = body[end:ends[i + 1] if i + 1 < len(ends) else len(body)]
        if statements(sentence):
            parts.append(body[start:end].strip())
            start = end
    return [*parts, body[start:]]


def read_prose(text: str, opts: Options) -> ProseReading:
    reader = _Reader(opts)
    for raw in text.splitlines():
        reader.line(raw)
    reader.close()
    final = reader.final
    scores = {k: v for k, v in final.items() if not isinstance(v, str)}
    return ProseReading(scores, sorted(k for k, v in final.items() if isinstance(v, str)),
                        reader.unknown)
