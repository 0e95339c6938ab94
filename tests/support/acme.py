"""A real local HTTP server for a team's own assistant API, which is not OpenAI's protocol.

POST /api/v2/ask with {"locale", "instructions", "input": {"text"}, ...} and the
header X-Acme-Key; the answer is {"output": {"reply": {"content"}, "engine"}}.
It answers like the simulated model (so the monitor can parse and measure it)
and records every request. A wrong key gets a 401 whose body echoes the key it
was sent, as careless APIs do, so that tests can check the monitor masks it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.http import LocalServer, QuietHandler

PATH = "/api/v2/ask"

#: The endpoint's `http:` section for this server.
BODY = {"locale": "{language}", "instructions": "{system}", "input": {"text": "{user}"},
        "meta": {"client": "bias-monitor", "asked": "Question: {user}"}}


@dataclass
class AcmeRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased


class AcmeServer(LocalServer):
    def __init__(self, key: str, *, status: int = 200, retry_after: str | None = None,
                 fail_first: int = 0, sim: dict[str, Any] | None = None) -> None:
        self.key = key
        self.requests: list[AcmeRequest] = []
        self.fail_first = fail_first  # answer this many requests with `status` first
        self._lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.body() or b"{}")
                req = AcmeRequest(self.path, body, self.lower_headers())
                with outer._lock:
                    outer.requests.append(req)
                    failing = len(outer.requests) <= outer.fail_first
                if req.headers.get("x-acme-key") != outer.key:
                    sent = req.headers.get("x-acme-key", "")
                    self.reply(401, json.dumps({"error": f"bad key {sent}"}).encode(),
                               "application/json")
                    return
                if failing:
                    extra = {"retry-after": retry_after} if retry_after else {}
                    self.reply(status, b'{"error": "busy"}', "application/json", extra)
                    return
                try:
                    payload = json.dumps(outer.answer(body)).encode()
                except (KeyError, ValueError) as exc:  # not a catalog prompt
                    self.reply(500, json.dumps({"error": str(exc)}).encode(),
                               "application/json")
                    return
                self.reply(200, payload, "application/json")

        super().__init__(Handler, "acme-test-server")
        self.url = f"{self.base}{PATH}"
        self.sim = sim or {}

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        from monitor.measure.simulated import SimParams, answer

        messages = [{"role": "system", "content": body.get("instructions", "")},
                    {"role": "user", "content": body["input"]["text"]}]
        reply = answer(messages, SimParams.from_params(self.sim))
        return {"output": {"reply": {"content": reply.text, "format": "markdown"},
                           "engine": "acme-assistant-7"}, "trace": {"id": "t-1"}}


def http_section(server: AcmeServer, **over: Any) -> dict[str, Any]:
    return {"url": server.url, "body": BODY, "response_path": "output.reply.content",
            "model_path": "output.engine", **over}


@contextmanager
def serve_acme(key: str, **kw: Any) -> Iterator[AcmeServer]:
    server = AcmeServer(key, **kw)
    server.start()
    try:
        yield server
    finally:
        server.stop()
