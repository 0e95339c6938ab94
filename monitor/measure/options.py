"""The options of one prompt as an answer may name them: labels, names, short forms.

A model names an option by its label ("A", "Option B", "(C)", Arabic "أ"), by its
name as the prompt gave it, by its name in another catalogue language ("KAIST" in
a Korean answer), or by a short form of any of these: a qualifier left out
("Córdoba"), the generic words left out ("Harvard", "Imperial"), an acronym
("MIT", "ODTÜ", "МГУ"), a Russian adjective's noun ("Гарвард") or a declined
form ("Москвы", "Санкт-Петербургу"). A short form counts only where it points at
one option and is no other option's name. `Options` folds them once per prompt
and compiles what reading the answer needs (monitor.measure.prose, .parse).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from functools import cached_property, lru_cache

from monitor.measure.statements import NUM, OPTION_WORD, UNIT, fold

__all__ = ["Options"]

_GENERIC = re.compile(
    r"\b(?:the|university|universit[yé]|université|universität|universidad|universidade|"
    r"università|universitas|üniversitesi|college|institute|institut|instituto|istituto|"
    r"school|of|de|du|des|di|della|do|da|la|le|der|die|das|city|университет|институт|جامعة|"
    r"كلية|كوليدج|معهد|विश्वविद्यालय|संस्थान)(?!\w)|\b[dl]'|大学|大學|대학교|학교|공과|시|市")
# A Russian adjective of a name ("Стэнфордский университет") and its noun ("Стэнфорд").
_RU_ADJECTIVE = re.compile(r"(\w{3,}?)([сц]к)(?:ий|ая|ой)\b")
# What may stand between a label and its number besides a colon: particles (ko, ja, zh, hi).
_PARTICLE = r"(?:은|는|이|가|は|が|为|為|得|是| को)"
_ABJAD = {"A": "أ", "B": "ب", "C": "ج"}
_CYRILLIC = re.compile(r"[а-яё]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# Articles and "to" that may stand before an option's name at a sentence's start.
_ARTICLE = re.compile(r"(?:(?:el|la|los|las|o|os|as|a|al|il|lo|le|der|die|das|the|в|во|на) |"
                      r"l')")
# Words an acronym leaves out: "Universidade Federal do Rio de Janeiro" is UFRJ.
_SMALL_WORDS = frozenset({"of", "de", "the", "und", "and", "do", "da", "di", "du", "des", "del",
                          "della", "der", "von", "van", "y", "e", "et"})
_CASE_ENDING = re.compile(r"[а-яё]{0,3}(?![а-яё])")


#: fold for the catalogue's names (a prompt's options in every language: ~50 a prompt,
#: the same few thousand across runs), not for answers' text.
_fold_name = lru_cache(maxsize=65536)(fold)


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
        # "imperial college london" -> "imperial"; not "ciencia" of "universidad de ciencia
        # y tecnología de pohang": a word that follows a generic one is a common noun.
        if first != bare and len(first) >= 3 and name.startswith(first):
            out.append(first)
    for suffix, short in (("大学", ""), ("大學", ""), ("대학교", "대")):
        if name.endswith(suffix) and len(name) > len(suffix) + 1:
            out.append(name[: -len(suffix)] + short)
    if len(name) == 4 and name.endswith(("大学", "大學")):  # 東京大学 -> 東大, 北京大学 -> 北大
        out.append(name[0] + "大")
    if name.startswith("universität "):  # "Uni Basel": how German answers write it
        out.append("uni " + name.removeprefix("universität "))
    if (adjective := _RU_ADJECTIVE.match(bare or name)) is not None:
        # "Гарвард", and the adjective's stem, which takes the case endings: "Пекинскому".
        out += [adjective.group(1), adjective.group(1) + adjective.group(2)]
    if _CYRILLIC.match(name) and "-" in name.split()[0]:
        out.append(name.split()[0].rsplit("-", 1)[1])  # "Санкт-Петербург" -> "Петербург"
    plain = "".join(c for c in unicodedata.normalize("NFD", name) if not unicodedata.combining(c))
    for text in (plain, name):  # "ecole ..." -> "epfl"; "orta doğu teknik üniversitesi" -> "odtü"
        words = [w for w in re.split(r"[\s-]+", text) if w]
        # "massachusetts institute of technology" -> "mit", "мгу"; Arabic, Devanagari and
        # CJK names make no acronyms (their first letters spell words: "كلا").
        if len(words) >= 3 and re.match(r"[a-zа-яё]", text):
            out.append("".join(w[0] for w in words if w not in _SMALL_WORDS))
    return tuple(s for s in out if len(s) >= 2)


class Options:
    """The labels and names of one prompt, folded once and matched against keys and lines."""

    def __init__(self, names: dict[str, str],
                 aliases: Mapping[str, Sequence[str]] | None = None) -> None:
        self.labels = tuple(sorted(names))
        self.by_fold = {_fold_name(lab): lab for lab in self.labels}
        for lab, letter in _ABJAD.items():  # Arabic answers write أ ب ج for A B C
            if lab in self.labels:
                self.by_fold.setdefault(letter, lab)
        pairs = [(f, lab) for lab, n in names.items() if (f := _fold_name(n))]
        # The option's names in the catalogue's other languages ("KAIST" in a Korean answer
        # about 한국과학기술원) and short forms of all of them.
        known = [*names.items(), *((lab, a) for lab, al in (aliases or {}).items() for a in al)]
        short: dict[str, set[str]] = {}
        for lab, original in known:
            folded = _fold_name(original)
            if folded and (folded, lab) not in pairs:
                short.setdefault(folded, set()).add(lab)
            for s in _short_forms(folded):
                short.setdefault(s, set()).add(lab)
            first = original.split()[0] if original.split() else ""
            if len(original.split()) > 1 and len(first) >= 2 and first.isupper():
                short.setdefault(_fold_name(first), set()).add(lab)  # "ETH Zürich" -> "eth"
        full = {n for n, _ in pairs}
        # A short form counts only if it points at one option and is not another's name.
        extra = [(s, next(iter(labs))) for s, labs in short.items()
                 if len(labs) == 1 and s not in full
                 and not any(n.startswith(s) and lab not in labs for n, lab in pairs)]
        # Longest first so "tokyo institute of technology" beats "tokyo".
        self.names = sorted(pairs, key=lambda p: -len(p[0]))
        self.all_names = sorted([*pairs, *extra], key=lambda p: -len(p[0]))
        self.name_label = dict(self.all_names)
        # key_label's lookups, built once per prompt: a JSON answer's every key ("score",
        # "strengths", ...) is looked up, most of them no option's name.
        # (reversed: where two options share a name, the first in all_names wins, as a
        # scan of it finds it)
        self._first_label = dict(reversed(self.all_names))
        self._name_words = [(frozenset(n.split()), lab) for n, lab in self.all_names]
        self._label_alts = "|".join(
            re.escape(f) for f in sorted(self.by_fold, key=len, reverse=True) if f)

    # The patterns are compiled when first used: a JSON answer (most of them) needs only
    # the labels', and the names' alternation (every name in every catalogue language
    # and its short forms) costs milliseconds to compile for each prompt.
    @cached_property
    def list_re(self) -> re.Pattern[str]:
        """"Singapore 8," / "Tokyo: 6/10;" / "**TUM 8**" / "Гарвард — 9" / "ETH Zurigo 8" (a
        word more, the answer's language's): one item of a score list."""
        names_alt = "|".join(re.escape(n) for n, _ in self.all_names)
        return re.compile(
            rf"(?<![\w])({names_alt or '(?!)'})[а-яё]{{0,2}}(?![\w])(?: [^\W\d]{{2,}})? ?"
            rf"(?:[:：]|[—–-](?= ))? ?(?:\*\*)?({NUM})(?:/ ?10)?"
            rf"(?:\*\*)?(?=[,;.，、。।،]| (?:and|und|et|i|e|y|и|ve|와|과|和) |$)")

    @cached_property
    def either_re(self) -> re.Pattern[str]:
        """ "ETH 8 ya da 9", "Tokyo 7 or 8": an option given two numbers, either of them."""
        names_alt = "|".join(re.escape(n) for n, _ in self.all_names)
        return re.compile(
            rf"(?<![\w])({names_alt or '(?!)'})(?![\w]) ?[:：]? ?(?:\*\*)?({NUM})(?:/ ?10)? ?"
            rf"(?:or|oder|ou|o|oppure|ya da|veya|или|atau|या|أو|或|还是|還是|또는|か) ?"
            rf"({NUM})(?!\d)")

    @cached_property
    def mention_re(self) -> re.Pattern[str]:
        """Any option's name or short form anywhere in a line, as a word (a Russian one
        with its case ending; a CJK one inside its sentence)."""
        spaced = "|".join(re.escape(n) for n, _ in self.all_names if not _CJK.search(n))
        solid = "|".join(re.escape(n) for n, _ in self.all_names if _CJK.search(n))
        return re.compile(rf"(?<!\w)({spaced or '(?!)'})[а-яё]{{0,3}}(?!\w)|({solid or '(?!)'})")

    def mentioned(self, s: str) -> set[str]:
        """The labels whose option folded line `s` names."""
        return {self.name_label[m.group(1) or m.group(2)] for m in self.mention_re.finditer(s)}

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
            rf"(?:{OPTION_WORD}({alts})(?!\w)|({alts})(?: ?[.):=|：]| ?[-–—→⇒]|\*\*|$|"
            rf"(?= ?[(（][^)）\n]{{1,40}}[)）])|"
            rf"(?= {NUM}(?!\d) ?(?:{UNIT.pattern})?[ .]*$)))[.)]?")

    @cached_property
    def label_item_re(self) -> re.Pattern[str]:
        """ "a 8" / "option b: 6/10" / "c=7" / "a (toronto): 8" / "a는 8점": one label and its
        number, an item of a list of labels."""
        alts = self._label_alts or "(?!)"
        return re.compile(
            rf"(?:\*\*|__)?+\(?+(?:{OPTION_WORD})?({alts})(?:(?!\w)|(?={_PARTICLE}))[.)]?+"
            rf"(?: ?[(（][^)）\d]{{1,40}}[)）])?+(?:\*\*|__)?+ ?(?:[:=]|[-–—](?= )|[→⇒]|->|"
            rf"{_PARTICLE})?+ ?(?:\*\*|__)?+ ?({NUM})(?!\d)( ?(?:{UNIT.pattern})\w*)?"
            rf"(?:\*\*|__)?+")

    def key_label(self, key: str) -> str | None:
        k = fold(key).strip(" \"'*_:")
        named = self._first_label.get(k)
        if named is not None:
            return named
        m = self.label_re.match(k)
        if m:
            return self.by_fold[m.group(1)]
        hit = next((lab for name, lab in self.names if name in k), None)
        if hit is not None or not k:
            return hit
        # A key of some words of one option's name ("Universidad Nacional", "Javeriana",
        # "جامعة الإمارات"): that option, when no other name holds them all.
        words = set(k.split())
        holders = {lab for held, lab in self._name_words if words <= held}
        return holders.pop() if len(holders) == 1 else None

    def opens(self, s: str) -> tuple[str, int] | None:
        """(label, end of the option's mention) if folded line `s` starts with an option,
        or with an article or a "to" before one ("El MIT obtiene", "A Milano do 8 su 10")."""
        hit = self._opens(s)
        if hit is None and (article := _ARTICLE.match(s)):
            named = self._names_at(s[article.end():])
            if named is not None:
                return named[0], article.end() + named[1]
        return hit

    def _opens(self, s: str) -> tuple[str, int] | None:
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
        return self._names_at(s)

    def _names_at(self, s: str) -> tuple[str, int] | None:
        for name, lab in self.all_names:
            # A Latin name must end at a word's end; CJK names need no word boundary.
            if s.startswith(name) and (not name.isascii()
                                       or not s[len(name):len(name) + 1].isalnum()):
                # "Санкт-Петербурга": a Russian name's case ending goes with it.
                ending = _CASE_ENDING.match(s, len(name)) if _CYRILLIC.match(name[-1:]) else None
                return lab, ending.end() if ending else len(name)
        for stem, lab in self.stems:
            if s.startswith(stem) and (ending := _CASE_ENDING.match(s, len(stem))):
                return lab, ending.end()
        return None

    @cached_property
    def stems(self) -> list[tuple[str, str]]:
        """Russian names decline: "Москва" is "Москвы", "Москве" in a sentence. The stem of
        a name ending in a vowel, when it is no other option's."""
        out = [(name[:-1], lab) for name, lab in self.all_names
               if len(name) >= 4 and name[-1] in "аяоеыйь" and _CYRILLIC.search(name)]
        return [(st, lab) for st, lab in out
                if not any(n.startswith(st) for n, other in self.all_names if other != lab)]
