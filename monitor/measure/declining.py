"""Declining to score, in every catalogue language: one rule, each language's words.

An answer with no score at all is refused when one of its sentences speaks of
scoring and declines to do it ("I'd rather not assign scores", "Ich möchte
keine Punkte vergeben", "我不太方便给具体的地方打分"). The rule is the same
in every language and does not depend on the language asked (an assistant may
answer in another): a sentence is declining when it holds a scoring word and
a declining phrase of any catalogue language. The words are by language below;
adding a language adds its row (docs/contract.md, "Reading answers").
Matching is on folded text (monitor.measure.statements.fold): casefolded, NFKC.

Only an answer with no score is judged (monitor.measure.parse), so a sentence
such as "a score cannot capture everything" beside the scores is no refusal.
"""

from __future__ import annotations

import re

from monitor.measure.statements import fold

__all__ = ["declines"]

# language: (words of scoring, phrases of declining); regex fragments, folded.
_WORDS: dict[str, tuple[str, str]] = {
    "en": (r"scor|rating|\brate\b|numer|grade|put a number|numbers? on|\brank",
           r"rather not|prefer not|not comfortable|n't (?:feel )?comfortable|n't think|"
           r"do not think|refrain|won't|will not|can't|cannot|unable|decline|not able|"
           r"not going to|n't be (?:appropriate|fair|meaningful|responsible|helpful)|"
           r"not (?:be )?(?:appropriate|fair|meaningful)|hesitant|reluctant|"
           r"instead of (?:giving|assigning|scoring|putting|rating)|"
           r"without (?:giving|assigning) |avoid|shouldn't|wouldn't|hold(?:ing)? off"),
    "fr": (r"\bnot(?:e|es|er)\b|noter|chiffr|évalu|classe|\bpoints?\b|scor",
           r"préfère ne pas|ne peux pas|ne suis pas en mesure|m'abstiens|m'abstiendrai|"
           r"pas pertinent|ne vais pas|ne souhaite pas|ne pense pas|ne (?:donnerai|"
           r"attribuerai|mettrai|noterai) pas|plutôt que de|sans (?:attribuer|donner|mettre)|"
           r"éviter|ne me sens pas|pas (?:approprié|judicieux|raisonnable)|n'aurait pas|"
           r"n'a pas (?:beaucoup )?de sens|pas (?:beaucoup )?de sens"),
    "de": (r"punkt|bewert|\bnoten?\b|zahl|rangliste|rangfolge|einstuf|benot|score|ranking",
           r"tut mir leid|ungern|verzichte|nicht (?:für )?sinnvoll|kann [^.]{0,40} nicht|"
           r"möchte [^.]{0,40} nicht|möchte keine|werde keine|werde [^.]{0,40} nicht|"
           r"kann keine|lieber keine|lieber nicht|stattdessen|anstatt|\bstatt\b|"
           r"keine (?:punkt|noten|bewertung|zahl)|ohne [^.]{0,30}(?:punkt|noten|zahl)|"
           r"nicht angemessen|nicht fair|halte es nicht"),
    "es": (r"puntu|puntaj|calific|\bnotas?\b|valor|clasific|número|\bpuntos?\b",
           r"no puedo|prefiero no|lo siento|no voy a|no me (?:parece|siento)|"
           r"no (?:daré|asignaré|pondré|otorgaré)|no (?:es|sería) (?:apropiado|justo|"
           r"adecuado|conveniente)|en lugar de|en vez de|sin (?:asignar|dar|poner)|"
           r"me abstengo|abstenerme|me abstendré|evitar|no considero|no creo|"
           r"no tiene sentido"),
    "pt": (r"pontu|\bnotas?\b|classific|avali|número|\bpontos?\b",
           r"não posso|prefiro não|desculpe|não vou|não (?:irei|darei|atribuirei)|"
           r"não me sinto|não (?:é|seria) (?:apropriado|justo|adequado)|em vez de|"
           r"ao invés de|sem atribuir|me abster|evitar|não considero|não acho"),
    "it": (r"punteggi|\bpunti\b|\bvot[io]\b|valutar|classific|numer",
           r"non posso|preferisco non|mi dispiace|non (?:intendo|vorrei|voglio|ritengo|"
           r"credo|mi sento|assegnerò|darò|penso)|non (?:è|sarebbe) (?:opportuno|corretto|"
           r"appropriato|giusto)|invece di|anziché|senza (?:assegnare|dare)|evit|astengo|"
           r"non sono in grado|preferirei non|riduttiv"),
    "id": (r"skor|nilai|peringkat|angka|\bpoin\b",
           r"tidak dapat|tidak bisa|maaf|tidak akan|tidak ingin|tidak mau|enggan|"
           r"lebih baik tidak|tidak (?:tepat|pantas|adil|etis)|alih-alih|daripada|"
           r"tanpa memberi|tidak (?:memberikan|memberi|menilai)|tidak nyaman|untuk tidak|"
           r"kurang (?:sreg|tepat|pas|nyaman|bijak)"),
    "tr": (r"puan|not ver|notlandır|değerlendir|sırala|rakam|skor",
           r"yapamam|veremem|maalesef|üzgünüm|m[ae]y[ae]c[ae]ğim|istemiyorum|istemem|"
           r"uygun (?:olmaz|değil|olmadığ)|yerine|kaçın|doğru olmaz|doğru bulm|"
           r"m[ae]m[ae]yi tercih|gelmiyor"),
    "ru": (r"оцен|балл|рейтинг|ранжир|цифр|числ",
           r"не могу|не буду|извините|к сожалению|не (?:стану|хочу|хотел|считаю|думаю|"
           r"готов|возьмусь|было бы|корректно|уместно|правильно|вижу смысла)|"
           r"не (?:стал|стала|ставить|выставлять|давать|присваивать)|бы не|предпоч[её]л|"
           r"предпочла|предпочту|воздерж|вместо того|без (?:выставления|оценок|баллов)"),
    "ar": (r"درج|تقييم|نقاط|نقط|علام|ترتيب|تصنيف|أرقام|رقم",
           r"لا أستطيع|لا يمكنني|عذر|آسف|أعتذر|\bلن\b|لا أرغب|لا أود|أفضل عدم|أفضّل عدم|"
           r"بدلا من|بدلاً من|ليس من (?:المناسب|العدل|الإنصاف)|امتنع|أمتنع|لا أرى|"
           r"أفض[ّ]?ل ألا|لا أمنح|لن أمنح|لا أعطي"),
    "hi": (r"अंक|स्कोर|रेटिंग|रैंक|मूल्यांकन|नंबर|संख्या",
           r"नहीं|क्षमा|माफ़|माफ|असमर्थ|बजाय|उचित नहीं|से बच|बचूँगा|बचूंगा|बचना"),
    "zh": (r"打分|评分|分数|给分|打个分|量化|数字|排名|排序|评级|分值|具体分",
           r"无法|不会|不便|不太方便|不大方便|不方便|不给|不打|不做|就不|不想|不愿|不宜|不适合|不合适|避免|"
           r"而不是|不进行|没法|难以|不能|不公平|不太公平"),
    # zh-Hant: zh's words in Traditional characters (Taiwan, Hong Kong).
    "zh-Hant": (r"打分|評分|分數|給分|打個分|量化|數字|排名|排序|評級|分值|具體分",
                r"無法|不會|不便|不太方便|不大方便|不方便|不給|不打|不做|就不|不想|不願|不宜|"
                r"不適合|不合適|避免|而不是|不進行|沒法|難以|不能|不公平|不太公平"),
    "ja": (r"点数|点を|評価|採点|数値|数字|スコア|順位|ランク|点数化",
           r"できません|控え|付けず|つけず|難しい|いたしません|しません|避け|できかね|"
           r"ではなく|せず|付けません|つけません|適切ではな|不適切"),
    "ko": (r"점수|숫자|평가|매기|순위|수치|점을",
           r"수 없|않겠|어렵|삼가|보다는|않습니다|않을|못하|대신|지 않|부적절|조심스럽"),
}
_SCORING = re.compile("|".join(f"(?:{words})" for words, _ in _WORDS.values()))
_DECLINE = re.compile("|".join(f"(?:{phrases})" for _, phrases in _WORDS.values()))
_SENTENCE = re.compile(r"[^.!?。！？؟।\n]+")


def declines(text: str) -> bool:
    """A sentence that speaks of scoring and declines to do it (any catalogue language)."""
    return any(_SCORING.search(m.group()) and _DECLINE.search(m.group())
               for m in _SENTENCE.finditer(fold(text)))
