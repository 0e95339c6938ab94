"""The assistant's setup applied to a prompt, and the response schema it may ask for.

The rule (docs/contract.md, monitor.config.assistant): the assistant's own
system prompt is the system message; the probe's persona goes where
`persona` says (system: after the assistant's prompt; user: at the start of
the user's message; off: nowhere). Without a system prompt and persona
`system`, the prompt is the paper's, unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from monitor.config import Setup
from monitor.measure.prompts import Prompt
from monitor.vocab import Persona

__all__ = ["answer_schema", "apply_setup"]


def apply_setup(setup: Setup, prompt: Prompt) -> Prompt:
    own = setup.system_prompts.get(prompt.language, "")
    persona = prompt.system
    if setup.persona == Persona.SYSTEM:
        return replace(prompt, system=f"{own}\n\n{persona}" if own else persona)
    if setup.persona == Persona.USER:
        return replace(prompt, system=own, user=f"{persona}\n\n{prompt.user}")
    return replace(prompt, system=own)


def answer_schema(labels: list[str], *, cot: bool) -> dict[str, Any]:
    """The response schema of answer_format json_schema (OpenAI's `json_schema` object):
    per option its strengths, weaknesses and score; for the chain-of-thought variant a
    reasoning field first, so that the model reasons before it scores."""
    option = {"type": "object", "additionalProperties": False,
              "required": ["strengths", "weaknesses", "score"],
              "properties": {"strengths": {"type": "array", "items": {"type": "string"}},
                             "weaknesses": {"type": "array", "items": {"type": "string"}},
                             "score": {"type": "integer",
                                       "description": "a whole number from 1 to 10"}}}
    props: dict[str, Any] = {"reasoning": {"type": "string"}} if cot else {}
    props.update({label: option for label in labels})
    return {"name": "option_scores", "strict": True,
            "schema": {"type": "object", "additionalProperties": False,
                       "required": list(props), "properties": props}}
