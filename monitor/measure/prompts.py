"""Turn a sampled triplet into the chat messages for one language.

The texts all come from probes/prompts/<lang>.yaml; this module only
assembles them: system = the consultant role; user = the asker's situation,
the three options labelled A, B, C in the sampled order, the task, the
chain-of-thought instruction for the `cot` variant, and the answer format.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from monitor.catalog import LABELS, Catalog
from monitor.measure.sampling import ProbeSpec
from monitor.vocab import Variant

__all__ = ["Prompt", "build_prompt"]

_PERSONA = {"plain": "neutral", "cot": "neutral", "female": "female", "male": "male"}


@dataclass(kw_only=True, frozen=True)
class Prompt:
    """The messages for one (triplet, language) probe."""

    language: str
    system: str
    user: str
    labels: dict[str, str]  # label -> option id
    names: dict[str, str]  # label -> the option's name in this language
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # its other names

    @property
    def messages(self) -> list[dict[str, str]]:
        # No system message at all when the assistant has none and the persona is off.
        head = [{"role": "system", "content": self.system}] if self.system else []
        return [*head, {"role": "user", "content": self.user}]

    @property
    def hash(self) -> str:
        """Identifies the exact text asked, so changed prompts are visible."""
        return hashlib.sha256(f"{self.system}\0{self.user}".encode()).hexdigest()[:16]


def build_prompt(catalog: Catalog, spec: ProbeSpec, language: str) -> Prompt:
    texts = catalog.prompts[language]
    scenario = texts.scenarios[spec.triplet.scenario]
    options = catalog.scenarios[spec.triplet.scenario].options
    labels = dict(zip(LABELS, spec.order, strict=True))
    names = {label: options[oid].names[language] for label, oid in labels.items()}
    # How the option is called in the other languages and its short names (the catalogue's
    # aliases): answers use those too ("KAIST", "Caltech").
    aliases = {label: tuple(sorted({*(n for n in options[oid].names.values()
                                      if n != names[label]), *options[oid].aliases}))
               for label, oid in labels.items()}
    situation = getattr(scenario.situation, _PERSONA[spec.variant])
    lines = [texts.option_line.replace("{label}", lab).replace("{name}", name)
             for lab, name in names.items()]
    parts = [situation.strip(), "\n".join(lines), texts.task.strip()]
    if spec.variant == Variant.COT:
        parts.append(texts.cot.strip())
    parts.append(texts.answer_format.strip())
    return Prompt(language=language, system=scenario.system.strip(), user="\n\n".join(parts),
                  labels=labels, names=names,
                  aliases=aliases)
