"""The request to an assistant behind its own HTTP API, and the answer read out of it.

The LiteLLM custom provider `http/<name>` (monitor.measure.llm) hands the
call here, so that LiteLLM stays the only client the run knows and its
retry, timeout and rate-limit rules apply as for any provider. The body is
the configured template with the placeholders filled in (a value that is
exactly one placeholder becomes that value, so {messages} stays a list;
{response_schema} is the answer's JSON schema when one is asked, else left
out); the answer is the text at `response_path`.

The target speaks for itself: every error names the method and URL (query
values and user:password@ masked; header values are never in it), then what
went wrong in the target's own terms: the HTTP status and the start of the
body; no answer at all; or, at 2xx, where `response_path` stopped, the keys
found there and where the response does hold text. Two exceptions, drawn:

    Exception
    +-- HttpTargetError      an answer that is no usable answer; `status_code`
    |                        (the API's, or 422 for a 2xx without text) lets
    |                        LiteLLM map it: 429 and 5xx are retried, the rest not
    +-- HttpTargetNoAnswer   no HTTP answer (refused, reset, timed out): retried
"""

from __future__ import annotations

import json
from typing import Any

from monitor.config import PLACEHOLDER_RE, HttpTarget, mask_url, parse_path
from monitor.httpio import NoReply, request

__all__ = ["HttpTargetError", "HttpTargetNoAnswer", "ask", "request_of"]

_SHOWN_KEYS = 8  # keys named in an error, at most
_SHOWN_TEXTS = 3  # places of text suggested, at most
_UNSENT = object()  # a value left out of the body


class HttpTargetError(Exception):
    """An answer of an HTTP target that holds no answer; LiteLLM maps it by `status_code`."""

    def __init__(self, message: str, status_code: int, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers


class HttpTargetNoAnswer(Exception):
    """No HTTP answer from the target (LiteLLM maps it to a connection error: retried)."""


def _fill(template: Any, values: dict[str, Any]) -> Any:
    """The body template with its placeholders replaced: a value that is exactly one
    placeholder becomes that value (the messages stay a list), else text is substituted;
    a value that is _UNSENT (the schema of a call asked in text) is left out."""
    if isinstance(template, dict):
        filled = {k: _fill(v, values) for k, v in template.items()}
        return {k: v for k, v in filled.items() if v is not _UNSENT}
    if isinstance(template, list):
        return [v for v in (_fill(v, values) for v in template) if v is not _UNSENT]
    if isinstance(template, str):
        whole = PLACEHOLDER_RE.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return PLACEHOLDER_RE.sub(lambda m: "" if (v := values[m.group(1)]) is _UNSENT else
                                  v if isinstance(v, str) else json.dumps(v, ensure_ascii=False),
                                  template)
    return template


def _path_text(steps: list[str | int]) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps).lstrip(".")


def _walk(data: Any, path: tuple[str | int, ...]) -> tuple[Any, list[str | int]]:
    """(the value at `path` or None, the steps that could be walked)."""
    walked: list[str | int] = []
    for step in path:
        index = isinstance(step, int) and isinstance(data, list) and -len(data) <= step < len(data)
        key = isinstance(step, str) and isinstance(data, dict) and step in data
        if not (index or key):
            return None, walked
        data = data[step]
        walked.append(step)
    return data, walked


def _holds(data: Any) -> str:
    """What a JSON value is, for an error: its keys (never values), a list's length, a type."""
    if isinstance(data, dict):
        keys = sorted(map(str, data))
        more = f" (+{len(keys) - _SHOWN_KEYS} more)" if len(keys) > _SHOWN_KEYS else ""
        return "keys " + ", ".join(keys[:_SHOWN_KEYS]) + more if keys else "no keys"
    if isinstance(data, list):
        return f"a list of {len(data)}"
    return "null" if data is None else f"a {type(data).__name__}"


def _texts(data: Any, at: list[str | int], out: list[tuple[int, str]], depth: int = 0) -> None:
    """Every place in `data` that holds a text of more than a word, as (length, path)."""
    if depth > 12:
        return
    if isinstance(data, str) and len(data.split()) > 1:
        out.append((len(data), _path_text(at)))
    elif isinstance(data, dict):
        for k, v in data.items():
            _texts(v, [*at, str(k)], out, depth + 1)
    elif isinstance(data, list):
        for i, v in enumerate(data[:20]):
            _texts(v, [*at, i], out, depth + 1)


def _no_text(data: Any, target: dict[str, Any]) -> str:
    """Why the response holds no answer at response_path: where the path stopped, what is
    there, and where the response does hold text (longest first)."""
    path = target["response_path"]
    value, walked = _walk(data, target["response_steps"])
    if isinstance(value, str):  # the path is right; the API said nothing
        return f"the text at response_path {path} is empty"
    if len(walked) == len(target["response_steps"]):
        why = f"response_path {path} holds {_holds(value)}"
    else:
        step = target["response_steps"][len(walked)]
        here = _path_text(walked) or "the response"
        missing = f"index [{step}]" if isinstance(step, int) else f"key {step!r}"
        why = (f"response_path {path} stops at {here}: no {missing}; it has "
               f"{_holds(_walk(data, tuple(walked))[0])}")
    found: list[tuple[int, str]] = []
    _texts(data, [], found)
    places = [p for _, p in sorted(found, key=lambda x: -x[0])[:_SHOWN_TEXTS]]
    hint = f"; text is at {', '.join(places)}" if places else ""
    return f"{why}{hint}; fix endpoints[].http.response_path"


def request_of(target: HttpTarget) -> dict[str, Any]:
    """What the provider gets for every call: the target with its paths parsed once (per
    client), not once per call, and the URL as errors show it."""
    return {**target.model_dump(), "response_steps": parse_path(target.response_path),
            "model_steps": parse_path(target.model_path) if target.model_path else None,
            "shown": f"http target {target.method} {mask_url(target.url)}"}


async def ask(target: dict[str, Any], messages: list[dict[str, Any]], *, language: str,
              model: str, headers: dict[str, str], api_key: str | None, timeout_s: float,
              schema: dict[str, Any] | None = None) -> tuple[str, str | None]:
    """(the answer's text, the model id at model_path if any) of one request; `target` is
    request_of(the endpoint's HttpTarget); `schema` the JSON schema of the answer, if asked."""
    system = next((str(m["content"]) for m in messages if m["role"] == "system"), "")
    user = next((str(m["content"]) for m in messages if m["role"] == "user"), "")
    body = _fill(target["body"], {"messages": messages, "system": system, "user": user,
                                  "language": language, "model": model,
                                  "response_schema": _UNSENT if schema is None else schema})
    headers = {"content-type": "application/json", **headers}
    if api_key and api_key != "no-key":
        headers.setdefault("authorization", f"Bearer {api_key}")
    where = target["shown"]
    try:
        reply = await request(target["method"], target["url"], body=body, headers=headers,
                              timeout_s=timeout_s)
    except NoReply as exc:
        raise HttpTargetNoAnswer(f"{where}: no answer ({exc})") from None
    if reply.status >= 300:
        excerpt = " ".join(reply.text.split())[:200]
        raise HttpTargetError(f"{where}: HTTP {reply.status}: {excerpt or '(empty body)'}",
                              reply.status, reply.headers)
    try:
        data = reply.json()
    except ValueError:
        kind = reply.headers.get("content-type", "no content-type")
        raise HttpTargetError(f"{where}: HTTP {reply.status} but the body is not JSON ({kind}, "
                              f"{len(reply.text)} characters)", 422, {}) from None
    text, _ = _walk(data, target["response_steps"])
    if not isinstance(text, str) or not text.strip():
        raise HttpTargetError(f"{where}: HTTP {reply.status} without an answer: "
                              f"{_no_text(data, target)}", 422, {})
    model_id = _walk(data, target["model_steps"])[0] if target["model_steps"] else None
    return text, (None if model_id is None else str(model_id))
