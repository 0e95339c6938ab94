"""Every request the monitor makes says `User-Agent: bias-monitor/<version>` and nothing
of the host it runs on: an OpenAI-compatible endpoint (LiteLLM over the OpenAI SDK),
an assistant's own HTTP API, a JSON webhook and Slack, each a real local server."""

from __future__ import annotations

import asyncio
import json
import platform

import pytest

from monitor import USER_AGENT, __version__
from monitor.alerts.sinks import Message, Outcome
from monitor.alerts.slack import SlackNotifier
from monitor.config import Endpoint, Slack
from monitor.httpio import post_json
from monitor.measure.llm import LLMClient
from tests.support.acme import http_section, serve_acme
from tests.support.openai import Reply, serve
from tests.support.slack import serve_slack

MESSAGES = [{"role": "user", "content": "Score A, B and C."}]


def _host_details() -> list[str]:
    """What clients put in their headers by default: the kernel release, the Python
    version, the operating system and the architecture."""
    return [platform.release(), platform.python_version(), platform.system(),
            platform.machine(), "x64"]


def _check(headers: dict[str, str]) -> None:
    assert headers["user-agent"] == USER_AGENT == f"bias-monitor/{__version__}"
    for value in headers.values():
        for detail in _host_details():
            assert detail not in value, (detail, headers)


def test_an_openai_compatible_call() -> None:
    with serve(lambda _: Reply(json.dumps({"A": 1}))) as server:
        ep = Endpoint(name="e", model="openai/m", api_base=server.api_base, max_retries=0)
        assert asyncio.run(LLMClient(ep).complete(MESSAGES)).error is None
        [req] = server.requests
    _check(req.headers)


def test_an_assistants_own_api_and_its_own_user_agent_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_KEY", "k")
    monkeypatch.setenv("ACME_UA", "campus-probe/1")
    with serve_acme("k") as server:
        ep = Endpoint(name="acme", model="http/acme", http=http_section(server),
                      headers_env={"X-Acme-Key": "ACME_KEY"}, max_retries=0)
        asyncio.run(LLMClient(ep).complete(MESSAGES, language="en"))
        mine = Endpoint(name="acme", model="http/acme", http=http_section(server),
                        headers_env={"X-Acme-Key": "ACME_KEY", "user-agent": "ACME_UA"},
                        max_retries=0)
        asyncio.run(LLMClient(mine).complete(MESSAGES, language="en"))
        first, second = server.requests
    _check(first.headers)
    assert not any(h.startswith("x-stainless") for h in first.headers)
    assert second.headers["user-agent"] == "campus-probe/1"


def test_a_webhook_and_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_slack() as server:
        post_json(server.url("/hook"), {"x": 1}, headers={}, timeout_s=5)
        monkeypatch.setenv("SLACK_HOOK_FOR_TEST", server.url())
        notifier = SlackNotifier(Slack(webhook_url_env="SLACK_HOOK_FOR_TEST"), timeout_s=5)
        message = Message(endpoint="prod", notes=["budget reached"])
        assert notifier.deliver(message) == Outcome.DELIVERED
        hook, slack = server.requests
    for posted in (hook, slack):
        _check(posted.headers)
