"""HTTP requests: the only module that imports httpx.

Two users, one client library: the http/<name> target of a run
(monitor.measure.http_target, async, one connection pool per event loop) and
the alert sinks of the daemon (monitor.alerts.sinks, one synchronous POST of
JSON at a time). Both get a plain `Reply`; a request that got no answer
raises `NoReply`, whose message is the exception's class name only: httpx's
texts can hold the URL, and a webhook URL is a secret. Every request says
`User-Agent: bias-monitor/<version>` (httpx's own names httpx), unless the
caller sets one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from dataclasses import dataclass
from typing import Any

import httpx

from monitor import USER_AGENT

__all__ = ["NoReply", "Reply", "post_json", "request"]

# httpx logs every request's URL at INFO - a webhook URL is a secret - whether or not the
# host program set up logging as `monitor run` does (monitor.logs): never below WARNING.
for _name in ("httpx", "httpcore"):
    logging.getLogger(_name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class Reply:
    status: int
    text: str
    headers: dict[str, str]  # names lower-cased

    def json(self) -> Any:
        return json.loads(self.text)


class NoReply(Exception):
    """No HTTP answer (connection refused, timeout, bad URL); the message is the
    kind of failure only, never the URL."""


def _reply(r: httpx.Response) -> Reply:
    return Reply(r.status_code, r.text, {k.lower(): v for k, v in r.headers.items()})


# One connection pool per event loop (the daemon's runs each have their own loop).
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = \
    weakref.WeakKeyDictionary()


async def request(method: str, url: str, *, body: Any, headers: dict[str, str],
                  timeout_s: float) -> Reply:
    """One request of a run, on the running loop's pool; NoReply when no answer came (the
    caller names its target; the message is the kind of failure only)."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = httpx.AsyncClient(headers={"user-agent": USER_AGENT})
    try:
        return _reply(await pool.request(method, url, json=body, headers=headers,
                                         timeout=timeout_s))
    except httpx.TimeoutException as exc:
        raise NoReply(f"{type(exc).__name__} after {timeout_s:g}s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise NoReply(type(exc).__name__) from None


def post_json(url: str, body: Any, *, headers: dict[str, str], timeout_s: float) -> Reply:
    """POST `body` as strict JSON (no NaN) and return the answer, whatever its status."""
    data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=False,
                          headers={"user-agent": USER_AGENT}) as client:
            return _reply(client.post(url, content=data, headers={
                "content-type": "application/json", **headers}))
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        # from None: the cause's text may hold the URL
        raise NoReply(type(exc).__name__) from None
