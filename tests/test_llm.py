"""LLMClient against a real local OpenAI-protocol server through LiteLLM.

No mocks of LiteLLM: every call goes over HTTP to tests/support/openai.py.
The client's injected knobs are turned: its backoff base (retries take tenths
of a second instead of seconds) and, in one test, its sleep and jitter; a
Retry-After header is honoured as the server sends it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog
from monitor.config import Endpoint
from monitor.measure.calls import CallResult
from monitor.measure.llm import LLMClient
from monitor.measure.prompts import Prompt, build_prompt
from monitor.measure.sampling import Sampler
from monitor.yamlfile import load_yaml
from tests.support.openai import Reply, Request, completion_body, serve
from tests.support.process import free_port

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello."}]
BACKOFF_BASE_S = 0.2
CANARY = "sk-canary-9f8e7d"


def _endpoint(api_base: str, **over: Any) -> Endpoint:
    fields: dict[str, Any] = {"name": "t", "model": "openai/test-model", "api_base": api_base,
                              "api_key_env": None, "max_retries": 0, "timeout_s": 5,
                              "rpm": 100_000, "max_concurrency": 8, **over}
    return Endpoint(**fields)


def _complete(endpoint: Endpoint, messages: list[dict[str, str]] = MESSAGES,
              **client: Any) -> CallResult:
    async def go() -> CallResult:
        return await LLMClient(endpoint, **{"backoff_base_s": BACKOFF_BASE_S, **client}
                               ).complete(messages)

    return asyncio.run(go())


def _sequence(*replies: Reply) -> Callable[[Request], Reply]:
    """Answer with the replies in order, then repeat the last one."""
    lock = threading.Lock()
    count = 0

    def responder(_: Request) -> Reply:
        nonlocal count
        with lock:
            i = min(count, len(replies) - 1)
            count += 1
        return replies[i]

    return responder




# --- no network at import ----------------------------------------------------

_AUDIT_SCRIPT = """
import json, os, sys
WATCHED = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname"}
events = []

def hook(event, args):
    if event in WATCHED:
        events.append([event, repr(args)[:200]])

sys.addaudithook(hook)
exec(sys.argv[1])
print(json.dumps({"events": events,
                  "cost_map": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")}))
"""


def _audited(statement: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proc = subprocess.run([sys.executable, "-c", _AUDIT_SCRIPT, statement], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_importing_the_client_opens_no_socket_and_resolves_no_name() -> None:
    out = _audited("import monitor.measure.llm")
    assert out["events"] == []
    assert out["cost_map"] == "True"  # set by monitor.measure.llm itself, not inherited


@pytest.mark.parametrize("event", ["socket.getaddrinfo", "socket.connect"])
def test_the_import_audit_does_see_network_use(event: str) -> None:
    statement = {
        "socket.getaddrinfo": "import socket; socket.getaddrinfo('localhost', 80)",
        "socket.connect": "import socket; socket.socket().connect_ex(('127.0.0.1', "
                          f"{free_port()}))",
    }[event]
    out = _audited(statement)
    assert event in [e[0] for e in out["events"]]


# --- successful calls ------------------------------------------------------------

def test_success_returns_text_usage_model_and_fingerprint() -> None:
    reply = Reply("Hello there, traveller.", model="test-model-2026-01", fingerprint="fp_abc123")
    with serve(lambda _: reply) as server:
        result = _complete(_endpoint(server.api_base))
        assert len(server.requests) == 1
        sent = server.requests[0].body
    usage = completion_body(reply)["usage"]
    assert result.ok and result.error is None
    assert result.text == "Hello there, traveller."
    assert result.latency_s > 0
    assert result.input_tokens == usage["prompt_tokens"] == 120
    assert result.output_tokens == usage["completion_tokens"]
    assert result.model_id == "test-model-2026-01"
    assert result.fingerprint == "fp_abc123"
    assert result.attempts == 1
    assert result.cost_usd is None  # LiteLLM has no price for this model
    assert sent["model"] == "test-model"
    assert sent["messages"] == MESSAGES


def test_cost_is_computed_from_configured_prices() -> None:
    reply = Reply("A fairly short answer of some length." * 3)
    with serve(lambda _: reply) as server:
        result = _complete(_endpoint(server.api_base,
                                     cost_per_1k_tokens={"input": 1.0, "output": 2.0}))
    usage = completion_body(reply)["usage"]
    assert result.ok
    expected = (usage["prompt_tokens"] * 1.0 + usage["completion_tokens"] * 2.0) / 1000
    assert result.cost_usd == pytest.approx(expected)
    assert result.cost_usd == pytest.approx((120 + 2 * 27) / 1000)


def test_a_model_litellm_can_price_gets_its_price_without_configured_prices() -> None:
    """The cost LiteLLM computed for the response is the one stored (it is not priced a
    second time): gpt-4o-mini's packaged list price, from the tokens the server reported."""
    reply = Reply("A fairly short answer of some length." * 3, model="gpt-4o-mini")
    with serve(lambda _: reply) as server:
        result = _complete(_endpoint(server.api_base, model="openai/gpt-4o-mini"))
    usage = completion_body(reply)["usage"]
    assert result.ok and result.cost_usd is not None
    # $0.15 per 1M input tokens and $0.60 per 1M output tokens in LiteLLM's packaged map.
    expected = (usage["prompt_tokens"] * 0.15 + usage["completion_tokens"] * 0.60) / 1e6
    assert result.cost_usd == pytest.approx(expected)


def test_endpoint_params_reach_the_server() -> None:
    with serve(lambda _: Reply("ok")) as server:
        result = _complete(_endpoint(server.api_base,
                                     params={"temperature": 0.25, "max_tokens": 77}))
        body = server.requests[0].body
    assert result.ok
    assert body["temperature"] == 0.25
    assert body["max_tokens"] == 77


# --- retries -----------------------------------------------------------------------

def test_429_with_retry_after_is_honoured_then_succeeds() -> None:
    responder = _sequence(Reply(status=429, headers={"Retry-After": "1"}), Reply("finally"))
    with serve(responder) as server:
        result = _complete(_endpoint(server.api_base, max_retries=3))
        at = [r.at for r in server.requests]
    assert result.ok and result.text == "finally"
    assert result.attempts == 2
    assert len(at) == 2
    # The backoff alone would be 0.1-0.3 s here: the wait is the server's 1 s.
    assert at[1] - at[0] >= 0.9


def test_503_twice_then_success() -> None:
    responder = _sequence(Reply(status=503), Reply(status=503), Reply("up again"))
    with serve(responder) as server:
        result = _complete(_endpoint(server.api_base, max_retries=3))
        n = len(server.requests)
    assert result.ok and result.text == "up again"
    assert result.attempts == 3
    assert n == 3


def test_500_always_gives_up_after_max_retries_with_a_short_one_line_error() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # the backoff is recorded, not waited for
        slept.append(seconds)

    message = "internal failure\nwith a traceback\n\tand more " + "x" * 2000
    raw = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
    with serve(lambda _: Reply(status=500, raw=raw)) as server:
        # Jitter at its midpoint (factor 1.0), so the exponential backoff is exact.
        result = _complete(_endpoint(server.api_base, max_retries=2), sleep=sleep,
                           jitter=lambda: 0.5)
        at = [r.at for r in server.requests]
    assert not result.ok and result.text is None
    assert result.attempts == 3
    assert len(at) == 3  # LiteLLM's and the SDK's own retries are off
    assert result.error is not None
    assert "\n" not in result.error and "\t" not in result.error
    assert 0 < len(result.error) <= 300
    assert "internal failure with a traceback" in result.error
    # Exponential backoff: the base, then twice the base.
    assert slept == [BACKOFF_BASE_S, 2 * BACKOFF_BASE_S]


def test_401_is_not_retried() -> None:
    with serve(lambda _: Reply(status=401)) as server:
        result = _complete(_endpoint(server.api_base, max_retries=3))
        n = len(server.requests)
    assert not result.ok
    assert n == 1
    assert result.attempts == 1
    assert result.error is not None and "authentication" in result.error.lower()


def test_timeout_ends_a_call_the_server_never_answers() -> None:
    never = threading.Event()  # the server holds the request until the test ends

    def hold(_: Request) -> Reply:
        never.wait(timeout=120)
        return Reply("too late")

    try:
        with serve(hold) as server:
            result = _complete(_endpoint(server.api_base, timeout_s=0.5, max_retries=0))
            n = len(server.requests)
    finally:
        never.set()
    # Only the client's timeout can have ended it: the answer never came.
    assert not result.ok
    assert result.error is not None and "timeout" in result.error.lower()
    assert result.attempts == 1
    assert n == 1


def test_connection_refused_is_retried_then_reported() -> None:
    endpoint = _endpoint(f"http://127.0.0.1:{free_port()}/v1", max_retries=2, timeout_s=2)
    result = _complete(endpoint)
    assert not result.ok
    assert result.text is None
    assert result.attempts == endpoint.max_retries + 1
    assert result.error is not None and "\n" not in result.error


# --- malformed answers never raise ----------------------------------------------------

@pytest.mark.parametrize("raw", [
    b"not json",
    json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0,
                                         "total_tokens": 3}}).encode(),
    json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": None}}]}).encode(),
], ids=["not-json", "empty-choices", "null-content"])
def test_malformed_bodies_give_an_error_result(raw: bytes) -> None:
    with serve(lambda _: Reply(raw=raw)) as server:
        result = _complete(_endpoint(server.api_base))
    assert isinstance(result, CallResult)
    assert not result.ok
    assert result.error
    assert result.text is None


# --- the API key ---------------------------------------------------------------------

def test_api_key_is_sent_as_bearer_and_masked_in_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY_CANARY", CANARY)

    def echo_key(req: Request) -> Reply:
        body = {"error": {"message": f"Invalid key: {req.headers.get('authorization')}",
                          "type": "invalid_request_error"}}
        return Reply(status=401, raw=json.dumps(body).encode())

    with serve(lambda _: Reply("ok")) as server:
        ok = _complete(_endpoint(server.api_base, api_key_env="TEST_KEY_CANARY"))
        auth_ok = server.requests[0].headers.get("authorization")
    with serve(echo_key) as server:
        bad = _complete(_endpoint(server.api_base, api_key_env="TEST_KEY_CANARY"))
        auth_bad = server.requests[0].headers.get("authorization")
    assert ok.ok
    assert auth_ok == auth_bad == f"Bearer {CANARY}"
    assert not bad.ok and bad.error is not None
    assert "Invalid key" in bad.error  # the server's message is kept ...
    assert CANARY not in bad.error  # ... with the key masked
    assert "9f8e7d" not in bad.error


# --- the simulated provider -------------------------------------------------------------

def _prompt(catalog: Catalog, language: str) -> Prompt:
    sampler = Sampler(catalog, scenarios=["university", "relocation", "travel"],
                      variants=["plain"], seed=0, triplets_per_run=3)
    return build_prompt(catalog, sampler.sample(0)[1], language)


def _phrase(language: str, key: str) -> str:
    data = load_yaml(Path(str(resources.files("monitor").joinpath(
        f"data/simulated/{language}.yaml"))))
    assert isinstance(data, dict)
    return str(data[key])


def _simulated(seed: int) -> Endpoint:
    return Endpoint(name="sim", model="simulated/demo",
                    params={"bias_points": 0.0, "noise_sd": 0.0, "seed": seed})


@pytest.mark.parametrize("language", ["ja", "fr"])
def test_simulated_endpoint_answers_in_the_prompt_language(
        shipped_catalog: Catalog, language: str) -> None:
    prompt = _prompt(shipped_catalog, language)
    first = _complete(_simulated(1), prompt.messages)
    again = _complete(_simulated(1), prompt.messages)
    other = _complete(_simulated(2), prompt.messages)
    assert first.ok and first.text is not None
    assert first.text.startswith(_phrase(language, "intro"))
    assert _phrase("en", "intro") not in first.text
    for name in prompt.names.values():
        assert name in first.text
    block = first.text.split("```json", 1)[1].split("```", 1)[0]
    scores = json.loads(block)
    assert set(scores) == {"A", "B", "C"}
    assert all(1 <= v["score"] <= 10 for v in scores.values())
    assert first.model_id is not None and first.model_id.startswith("simulated/")
    assert first.attempts == 1
    assert first.input_tokens and first.output_tokens
    assert again.text == first.text  # same seed, same answer
    assert other.ok and other.text != first.text


# --- concurrency -------------------------------------------------------------------------

def test_max_concurrency_bounds_requests_in_flight_at_the_server() -> None:
    lock = threading.Lock()
    in_flight = 0
    peak = 0

    def slow(_: Request) -> Reply:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.3)
        with lock:
            in_flight -= 1
        return Reply("done")

    async def six(endpoint: Endpoint) -> list[CallResult]:
        client = LLMClient(endpoint, backoff_base_s=BACKOFF_BASE_S)
        return list(await asyncio.gather(*(client.complete(MESSAGES) for _ in range(6))))

    with serve(slow) as server:
        results = asyncio.run(six(_endpoint(server.api_base, max_concurrency=2)))
        n = len(server.requests)
    assert all(r.ok for r in results)
    assert n == 6
    assert peak == 2  # bounded, and calls do run in parallel up to the bound
