"""The generic JSON webhook: one POST per message (a run's alert changes and notices).

The body (`body`, documented in docs/contract.md "Webhook") carries a
`dedup_key` that is the same on every retry of the message, also sent as
the `Idempotency-Key` header, so a receiver can drop a retry it already
took. The URL (`url_env`) and the extra headers' values (`headers_env`)
come from the environment; a variable that is not set leaves the webhook
unconfigured (logged once; `monitor config check` says it too).
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from monitor.alerts.sinks import Message, Outcome, cell_key, headline, post
from monitor.config import Report, Webhook
from monitor.watch import Transition, bias_or_leniency, did_verdict

__all__ = ["SCHEMA", "WebhookSink", "body"]

log = logging.getLogger("monitor.alerts.webhook")
SCHEMA = "bias-monitor.alert/1"


def _num(x: float | None) -> float | None:
    """JSON has no NaN: a value that is not there (a CI at n = 1) is null."""
    return None if x is None or not math.isfinite(x) else float(x)


def _md(value: float, ci: tuple[float, float], n: int) -> dict[str, Any]:
    return {"value": _num(value), "ci_lower": _num(ci[0]), "ci_upper": _num(ci[1]), "n": n}


def transition_doc(t: Transition) -> dict[str, Any]:
    """One cell's change, with its numbers (the webhook's item; PagerDuty's custom_details)."""
    return {
        "cell": {"scenario": t.scenario, "country": t.country},
        "condition": t.condition, "from_state": t.from_state, "to_state": t.to_state,
        "cell_key": cell_key(t),
        "md": _md(t.md, t.ci, t.n), "baseline": _md(t.md_base, t.ci_base, t.n_base),
        "z": _num(t.z),
        "did": {"value": _num(t.did), "ci_lower": _num(t.did_ci[0]),
                "ci_upper": _num(t.did_ci[1]), "n": t.did_units, "md": _num(t.did_md_or_md),
                "verdict": did_verdict(t),
                "text": bias_or_leniency(t)},
        "why": t.reason or "state changed",
        "movers": [{"option_id": m.option_id, "name_en": m.name_en, "name_local": m.name_local,
                    "language": m.language, "old": _num(m.old), "new": _num(m.new)}
                   for m in t.movers],
    }


def body(endpoint: str, transitions: list[Transition], *, simulated: bool, note: str | None,
         key: str, report_url: str | None = None) -> dict[str, Any]:
    run_id = transitions[0].run_id if transitions else None
    return {
        "schema": SCHEMA, "dedup_key": key, "endpoint": endpoint, "simulated": simulated,
        "summary": headline(endpoint, transitions, simulated=simulated),
        "run_id": run_id,
        "report_command": f"monitor report --run {run_id}" if run_id else None,
        "report_url": report_url if run_id else None,
        "note": note,
        "transitions": [transition_doc(t) for t in transitions],
    }


class WebhookSink:
    name = "webhook"
    per_transition = False

    def __init__(self, cfg: Webhook, *, report: Report | None = None) -> None:
        self._cfg = cfg
        self._report = report or Report()
        self._url = _env(cfg.url_env)
        self._headers = {h: _env(var) for h, var in cfg.headers_env.items()}
        unset = [var for _, var in cfg.unset()]
        self._enabled = not unset
        if unset:
            log.warning("alerts.webhook: environment variable(s) %s not set; the webhook "
                        "gets no alerts", ", ".join(unset))

    @property
    def enabled(self) -> bool:
        return self._enabled

    def deliver(self, message: Message) -> Outcome:
        if not message.transitions and not message.note:
            return Outcome.SKIPPED
        key = message.key
        doc = body(message.endpoint, message.transitions, simulated=message.simulated,
                   note=message.note, key=key, report_url=self._report.link(message.run_id))
        return post(self.name, self._url, doc, headers={"Idempotency-Key": key, **self._headers},
                    cfg=self._cfg, secrets=[self._url, *self._headers.values()],
                    what=f"message {key} for {message.endpoint}")


def _env(name: str) -> str:
    return os.environ.get(name, "")
