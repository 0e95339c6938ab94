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
- `http/<name>` is the custom provider for an assistant behind its own HTTP
  API (endpoints[].http): the body is the configured JSON template with the
  placeholders filled in, the answer is read at `response_path`. An error
  status raises with its code and headers, so that LiteLLM maps it to its
  exceptions and the retry rules below apply as for any provider.
- Extra headers (endpoints[].headers_env) and the key are secrets: every
  error text is masked with all of them. Every call says `User-Agent:
  bias-monitor/<version>` and no host details (_IDENTITY).
- answer_format json_schema asks for a response schema; a provider that
  rejects it (a 400 naming the response format) is asked in text from then
  on, and each call records the format it was really asked in.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before the import: no network

import litellm
from litellm.llms.custom_llm import CustomLLM

from monitor import USER_AGENT
from monitor.config import Endpoint
from monitor.measure import http_target
from monitor.measure.calls import ON_WIRE, CallResult
from monitor.measure.ratelimit import RateLimiter
from monitor.measure.simulated import SimParams
from monitor.measure.simulated import answer as simulated_answer
from monitor.vocab import AnswerFormat

__all__ = ["LLMClient"]


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

#: Sent with every call, under the endpoint's own headers (which win): who asks, and no
#: host details. The OpenAI SDK, which LiteLLM uses for OpenAI-compatible providers,
#: adds the operating system, architecture and Python version (X-Stainless-*): they
#: are overridden with its own words for "not known" (an http/ target gets none).
_IDENTITY = {"User-Agent": USER_AGENT}
_NO_PLATFORM = {"X-Stainless-OS": "Unknown", "X-Stainless-Arch": "unknown",
                "X-Stainless-Runtime-Version": "unknown"}
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 60.0


class _Simulated(CustomLLM):
    async def acompletion(  # type: ignore[override]  # litellm passes keywords only
            self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        response = kwargs["model_response"]
        optional = dict(kwargs.get("optional_params") or {})
        schema = optional.get("response_format") is not None
        params = SimParams.from_params({k: v for k, v in optional.items() if k not in (
            "max_retries", "stream", "response_format", "language")}, profile=model)
        # Off the event loop: the catalog load on first use is a few ms of IO.
        reply = await asyncio.to_thread(simulated_answer, messages, params, schema=schema)
        response.choices[0].message.content = reply.text
        response.model = f"simulated/{model}"
        response.system_fingerprint = f"sim-{params.seed}"
        response.usage = litellm.Usage(prompt_tokens=reply.input_tokens,
                                       completion_tokens=reply.output_tokens,
                                       total_tokens=reply.input_tokens + reply.output_tokens)
        return response

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the simulated endpoint is async only")


class _HttpTarget(CustomLLM):
    async def acompletion(  # type: ignore[override]  # litellm passes keywords only
            self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        response = kwargs["model_response"]
        optional = dict(kwargs.get("optional_params") or {})
        target = optional["http_target"]
        fmt = optional.get("response_format")
        schema = fmt["json_schema"]["schema"] if isinstance(fmt, dict) else None
        text, model_id = await http_target.ask(
            target, messages, language=optional.get("language") or "", model=model,
            headers=kwargs.get("headers") or {}, api_key=kwargs.get("api_key"),
            timeout_s=float(kwargs.get("timeout") or 60), schema=schema)
        response.choices[0].message.content = text
        response.model = str(model_id) if model_id is not None else f"http/{model}"
        return response

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the http target is async only")


litellm.custom_provider_map = [
    *[p for p in litellm.custom_provider_map if p.get("provider") not in ("simulated", "http")],
    {"provider": "simulated", "custom_handler": _Simulated()},
    {"provider": "http", "custom_handler": _HttpTarget()},
]

# A 400 that names the response format: the provider cannot take a schema.
_NO_SCHEMA = re.compile(r"response_format|json_schema|response[_ ]schema|structured output",
                        re.IGNORECASE)


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
        self._headers = endpoint.header_values()
        self._secrets = endpoint.secrets()
        self._schema_ok = self._wants_schema(endpoint)
        self._target = http_target.request_of(endpoint.http) if endpoint.http else None
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
        self._backoff_base_s = _BACKOFF_BASE_S if backoff_base_s is None else backoff_base_s

    @staticmethod
    def _wants_schema(endpoint: Endpoint) -> bool:
        if endpoint.answer_format == AnswerFormat.JSON_SCHEMA:
            return True  # an http/ target's body has {response_schema} (config checks it)
        if endpoint.answer_format == AnswerFormat.TEXT:
            return False
        if endpoint.http is not None:  # auto: where its body has a place for the schema
            return endpoint.http.takes_schema
        if endpoint.simulated:
            return True
        try:  # auto: only where LiteLLM's model list says the model takes a schema
            return bool(litellm.supports_response_schema(model=endpoint.model))
        except Exception:
            return False

    async def complete(self, messages: list[dict[str, str]], *, language: str | None = None,
                       schema: dict[str, Any] | None = None) -> CallResult:
        ep = self.endpoint
        started = self._clock()
        error = "not attempted"
        transient = True
        attempt = 0
        fmt: dict[str, Any] | None = None
        while attempt <= ep.max_retries:
            attempt += 1
            wait: float | None = None
            fmt = schema if schema is not None and self._schema_ok else None
            try:
                async with self.limiter:
                    t0 = self._clock()
                    wire = ON_WIRE.get()
                    if wire is not None:
                        wire.on = True
                    try:
                        # asyncio.timeout, not wait_for: no extra task per call.
                        async with asyncio.timeout(ep.timeout_s + 5):
                            response = await self._call(messages, language, fmt)
                    finally:
                        if wire is not None:
                            wire.on = False
                    latency = self._clock() - t0
                return self._result(response, latency, attempt,
                                    AnswerFormat.JSON_SCHEMA if fmt else AnswerFormat.TEXT)
            except TimeoutError:
                error = f"timeout after {ep.timeout_s:g}s"
            except Exception as exc:
                error = self._describe(exc)
                status = getattr(exc, "status_code", None)
                if fmt is not None and status == 400 and _NO_SCHEMA.search(str(exc)):
                    # The provider cannot take a schema: ask in text, now and from now on
                    # (this attempt is not counted as a retry).
                    self._schema_ok = False
                    attempt -= 1
                    continue
                if isinstance(status, int) and 400 <= status < 500 and status not in _RETRY_STATUS:
                    transient = False
                    break  # auth, bad request, unknown model: retrying cannot help
                wait = _retry_after(exc)
            if attempt > ep.max_retries:
                break
            backoff = min(_BACKOFF_CAP_S, self._backoff_base_s * 2 ** (attempt - 1))
            await self._sleep(wait if wait is not None else backoff * (0.5 + self._jitter()))
        return CallResult(text=None, error=error, latency_s=self._clock() - started,
                          input_tokens=None, output_tokens=None, cost_usd=None, model_id=None,
                          fingerprint=None,
                          attempts=attempt, transient=transient,
                          answer_format=AnswerFormat.JSON_SCHEMA if fmt else AnswerFormat.TEXT)

    async def _call(self, messages: list[dict[str, str]], language: str | None,
                    schema: dict[str, Any] | None) -> Any:
        ep = self.endpoint
        kwargs: dict[str, Any] = {"model": ep.model, "messages": messages,
                                  "timeout": ep.timeout_s, "num_retries": 0, "max_retries": 0,
                                  **self._params}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": schema}
        ours = _IDENTITY if self._target is not None or ep.simulated else {
            **_IDENTITY, **_NO_PLATFORM}
        own = {k.lower() for k in self._headers}
        kwargs["extra_headers"] = {**{k: v for k, v in ours.items() if k.lower() not in own},
                                   **self._headers}
        if self._target is not None:
            kwargs["http_target"] = self._target
            kwargs["language"] = language
        if ep.api_base:
            kwargs["api_base"] = ep.api_base
        if self._key:
            kwargs["api_key"] = self._key
        elif ep.api_base:  # a self-hosted server without auth; the SDK insists on a key
            kwargs["api_key"] = "no-key"
        return await litellm.acompletion(**kwargs)

    def _result(self, response: Any, latency: float, attempts: int,
                answer_format: AnswerFormat) -> CallResult:
        choices = getattr(response, "choices", None) or []
        text = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        usage = getattr(response, "usage", None)
        tin = getattr(usage, "prompt_tokens", None)
        tout = getattr(usage, "completion_tokens", None)
        model_id = getattr(response, "model", None)
        fingerprint = getattr(response, "system_fingerprint", None)
        error = None if text else "empty answer (no choices or no content)"
        return CallResult(text=text, error=error, latency_s=latency, input_tokens=tin,
                          output_tokens=tout, cost_usd=self._cost(response, tin, tout),
                          model_id=model_id, fingerprint=fingerprint, attempts=attempts,
                          answer_format=answer_format)

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
        own = _target_error(exc) if self._target is not None else None
        # An http/ target's error is its own, whole (LiteLLM wraps it in its exception
        # and OpenAI's words: "litellm.BadRequestError: HttpException - ...").
        text = (str(own) if own is not None else
                f"{type(exc).__name__}: {' '.join(str(exc).split()) or type(exc).__name__}")
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return " ".join(text.split())[:300]


def _target_error(exc: BaseException) -> BaseException | None:
    """The http target's own exception behind LiteLLM's, if any."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            return None
        if isinstance(seen, http_target.HttpTargetError | http_target.HttpTargetNoAnswer):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


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
