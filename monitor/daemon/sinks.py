"""The alert sinks: what each is (Slack, webhook, PagerDuty), and how a JSON POST is tried.

A sink takes one message at a time (a run's transitions and notices, or one
transition for a sink that pages per cell) and answers with an `Outcome`:
DELIVERED or SKIPPED (nothing in it for this sink) mark it done for that sink;
FAILED keeps it owed, and the outbox stops there so order is kept; REJECTED
(the receiver refused this very message: a 4xx other than 408 / 429) marks
it done as rejected, logged, so one bad message does not block the ones
after it or come back on every run.

`post` is the webhook's and PagerDuty's delivery: retried with exponential
backoff (or the receiver's Retry-After) on 5xx, 408, 429 and no answer. A
log line names the sink, the endpoint, the message's key and the status;
never the URL, a header value or the routing key (a response text quoted in
a log has every configured secret value replaced by ***).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit

from monitor.config import Delivery
from monitor.httpio import NoReply, Reply, post_json
from monitor.vocab import AlertState, Condition, LevelState
from monitor.watch import Transition

__all__ = ["Outcome", "Sink", "cell_key", "headline", "opens", "post", "redact", "secret_parts"]

log = logging.getLogger("monitor.daemon.sinks")
#: The longest wait between two tries, whatever Retry-After asks: the delivery runs in
#: the run's aftermath, and what is not delivered is owed, not lost.
MAX_WAIT_S = 30.0


class Outcome(StrEnum):
    DELIVERED = "delivered"
    SKIPPED = "skipped"
    FAILED = "failed"
    REJECTED = "rejected"


class Sink(Protocol):
    #: the outbox's name of the sink (outbox_delivery.sink)
    name: str
    #: True: one message per transition (PagerDuty's events); False: one per run
    per_transition: bool

    @property
    def enabled(self) -> bool: ...

    def deliver(self, endpoint: str, transitions: list[Transition], *, simulated: bool,
                note: str | None, key: str) -> Outcome:
        """`key`: the message's stable id, the same on every retry."""
        ...


def headline(endpoint: str, transitions: list[Transition], *, simulated: bool) -> str:
    """The message's one line: what changed where (every sink's title)."""
    firing = [t for t in transitions if t.to_state == AlertState.FIRING]
    level = [t for t in transitions if t.condition == Condition.LEVEL
             and t.to_state != LevelState.WITHIN]
    head = (f"Local-language bias FIRING on {endpoint}" if firing
            else f"Local-language bias level beyond threshold on {endpoint}" if level
            else f"Local-language bias resolved on {endpoint}" if transitions
            else f"bias-monitor notice for {endpoint}")
    return head + (" (simulated endpoint)" if simulated else "")


def opens(t: Transition) -> bool:
    """Whether the change opens an incident (FIRING, a level beyond) or ends one."""
    return t.to_state in (AlertState.FIRING, LevelState.ABOVE, LevelState.BELOW)


def cell_key(t: Transition) -> str:
    """Stable per (endpoint, scenario, country, condition): a resolve carries its trigger's
    key. PagerDuty allows 255 characters; longer names are hashed."""
    key = f"bias-monitor/{t.endpoint}/{t.scenario}/{t.country}/{t.condition}"
    if len(key) <= 255:
        return key
    return "bias-monitor/" + hashlib.sha256(key.encode()).hexdigest()


def secret_parts(value: str) -> list[str]:
    """A secret and the pieces of it a receiver may quote alone: the words of a header
    value (the token after "Bearer"), a URL's path, query and longer path segments."""
    parts = [value, *value.split()]
    if "://" in value:
        url = urlsplit(value)
        parts += [url.path, url.query, *url.path.split("/")]
    return [p for p in parts if len(p) >= 8 or p == value]


def redact(text: str, secrets: list[str]) -> str:
    pieces = sorted({p for s in secrets if s for p in secret_parts(s)}, key=len, reverse=True)
    for piece in pieces:
        text = text.replace(piece, "***")
    return text


def _wait(reply: Reply | None, attempt: int, cfg: Delivery) -> float:
    after = reply.headers.get("retry-after") if reply is not None else None
    if after is not None:
        try:
            return min(max(float(after), 0.0), MAX_WAIT_S)
        except ValueError:
            pass  # an HTTP date: fall back to the backoff
    return min(cfg.backoff_s * 2.0 ** attempt, MAX_WAIT_S)


def post(sink: str, url: str, body: dict[str, Any], *, headers: dict[str, str], cfg: Delivery,
         secrets: list[str], what: str, sleep: Callable[[float], None] = time.sleep,
         accepted: tuple[int, ...] = (200, 201, 202, 204)) -> Outcome:
    """POST `body` to `url` with `cfg`'s retries; `what` names the message in logs."""
    for attempt in range(cfg.retries + 1):
        reply: Reply | None = None
        try:
            reply = post_json(url, body, headers=headers, timeout_s=cfg.timeout_s)
            status = f"HTTP {reply.status}"
        except NoReply as exc:
            status = f"no answer ({exc})"
        if reply is not None and reply.status in accepted:
            return Outcome.DELIVERED
        if reply is not None and 400 <= reply.status < 500 and reply.status not in (408, 429):
            text = redact(" ".join(reply.text.split()), secrets)[:300]
            log.error("%s refused %s (%s: %s); not retried - check the sink's configuration "
                      "and the message format (docs/contract.md)", sink, what, status, text)
            return Outcome.REJECTED
        if attempt < cfg.retries:
            wait = _wait(reply, attempt, cfg)
            log.warning("%s delivery of %s failed (%s, try %d of %d); retrying in %.1fs",
                        sink, what, status, attempt + 1, cfg.retries + 1, wait)
            sleep(wait)
        else:
            log.warning("%s delivery of %s failed (%s, try %d of %d); kept in the outbox for "
                        "the next run", sink, what, status, attempt + 1, cfg.retries + 1)
    return Outcome.FAILED
