"""An assistant behind its own HTTP API: the request template and where the answer is.

The body is a JSON template whose string values may hold placeholders
({messages} {system} {user} {language} {model} {response_schema}); the answer's
text is found at `response_path`, a small path syntax: keys separated by dots,
list indexes in brackets (`result.messages[-1].text`). Both are checked when the
config loads. {response_schema} is where the API takes a JSON schema of the
answer: with answer_format json_schema (or auto) it is the schema; a call asked
in text leaves a value that is exactly {response_schema} out of the body (its
key too) and blanks it inside a longer text. Without it an http/ target cannot
be asked for a schema, and answer_format json_schema is refused when the config
loads (monitor.config.model).

`mask_url` is how every URL is shown (config check, the target's errors): the
user:password@ and each query value are secrets.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HTTP_PLACEHOLDERS", "PLACEHOLDER_RE", "HttpTarget", "mask_url", "parse_path"]

#: The placeholders of an HTTP target's body template (docs/contract.md).
HTTP_PLACEHOLDERS = ("messages", "system", "user", "language", "model", "response_schema")
PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(HTTP_PLACEHOLDERS) + r")\}")
_PATH_STEP = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_-]*)|\[(-?\d+)\]")


def mask_url(url: str) -> str:
    """`url` with its user:password@ and every query value masked (they are secrets)."""
    parts = urlsplit(url)
    netloc = re.sub(r"^[^@]*@", "***@", parts.netloc)
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)],
                      safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def parse_path(text: str) -> tuple[str | int, ...]:
    """`result.reply[0].text` -> ("result", "reply", 0, "text"): keys and list indexes."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _PATH_STEP.match(text, pos)
        if m is None or (pos == 0 and text.startswith(".")) or (pos > 0 and m.group(1)
                                                                 and text[pos] != "."):
            raise ValueError(f"{text!r} is not a response path; write keys separated by dots "
                             "and list indexes in brackets, e.g. result.messages[-1].text")
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not steps:
        raise ValueError("the response path is empty; e.g. result.reply.text")
    return tuple(steps)


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(PLACEHOLDER_RE.findall(value))
    if isinstance(value, dict):
        return set().union(*(_placeholders(v) for v in value.values()), set())
    if isinstance(value, list):
        return set().union(*(_placeholders(v) for v in value), set())
    return set()


class HttpTarget(BaseModel):
    """An assistant behind its own HTTP API (model `http/<name>`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(pattern=r"^https?://", description="Where the request is sent.")
    method: str = Field("POST", pattern=r"^(POST|PUT)$")
    body: dict[str, Any] = Field(
        default_factory=lambda: {"messages": "{messages}"},
        description="JSON body template; {messages} {system} {user} {language} {model} "
                    "{response_schema}.")
    response_path: str = Field(description="Where the answer's text is in the response JSON.")
    model_path: str | None = Field(None, description="Where a model id is, if it reports one.")

    @field_validator("response_path", "model_path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None:
            parse_path(v)
        return v

    @property
    def takes_schema(self) -> bool:
        """Whether the body has a place for a response schema ({response_schema})."""
        return "response_schema" in _placeholders(self.body)

    @field_validator("body")
    @classmethod
    def _body(cls, v: dict[str, Any]) -> dict[str, Any]:
        used = _placeholders(v)
        if not used & {"messages", "user"}:
            raise ValueError("the body template never sends the question: put \"{messages}\" "
                             "or \"{user}\" in one of its values")
        return v


