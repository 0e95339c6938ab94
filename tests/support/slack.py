"""A real local HTTP server standing in for a Slack incoming webhook.

slack_sdk's WebhookClient posts JSON to `http://127.0.0.1:<port>/services/T000/B000/XXXX`;
the server records every request and answers from a script: a list of `Answer`s used in
order, the last one repeated once the script is used up. So `[Answer(429, headers=
{"Retry-After": "1"}), Answer(200)]` is "rate limited once, then ok" and `[Answer(500)]`
is "always down".
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.http import LocalServer, QuietHandler

WEBHOOK_PATH = "/services/T000/B000/XXXX"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Posted:
    at: float
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]

    def texts(self) -> list[str]:
        """Every string anywhere in the posted JSON (the fallback text, every block text)."""
        out: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, str):
                out.append(node)
            elif isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(self.body)
        return out


class SlackServer(LocalServer):
    def __init__(self, script: Sequence[Answer]) -> None:
        if not script:
            raise ValueError("a script needs at least one answer")
        self.script = list(script)
        self.requests: list[Posted] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.body()
                with outer._lock:
                    answer = outer.script[min(len(outer.requests), len(outer.script) - 1)]
                    outer.requests.append(Posted(time.monotonic(), self.path,
                                                 self.lower_headers(), json.loads(raw or b"{}")))
                self.reply(answer.status, answer.body.encode(), "text/plain; charset=utf-8",
                           answer.headers)

        super().__init__(Handler, "slack-test-server")

    def url(self, path: str = WEBHOOK_PATH) -> str:
        return self.base + path


@contextmanager
def serve_slack(script: Sequence[Answer] = (Answer(),)) -> Iterator[SlackServer]:
    server = SlackServer(script)
    server.start()
    try:
        yield server
    finally:
        server.stop()
