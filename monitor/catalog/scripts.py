"""What a name must look like in its language: the script it is written in, the
scripts it must not hold, no placeholder, no stray space (a seventh language with its
own script needs only an entry here)."""

from __future__ import annotations

import re

from monitor.catalog.records import base_language

__all__ = ["PLACEHOLDER", "SCRIPTS", "name_problems"]

PLACEHOLDER = re.compile(r"(\?\?|TODO|TBD|FIXME|XXX|N/A|\?|？|�|^-+$|<[^>]*>|\{|\})", re.I)

_HAN = r"\u3400-\u4dbf\u4e00-\u9fff"
_KANA = r"\u3040-\u30ff"
_HANGUL = r"\uac00-\ud7af"
_ARABIC = r"\u0600-\u06ff\u0750-\u077f"
_DEVANAGARI = r"\u0900-\u097f"
_CYRILLIC = r"\u0400-\u04ff"
# Common characters that exist only in Traditional Chinese (their Simplified
# forms differ); finding one in zh means a Traditional or Japanese name.
_TRADITIONAL = set("學國華東風語蘭灣門爾倫羅亞納維薩蘇聖藝術醫開關與為業"
                   "會號島廣澤鎮區縣漢濟鐵銀馬龍黃齊臺來慶陽盧譯紐約頓"
                   "圖書館鳳運線貝萊雲韓彌達遼寧瀋溫")
# Their Simplified forms, common in names: finding one in zh-Hant means a Simplified name
# (台, 云, 沈 are left out: Traditional writing uses them too, 台北 as much as 臺北).
_SIMPLIFIED = set("学国华东风语兰湾门尔伦罗亚纳维萨苏圣艺术医开关与为业"
                  "会号岛广泽镇区县汉济铁银马龙黄齐来庆阳卢译纽约顿"
                  "图书馆凤运线贝莱韩弥达辽宁温")
SCRIPTS: dict[str, tuple[str, str]] = {
    # language: (regex the name must match somewhere, what it means)
    "zh": (f"[{_HAN}]", "Chinese characters"),
    "ja": (f"[{_HAN}{_KANA}]", "kanji or kana"),
    "ko": (f"[{_HANGUL}]", "Hangul"),
    # A name with none of its language's script is a Latin placeholder where the press
    # writes a native form ("MIT" in ar is معهد ماساتشوستس للتكنولوجيا).
    "ar": (f"[{_ARABIC}]", "Arabic script"),
    "hi": (f"[{_DEVANAGARI}]", "Devanagari"),
    "ru": (f"[{_CYRILLIC}]", "Cyrillic"),
}
_FORBIDDEN: dict[str, tuple[str, str]] = {
    "zh": (f"[{_KANA}{_HANGUL}]", "kana or Hangul"),
    "ja": (f"[{_HANGUL}]", "Hangul"),
    "ko": (f"[{_KANA}]", "kana"),
    "en": (f"[{_HAN}{_KANA}{_HANGUL}]", "CJK characters"),
    "fr": (f"[{_HAN}{_KANA}{_HANGUL}]", "CJK characters"),
    "de": (f"[{_HAN}{_KANA}{_HANGUL}]", "CJK characters"),
}

def name_problems(lang: str, name: str) -> list[str]:
    """What is wrong with `name` in `lang`; a locale (zh-Hant) keeps its language's script
    rules, and the script subtag's own (Hant: Traditional, Hans: Simplified)."""
    script = lang.partition("-")[2]
    lang = base_language(lang) or lang
    out: list[str] = []
    if not name.strip():
        return ["is blank"]
    if name != name.strip() or "  " in name:
        out.append("has stray spaces")
    if PLACEHOLDER.search(name):
        out.append("looks like a placeholder")
    if lang in SCRIPTS and not re.search(SCRIPTS[lang][0], name):
        out.append(f"has no {SCRIPTS[lang][1]}")
    if lang in _FORBIDDEN and re.search(_FORBIDDEN[lang][0], name):
        out.append(f"contains {_FORBIDDEN[lang][1]}")
    if lang == "zh" and script == "Hant" and (simp := sorted(set(name) & _SIMPLIFIED)):
        out.append(f"uses Simplified characters {''.join(simp)} (zh-Hant is Traditional)")
    elif lang == "zh" and script != "Hant" and (trad := sorted(set(name) & _TRADITIONAL)):
        out.append(f"uses Traditional characters {''.join(trad)} (zh is Simplified)")
    return out
