"""The request to an assistant behind its own HTTP API, and the answer read out of it.

The LiteLLM custom provider `http/<name>` (monitor.measure.llm) hands the
call here, so that LiteLLM stays the only client the run knows and its
retry, timeout and rate-limit rules apply as for any provider. The body is
the configured template with the placeholders filled in (a value that is
exactly one placeholder becomes that value, so {messages} stays a list);
the answer is the text at `response_path`. A non-2xx status raises with its
code and headers, which LiteLLM maps to its exceptions (429 and 5xx are
retried; a 401 or a wrong path is not).
"""

from __future__ import annotations

import json
from typing import Any

from monitor.config import PLACEHOLDER_RE, HttpTarget, parse_path
from monitor.httpio import request

__all__ = ["HttpTargetError", "ask", "request_of"]

class HttpTargetError(Exception):
    """A non-2xx answer of an HTTP target; LiteLLM maps it by `status_code`."""

    def __init__(self, message: str, status_code: int, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers


def _fill(template: Any, values: dict[str, Any]) -> Any:
    """The body template with its placeholders replaced: a value that is exactly one
    placeholder becomes that value (the messages stay a list), else text is substituted."""
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, values) for v in template]
    if isinstance(template, str):
        whole = PLACEHOLDER_RE.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return PLACEHOLDER_RE.sub(lambda m: v if isinstance(v := values[m.group(1)], str)
                                else json.dumps(v, ensure_ascii=False), template)
    return template


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        index = isinstance(step, int) and isinstance(data, list) and -len(data) <= step < len(data)
        key = isinstance(step, str) and isinstance(data, dict) and step in data
        if not (index or key):
            return None
        data = data[step]
    return data


def _shape(data: Any) -> str:
    """What the response holds at its top (keys or type), for an error that helps."""
    if isinstance(data, dict):
        return "keys " + ", ".join(sorted(map(str, data))[:8])
    return type(data).__name__


def request_of(target: HttpTarget) -> dict[str, Any]:
    """What the provider gets for every call: the target with its paths parsed once (per
    client), not once per call."""
    return {**target.model_dump(), "response_steps": parse_path(target.response_path),
            "model_steps": parse_path(target.model_path) if target.model_path else None}


async def ask(target: dict[str, Any], messages: list[dict[str, Any]], *, language: str,
          model: str, headers: dict[str, str], api_key: str | None,
          timeout_s: float) -> tuple[str, str | None]:
    """(the answer's text, the model id at model_path if any) of one request; `target` is
    request_of(the endpoint's HttpTarget)."""
    system = next((str(m["content"]) for m in messages if m["role"] == "system"), "")
    user = next((str(m["content"]) for m in messages if m["role"] == "user"), "")
    body = _fill(target["body"], {"messages": messages, "system": system, "user": user,
                                  "language": language, "model": model})
    headers = {"content-type": "application/json", **headers}
    if api_key and api_key != "no-key":
        headers.setdefault("authorization", f"Bearer {api_key}")
    reply = await request(target["method"], target["url"], body=body, headers=headers,
                          timeout_s=timeout_s)
    if reply.status >= 300:
        raise HttpTargetError(f"HTTP {reply.status} from the assistant's API: "
                              f"{reply.text[:200]}", reply.status, reply.headers)
    try:
        data = reply.json()
    except ValueError:
        raise HttpTargetError("the assistant's API answered with something that is not "
                              "JSON", 422, {}) from None
    text = _at(data, target["response_steps"])
    if not isinstance(text, str):
        raise HttpTargetError(f"no text at response_path {target['response_path']} "
                              f"(the response has {_shape(data)}); fix "
                              "endpoints[].http.response_path", 422, {})
    model_id = _at(data, target["model_steps"]) if target["model_steps"] else None
    return text, (None if model_id is None else str(model_id))
