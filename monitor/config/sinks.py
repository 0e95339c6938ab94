"""The alert sinks beside Slack: a generic JSON webhook and PagerDuty Events v2.

Like Slack's, their secrets live in the environment: the file names the
variables (`url_env`, `headers_env` values, `routing_key_env`). A sink whose
variables are not all set sends nothing (`unset`); which sinks can deliver,
and the lines that say why not, are monitor.config.model.Alerts'.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PAGERDUTY_URL", "Delivery", "PagerDuty", "Webhook", "check_headers_env"]

PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
_Strict = ConfigDict(extra="forbid", frozen=True)
_ENV = r"^[A-Za-z_][A-Za-z0-9_]*$"
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def check_headers_env(v: dict[str, str]) -> dict[str, str]:
    """headers_env (an endpoint's, the webhook's): header names -> variable names."""
    for name, var in v.items():
        if not _HEADER.match(name):
            raise ValueError(f"{name!r} is not a header name")
        if not re.match(_ENV, var):
            # The value is not echoed: it may be the secret itself, pasted here.
            raise ValueError(f"headers_env.{name}: not an environment variable name; name "
                             "the variable that holds the value (the value belongs in the "
                             "environment, not here)")
    return v


class Delivery(BaseModel):
    """How hard a sink is tried within one delivery; what is still owed after the
    last retry stays in the outbox for the next run."""

    model_config = _Strict
    timeout_s: float = Field(10, gt=0, le=300, description="Timeout of one POST.")
    retries: int = Field(3, ge=0, le=10, description="Retries after a 5xx, 429 or no answer.")
    backoff_s: float = Field(1.0, ge=0, le=60, description="First wait before a retry; "
                                                           "doubled each time (Retry-After "
                                                           "wins when the receiver sends it).")


class Webhook(Delivery):
    """A POST of one JSON document per message (docs/contract.md, "Webhook")."""

    url_env: str = Field(pattern=_ENV, description="Variable holding the URL.")
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="Extra headers: name -> the variable holding "
                                          "its value (e.g. Authorization: WEBHOOK_AUTH).")

    @field_validator("headers_env")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        return check_headers_env(v)

    def unset(self) -> list[tuple[str, str]]:
        """(key, variable) of each of its variables that is not set: it sends nothing."""
        wanted = [("alerts.webhook.url_env", self.url_env)] + [
            (f"alerts.webhook.headers_env.{h}", var) for h, var in self.headers_env.items()]
        return [(key, var) for key, var in wanted if not os.environ.get(var)]


class PagerDuty(Delivery):
    """PagerDuty Events API v2: trigger on FIRING, resolve on its end."""

    routing_key_env: str = Field(pattern=_ENV, description="Variable holding the integration "
                                                           "(routing) key.")
    url: str = Field(PAGERDUTY_URL, pattern=r"^https?://\S+$",
                     description="The Events v2 enqueue URL (the EU region's, or a test "
                                 "server).")
    severity: Literal["critical", "error", "warning", "info"] = Field(
        "error", description="The events' payload.severity.")

    def unset(self) -> list[tuple[str, str]]:
        """(key, variable) of its routing key's variable when not set: it sends nothing."""
        var = self.routing_key_env
        return [] if os.environ.get(var) else [("alerts.pagerduty.routing_key_env", var)]
