"""A real local HTTP server speaking the OpenAI chat-completions protocol.

LiteLLM reaches it as `openai/<name>` with `api_base=http://127.0.0.1:<port>/v1`.
Tests give it a `responder(body) -> Reply` and read back what was asked.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.http import LocalServer, QuietHandler


@dataclass
class Reply:
    """What the server sends back: a chat answer, or any status / raw body."""

    text: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent as-is instead of a completion body
    delay_s: float = 0.0
    model: str | None = "test-model-2026-01"  # None: the body names no model
    fingerprint: str | None = "fp_test"


@dataclass
class Request:
    at: float
    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased
    wall: float = 0.0  # time.time() at arrival (for readers in other processes)

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.body["messages"] if m["role"] == "system"), "")

    @property
    def user(self) -> str:
        return next((m["content"] for m in self.body["messages"] if m["role"] == "user"), "")


def options_in(user: str) -> dict[str, str]:
    """label -> option name, read from the prompt's 'A. name' lines."""
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^([ABC])\. (.+)$", user, re.MULTILINE)}


def completion_body(reply: Reply, prompt_tokens: int = 120) -> dict[str, Any]:
    named = {} if reply.model is None else {"model": reply.model}
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
        **named, "system_fingerprint": reply.fingerprint,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.text}}],
        "usage": {"prompt_tokens": prompt_tokens,
                  "completion_tokens": len(reply.text or "") // 4,
                  "total_tokens": prompt_tokens + len(reply.text or "") // 4},
    }


class OpenAIServer(LocalServer):
    def __init__(self, responder: Callable[[Request], Reply]) -> None:
        self.responder = responder
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                req = Request(time.monotonic(), json.loads(self.body() or b"{}"),
                              self.lower_headers(), time.time())
                with outer._lock:
                    outer.requests.append(req)
                reply = outer.responder(req)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.raw if reply.raw is not None else json.dumps(
                    completion_body(reply) if reply.status == 200 else
                    {"error": {"message": f"status {reply.status}", "type": "test"}}).encode()
                self.reply(reply.status, payload, "application/json", reply.headers)

        super().__init__(Handler, "openai-test-server")
        self.api_base = f"{self.base}/v1"


@contextmanager
def serve(responder: Callable[[Request], Reply]) -> Iterator[OpenAIServer]:
    server = OpenAIServer(responder)
    server.start()
    try:
        yield server
    finally:
        server.stop()
