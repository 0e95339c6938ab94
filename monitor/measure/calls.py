"""What one probe call is to a run: the client it goes through (a Protocol: LiteLLM's in
monitor.measure.llm, or a test's), what it returns, and whether its request is out."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Protocol

from monitor.vocab import AnswerFormat

__all__ = ["ON_WIRE", "CallResult", "ChatClient", "Wire"]


class Wire:
    """Whether a call's request is out (set by the client while an attempt holds its
    rate-limit token): on a signal, a run waits for these, which are paid for, and
    cancels the calls still queued for a token or sleeping before a retry at once."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


#: The Wire of the call the current task makes (each call is its own task).
ON_WIRE: contextvars.ContextVar[Wire | None] = contextvars.ContextVar("on_wire", default=None)


@dataclass(kw_only=True, frozen=True)
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
    answer_format: str = AnswerFormat.TEXT  # what the call was really asked in
    # A transport failure (a timeout, no connection, 429 or 5xx) that outlasted the
    # client's retries: the run asks it again at its end (endpoints[].reask_failed).
    # Not one that asking again cannot mend (401, 400) nor a paid empty answer.
    transient: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class ChatClient(Protocol):
    """What a run needs of a client: one chat completion that never raises."""

    async def complete(self, messages: list[dict[str, str]], *, language: str | None = None,
                       schema: dict[str, Any] | None = None) -> CallResult: ...
