"""The LLM client: the only module that imports litellm.

- No network at import: LITELLM_LOCAL_MODEL_COST_MAP is set before litellm
  is imported, so its price list comes from the package, not the internet.
- LiteLLM's own retries (and the OpenAI SDK's) are off; this client retries
  a bounded number of times with exponential backoff and jitter, honouring a
  Retry-After header, and only for errors that can pass (429, 5xx, timeouts,
  connection errors). Every attempt goes through the endpoint's RateLimiter.
- A call never raises: it returns a CallResult with the text or the error.
  Error texts are one line, truncated, with the API key masked.
- `simulated/<profile>` is registered as a LiteLLM custom provider, so the
  demo endpoint goes through exactly the same path as a real one.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before the import: no network

import litellm
from litellm.llms.custom_llm import CustomLLM

from monitor.config import Endpoint
from monitor.measure.ratelimit import RateLimiter
from monitor.measure.simulated import SimParams
from monitor.measure.simulated import answer as simulated_answer

__all__ = ["CallResult", "ChatClient", "LLMClient"]

# Per-call logging and callbacks cost CPU and could leak prompts to logs.
litellm.suppress_debug_info = True
litellm.telemetry = False
litellm.turn_off_message_logging = True
litellm.drop_params = True  # a provider without `temperature` must not fail the probe
# A call cancelled (shutdown) while LiteLLM builds it in its executor thread leaves
# the coroutine that would have sent the request unawaited: nothing was sent, so
# the warning at shutdown tells the user nothing.
warnings.filterwarnings("ignore", message=r"coroutine '\w+\.acompletion' was never awaited",
                        category=RuntimeWarning)

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 60.0


@dataclass(frozen=True)
class CallResult:
    """What one probe call returned (or why it failed)."""

    text: str | None
    error: str | None
    latency_s: float
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    model_id: str | None
    fingerprint: str | None
    attempts: int

    @property
    def ok(self) -> bool:
        return self.error is None


class ChatClient(Protocol):
    """What a run needs of a client: one chat completion that never raises."""

    async def complete(self, messages: list[dict[str, str]]) -> CallResult: ...


class _Simulated(CustomLLM):
    async def acompletion(  # type: ignore[override]  # litellm passes keywords only
            self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        response = kwargs["model_response"]
        optional = dict(kwargs.get("optional_params") or {})
        params = SimParams.from_params({k: v for k, v in optional.items()
                                        if k not in ("max_retries", "stream")})
        # Off the event loop: the catalog load on first use is a few ms of IO.
        reply = await asyncio.to_thread(simulated_answer, messages, params)
        response.choices[0].message.content = reply.text
        response.model = f"simulated/{model}"
        response.system_fingerprint = f"sim-{params.seed}"
        response.usage = litellm.Usage(prompt_tokens=reply.input_tokens,
                                       completion_tokens=reply.output_tokens,
                                       total_tokens=reply.input_tokens + reply.output_tokens)
        return response

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the simulated endpoint is async only")


litellm.custom_provider_map = [
    *[p for p in litellm.custom_provider_map if p.get("provider") != "simulated"],
    {"provider": "simulated", "custom_handler": _Simulated()},
]


class LLMClient:
    """Calls one endpoint with its concurrency, rpm, timeout and retry limits
    (a ChatClient). The clock, the sleep and the backoff jitter are injected so
    that tests run the retry schedule without waiting for it."""

    def __init__(self, endpoint: Endpoint, *, extra_params: dict[str, Any] | None = None,
                 limiter: RateLimiter | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random,
                 backoff_base_s: float | None = None) -> None:
        self.endpoint = endpoint
        self.limiter = limiter or RateLimiter(endpoint.rpm, endpoint.max_concurrency,
                                              clock=clock, sleep=sleep)
        self._params = {**endpoint.params, **(extra_params or {})}
        self._key = endpoint.api_key()
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
        self._backoff_base_s = _BACKOFF_BASE_S if backoff_base_s is None else backoff_base_s

    async def complete(self, messages: list[dict[str, str]]) -> CallResult:
        ep = self.endpoint
        started = self._clock()
        error = "not attempted"
        for attempt in range(1, ep.max_retries + 2):
            wait: float | None = None
            try:
                async with self.limiter:
                    t0 = self._clock()
                    # asyncio.timeout, not wait_for: no extra task per call.
                    async with asyncio.timeout(ep.timeout_s + 5):
                        response = await self._call(messages)
                    latency = self._clock() - t0
                return self._result(response, latency, attempt)
            except TimeoutError:
                error = f"timeout after {ep.timeout_s:g}s"
            except Exception as exc:
                error = self._describe(exc)
                status = getattr(exc, "status_code", None)
                if isinstance(status, int) and 400 <= status < 500 and status not in _RETRY_STATUS:
                    break  # auth, bad request, unknown model: retrying cannot help
                wait = _retry_after(exc)
            if attempt > ep.max_retries:
                break
            backoff = min(_BACKOFF_CAP_S, self._backoff_base_s * 2 ** (attempt - 1))
            await self._sleep(wait if wait is not None else backoff * (0.5 + self._jitter()))
        return CallResult(None, error, self._clock() - started, None, None, None, None, None,
                          attempt)

    async def _call(self, messages: list[dict[str, str]]) -> Any:
        ep = self.endpoint
        kwargs: dict[str, Any] = {"model": ep.model, "messages": messages,
                                  "timeout": ep.timeout_s, "num_retries": 0, "max_retries": 0,
                                  **self._params}
        if ep.api_base:
            kwargs["api_base"] = ep.api_base
        if self._key:
            kwargs["api_key"] = self._key
        elif ep.api_base:  # a self-hosted server without auth; the SDK insists on a key
            kwargs["api_key"] = "no-key"
        return await litellm.acompletion(**kwargs)

    def _result(self, response: Any, latency: float, attempts: int) -> CallResult:
        choices = getattr(response, "choices", None) or []
        text = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        usage = getattr(response, "usage", None)
        tin = getattr(usage, "prompt_tokens", None)
        tout = getattr(usage, "completion_tokens", None)
        model_id = getattr(response, "model", None)
        fingerprint = getattr(response, "system_fingerprint", None)
        error = None if text else "empty answer (no choices or no content)"
        return CallResult(text, error, latency, tin, tout, self._cost(response, tin, tout),
                          model_id, fingerprint, attempts)

    def _cost(self, response: Any, tin: int | None, tout: int | None) -> float | None:
        price = self.endpoint.cost_per_1k_tokens
        if price.input is not None or price.output is not None:
            return ((tin or 0) * (price.input or 0.0) + (tout or 0) * (price.output or 0.0)) / 1000
        if self.endpoint.simulated:
            return 0.0
        # LiteLLM has already priced the response (documented as
        # response._hidden_params["response_cost"]; None for a model it has no
        # price for). Pricing it a second time cost about a tenth of the
        # monitor's per-call CPU, most of it failing lookups for unknown models.
        hidden = getattr(response, "_hidden_params", None)
        if isinstance(hidden, dict) and "response_cost" in hidden:
            cost = hidden["response_cost"]
            return float(cost) if isinstance(cost, int | float) else None
        try:
            return float(litellm.completion_cost(completion_response=response))
        except Exception:
            return None  # LiteLLM does not know this model's price

    def _describe(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if self._key:
            text = text.replace(self._key, "***")
        return f"{type(exc).__name__}: {text}"[:300]


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from a Retry-After header on the error's response, if any."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
        return min(_BACKOFF_CAP_S, max(0.0, float(value))) if value is not None else None
    except (TypeError, ValueError):
        return None
