"""The team's assistant around the probe, as configured: its system prompts, where the
probe's persona goes, the answer format, an HTTP target's request; and the `setup` key
that makes runs comparable.

The paper asks the bare model: the consultant persona is the system message.
An assistant in production has its own system prompt, so when one is
configured (endpoints[].system_prompt or system_prompt_file) the rule is
(monitor.measure.assistant applies it):

- the system message is the assistant's own prompt, exactly as configured;
- the probe's consultant persona (which sets the scenario) goes where
  `persona` says: `user` (the default with a system prompt) puts it at the
  start of the user's message as the asker's context; `system` appends it to
  the assistant's prompt after a blank line; `off` leaves it out.

Everything that changes what the assistant is asked or how it must answer
(the system prompts, the persona's place, the answer format, an HTTP
target's body template and response path) makes up the run's `setup`:
"default" for the paper's setup, else a hash. Runs are compared with a
baseline only when their setup is the baseline's (monitor.watch.baseline).
This module has no heavy imports: the daemon's scheduler process uses it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from monitor.config.model import Endpoint
from monitor.errors import ConfigError
from monitor.vocab import AnswerFormat, Persona, base_language

__all__ = ["DEFAULT_SETUP", "Setup", "reach_advice", "schema_advice", "setup_for"]

#: The setup of the paper (and of every run before setups were stored).
DEFAULT_SETUP = "default"


@dataclass(frozen=True)
class Setup:
    """The assistant's side of every prompt of one run."""

    system_prompts: dict[str, str]  # language -> the assistant's system prompt
    persona: Persona
    answer_format: AnswerFormat
    target: str  # the HTTP target's body template and response path, "" for LiteLLM models

    @property
    def key(self) -> str:
        """What makes runs comparable: "default", or a hash of everything above."""
        if (not self.system_prompts and self.persona == Persona.SYSTEM
                and self.answer_format == AnswerFormat.TEXT and not self.target):
            return DEFAULT_SETUP
        blob = json.dumps({"system": self.system_prompts, "persona": self.persona,
                           "format": self.answer_format, "target": self.target},
                          sort_keys=True, ensure_ascii=False)
        return "setup-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

def setup_for(endpoint: Endpoint, languages: list[str], catalog_languages: list[str]) -> Setup:
    """The endpoint's setup for a run in `languages`; ConfigError when one of their prompt
    files is missing. The key covers the prompts of every catalog language that has one, so
    that a run of fewer languages stays comparable with the baseline."""
    prompts: dict[str, str] = {}
    for lang in catalog_languages:
        try:
            text = endpoint.system_prompt_for(lang)
        except ConfigError:
            if lang in languages:
                raise
            continue
        base = base_language(lang)
        if text is not None and not (base is not None and prompts.get(base) == text):
            # A locale asked with its language's prompt adds nothing to the key: the
            # setup of a deployment without locale files stays what it was.
            prompts[lang] = text
    persona = endpoint.persona or (Persona.USER if endpoint.has_system_prompt else Persona.SYSTEM)
    target = (json.dumps({"body": endpoint.http.body, "response": endpoint.http.response_path},
                         sort_keys=True, ensure_ascii=False) if endpoint.http else "")
    return Setup(prompts, persona, endpoint.answer_format, target)


def schema_advice(model: str) -> str:
    """What to change when no answer of an endpoint could be read: ask for the scores with
    a response schema. An http/ target takes one only where its body says (a
    "{response_schema}" placeholder), so it is told that; the others set answer_format."""
    if model.startswith("http/"):
        return ("ask for the scores with a response schema, if your API takes one: put "
                "\"{response_schema}\" where it does in the endpoint's http.body and set "
                "answer_format: json_schema")
    return ("ask for the scores with a response schema: set the endpoint's answer_format: "
            "json_schema (or auto)")


def reach_advice(model: str) -> str:
    """What to check when no call of an endpoint was answered."""
    if model.startswith("http/"):
        return "check the endpoint's http.url, headers_env and key"
    return "check the endpoint's model, api_base and key"
