"""A simulated chat model with a known, injected local-language bias.

It reads the prompt like a model would: it recognises the language and the
scenario from the consultant role, finds the three options listed as
"A. <name>", and answers in that language with consultant prose (including
numbers that are not scores: founding years, ranks, visitor counts), a
strengths / weaknesses list per option and the closing JSON block.

Score of option j asked in language l:
    round(clip(q_j + b_c * [l is the local language of c] + shift_l + e + c_call, 1, 10))
with q_j a fixed quality in [4.5, 7.5] derived from the option id, b_c the
injected bias of the option's country c (`bias_points`: one number for every
country that has a local language, or a mapping), shift_l a language-wide
leniency (`language_shift`), e ~ N(0, noise_sd) and c_call ~ N(0, call_sd)
shared by the three options of one call. A share `persistence` of e's
variance is a persistent effect of (the triplet's options, the language, the
option): the same whenever that triplet is asked in that language, whatever
the seed (real models have such prompt-specific quirks; a re-asked prompt then
correlates with its last answer). With the bias only in the local language,
MD_c = b_c - b_c / L (5b/6 for six languages).

Profiles (`simulated/<profile>`): `demo` and any other name take the params
as given; `realistic` starts from PROFILES["realistic"] (noise_sd 1.3,
call_sd 0.6, persistence 0.3, a small language-wide leniency in ko, ja and de:
sd of the per-triplet d about 1.3 instead of the demo's 0.95), which the
endpoint's params override key by key.
`lossy` is `realistic` with a share of each language's answers refused or
unreadable (5-20%, different per language: PROFILES["lossy"]).
Answers are deterministic for a given (seed, prompt). `refusal_rate` and
`garble_rate` (one number, or one per language) make some answers refusals or
unparseable prose.
`weakness_drop` is the probability that, asked in an option's local language,
the model leaves out one of that option's two weaknesses (the paper saw
Chinese answers play down the drawbacks of Chinese options); it draws from
its own hash stream, so scores are the same whatever its value.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from statistics import NormalDist
from typing import Any

from monitor.catalog import LABELS, Catalog, Option, load_catalog
from monitor.vocab import base_language
from monitor.yamlfile import load_yaml

__all__ = ["PROFILES", "SimParams", "SimulatedAnswer", "answer"]

_REALISTIC: dict[str, Any] = {"noise_sd": 1.3, "call_sd": 0.6, "persistence": 0.3,
                              "language_shift": {"ko": 0.3, "ja": -0.2, "de": -0.2}}
PROFILES: dict[str, dict[str, Any]] = {
    "realistic": _REALISTIC,
    # What a real assistant loses, different per language: 5-20% of answers refused
    # or unreadable (bench/missing.py measures the statistics on such losses).
    "lossy": {**_REALISTIC,
              "refusal_rate": {"en": 0.02, "ja": 0.05, "zh": 0.08, "fr": 0.03, "de": 0.06,
                               "ko": 0.10, "es": 0.03, "pt": 0.05, "ar": 0.09, "hi": 0.10,
                               "id": 0.06, "it": 0.03, "tr": 0.08, "ru": 0.07},
              "garble_rate": {"en": 0.03, "ja": 0.05, "zh": 0.07, "fr": 0.05, "de": 0.06,
                              "ko": 0.10, "es": 0.04, "pt": 0.05, "ar": 0.09, "hi": 0.10,
                              "id": 0.06, "it": 0.03, "tr": 0.07, "ru": 0.07}},
}


@dataclass(kw_only=True, frozen=True)
class SimParams:
    """Parameters of the simulated model (the endpoint's `params`)."""

    bias_points: float | dict[str, float] = 0.5
    language_shift: dict[str, float] | None = None
    noise_sd: float = 1.0
    call_sd: float = 0.0
    persistence: float = 0.0
    seed: int = 0
    refusal_rate: float | dict[str, float] = 0.0  # one for all languages, or per language
    garble_rate: float | dict[str, float] = 0.0
    weakness_drop: float = 0.0
    catalog_path: str | None = None
    catalog_extra: tuple[str, ...] = ()  # overlay folders, so that their prompts are known

    @classmethod
    def from_params(cls, params: dict[str, Any], profile: str | None = None) -> SimParams:
        params = {**PROFILES.get(profile or "", {}), **params}
        known = {k: v for k, v in params.items() if k in cls.__dataclass_fields__}
        unknown = sorted(set(params) - set(known) - {"temperature", "max_tokens", "top_p"})
        if unknown:
            raise ValueError(f"simulated endpoint: unknown params {unknown}; known: "
                             f"{sorted(cls.__dataclass_fields__)}")
        if "catalog_extra" in known:
            known["catalog_extra"] = tuple(known["catalog_extra"] or ())
        if not 0.0 <= float(known.get("persistence", 0.0)) <= 1.0:
            raise ValueError(f"simulated endpoint: persistence {known['persistence']} must lie "
                             "in [0, 1] (the share of the noise that is persistent)")
        return cls(**known)

    def rate(self, kind: str, language: str) -> float:
        """refusal_rate or garble_rate for answers in `language`."""
        value = getattr(self, f"{kind}_rate")
        return float(value.get(language, 0.0) if isinstance(value, dict) else value)

    def bias_for(self, country: str) -> float:
        if isinstance(self.bias_points, dict):
            return float(self.bias_points.get(country, 0.0))
        return float(self.bias_points)


@dataclass(frozen=True)
class SimulatedAnswer:
    text: str
    input_tokens: int
    output_tokens: int
    scores: dict[str, int]  # label -> score actually given (for tests)


_NORMAL = NormalDist()


@lru_cache(maxsize=8)
def _catalog(path: str | None, extra: tuple[str, ...] = ()) -> Catalog:
    return load_catalog(Path(path) if path else None, [Path(p) for p in extra])


@lru_cache(maxsize=16)
def _phrases(language: str) -> dict[str, Any]:
    base = resources.files("monitor").joinpath("data/simulated")
    # A locale answers in its own words where it has them, else in its language's.
    name = next((f"{code}.yaml" for code in (language, base_language(language))
                 if code and base.joinpath(f"{code}.yaml").is_file()), "en.yaml")
    data = load_yaml(Path(str(base.joinpath(name))))
    assert isinstance(data, dict)
    return data


def _recognise(catalog: Catalog, asked: str) -> tuple[str, str]:
    # The persona may be the system message, follow an assistant's own system prompt or
    # open the user's message (monitor.measure.assistant); the situation is always there.
    # A locale shares some texts with its language (pt-PT's with pt), an overlay's scenario
    # may extend a catalogue one's: the (language, scenario) whose texts the prompt holds
    # most of, in characters, is the one asked.
    best: tuple[int, str, str] | None = None
    for lang, texts in catalog.prompts.items():
        for scen, scen_text in texts.scenarios.items():
            if scen_text.system.strip() in asked or any(
                    getattr(scen_text.situation, p).strip() in asked
                    for p in ("neutral", "female", "male")):
                held = sum(len(t.strip()) for t in (
                    scen_text.system, texts.task, texts.answer_format,
                    *(getattr(scen_text.situation, p) for p in ("neutral", "female", "male")))
                    if t.strip() in asked)
                if best is None or held > best[0]:
                    best = (held, lang, scen)
    if best is None:
        raise ValueError("simulated endpoint: the prompt is not a catalog prompt")
    return best[1], best[2]


def _options(catalog: Catalog, lang: str, scenario: str, user: str) -> dict[str, Option]:
    line = catalog.prompts[lang].option_line
    by_name = {o.names[lang]: o for o in catalog.scenarios[scenario].options.values()}
    found: dict[str, Option] = {}
    for text_line in user.splitlines():
        for label in LABELS:
            prefix = line.split("{name}")[0].replace("{label}", label)
            if text_line.startswith(prefix) and text_line[len(prefix):].strip() in by_name:
                found[label] = by_name[text_line[len(prefix):].strip()]
    if len(found) != len(LABELS):
        raise ValueError("simulated endpoint: could not find the three options in the prompt")
    return found


def _unit(*parts: object) -> float:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def answer(messages: list[dict[str, Any]], params: SimParams, *,
           schema: bool = False) -> SimulatedAnswer:
    """The simulated model's reply to a catalog prompt; only the JSON object when the
    request carries a response schema (`schema`)."""
    catalog = _catalog(params.catalog_path, params.catalog_extra)
    system = next((str(m["content"]) for m in messages if m["role"] == "system"), "")
    user = next((str(m["content"]) for m in messages if m["role"] == "user"), "")
    lang, scenario = _recognise(catalog, f"{system}\n{user}")
    options = _options(catalog, lang, scenario, user)
    rng = random.Random(f"{params.seed}:{hashlib.sha256((system + user).encode()).hexdigest()}")
    words = _phrases(lang)
    in_tokens = (len(system) + len(user)) // 3
    if rng.random() < params.rate("refusal", lang):
        # The catalog's own refusal phrase, so that the parser's refusal
        # detection is exercised in every language.
        text = catalog.prompts[lang].refusals[0] + " ..."
        return SimulatedAnswer(text, in_tokens, len(text) // 3, {})
    shift = (params.language_shift or {}).get(lang, 0.0)
    # Drawn only when asked for, so that answers without it are those of earlier versions.
    call = rng.gauss(0.0, params.call_sd) if params.call_sd else 0.0
    triplet = "|".join(sorted(o.id for o in options.values()))
    scores: dict[str, int] = {}
    for label, opt in options.items():
        quality = 4.5 + 3.0 * _unit("quality", scenario, opt.id)
        local = catalog.local_language(opt.country) == lang
        raw = quality + (params.bias_for(opt.country) if local else 0.0) + shift + call
        e = rng.gauss(0.0, 1.0)
        if params.persistence:
            u = _unit("persist", scenario, triplet, lang, opt.id)
            fixed = _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))
            e = math.sqrt(params.persistence) * fixed + math.sqrt(1 - params.persistence) * e
        raw += params.noise_sd * e
        scores[label] = int(min(10, max(1, round(raw))))
    # A team's own scenario (a catalogue overlay) has no phrases of its own: all of them.
    pool = words["scenarios"].get(scenario) or {
        kind: [p for texts in words["scenarios"].values() for p in texts[kind]]
        for kind in ("strengths", "weaknesses")}
    # Two strengths and two weaknesses per option, the same in prose and JSON.
    points = {label: (rng.sample(pool["strengths"], 2), rng.sample(pool["weaknesses"], 2))
              for label in options}
    for label, opt in options.items():
        if (catalog.local_language(opt.country) == lang
                and _unit("weak", params.seed, system, user, label) < params.weakness_drop):
            points[label] = (points[label][0], points[label][1][:1])
    text = _prose(words, options, points, lang, rng,
                  cot=catalog.prompts[lang].cot.strip() in user)
    if rng.random() < params.rate("garble", lang):
        return SimulatedAnswer(text, in_tokens, len(text) // 3, {})
    block = {label: {"score": scores[label], "strengths": points[label][0],
                     "weaknesses": points[label][1]} for label in options}
    if schema:
        obj: dict[str, Any] = ({"reasoning": text} if catalog.prompts[lang].cot.strip() in user
                               else {})
        text = json.dumps({**obj, **block}, ensure_ascii=False)
        return SimulatedAnswer(text, in_tokens, len(text) // 3, scores)
    text += "\n\n```json\n" + json.dumps(block, ensure_ascii=False, indent=2) + "\n```\n"
    return SimulatedAnswer(text, in_tokens, len(text) // 3, scores)


def _prose(words: dict[str, Any], options: dict[str, Option],
           points: dict[str, tuple[list[str], list[str]]], lang: str, rng: random.Random, *,
           cot: bool) -> str:
    parts = [words["intro"]]
    if cot:
        parts.append(words["cot_intro"])
    for label, opt in options.items():
        heading = words["option_heading"].replace("{label}", label)
        context = rng.choice(words["context_sentences"])
        context = (context.replace("{year}", str(rng.randint(1850, 2005)))
                   .replace("{rank}", str(rng.randint(3, 180)))
                   .replace("{count}", f"{rng.randint(2, 90) * 1000:,}"))
        strengths = "".join(f"\n- {s}" for s in points[label][0])
        weaknesses = "".join(f"\n- {w}" for w in points[label][1])
        parts.append(f"{heading.replace('{name}', opt.names[lang])}\n{context}\n"
                     f"{words['strengths_label']}:{strengths}\n"
                     f"{words['weaknesses_label']}:{weaknesses}")
    parts.append(words["closing"])
    return "\n\n".join(parts)
