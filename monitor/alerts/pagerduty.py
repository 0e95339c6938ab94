"""PagerDuty Events API v2: a trigger when a cell starts FIRING, a resolve when it ends.

Each event's dedup_key is stable per (endpoint, scenario, country, condition)
(monitor.alerts.sinks.cell_key), so the resolve closes the alert its trigger
opened, and a retried trigger is merged by PagerDuty into the same alert.
One event per transition (the outbox delivers PagerDuty per item, so a
message half sent is never sent again from its start); notices are not
incidents and are skipped. 202 is accepted; 400 (an invalid event) is not
retried; 429, 5xx and no answer are (monitor.alerts.sinks.post). The routing
key comes from `routing_key_env` and is only ever in the request body.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from monitor.alerts.sinks import Message, Outcome, cell_key, opens, post
from monitor.alerts.webhook import transition_doc
from monitor.config import PagerDuty, Report
from monitor.vocab import Condition
from monitor.watch import Transition, bias_or_leniency

__all__ = ["PagerDutySink", "event"]

log = logging.getLogger("monitor.alerts.pagerduty")
SUMMARY_MAX = 1024  # the Events v2 limit of payload.summary


def _ci(lo: float, hi: float) -> str:
    return "n/a" if lo != lo or hi != hi else f"[{lo:+.2f}, {hi:+.2f}]"


def summary(t: Transition, *, simulated: bool) -> str:
    what = "level " if t.condition == Condition.LEVEL else ""
    text = (f"Local-language bias {what}{t.to_state.upper()} on {t.endpoint}: {t.country} "
            f"(scenario {t.scenario}) MD {t.md:+.2f} {_ci(*t.ci)} n={t.n} vs baseline "
            f"{t.md_base:+.2f} {_ci(*t.ci_base)} n={t.n_base}; "
            f"{bias_or_leniency(t)}"
            + (" (simulated endpoint)" if simulated else ""))
    return text[:SUMMARY_MAX]


def event(t: Transition, *, routing_key: str, severity: str, simulated: bool,
          report_url: str | None = None) -> dict[str, Any]:
    """The Events v2 body of one transition: trigger (with its payload, and a link to the
    run's report when there is one) or resolve."""
    if not opens(t):
        return {"routing_key": routing_key, "event_action": "resolve",
                "dedup_key": cell_key(t)}
    details = {**transition_doc(t), "run_id": t.run_id, "simulated": simulated,
               "report_command": f"monitor report --run {t.run_id}", "report_url": report_url}
    links = ([{"href": report_url, "text": f"bias-monitor report of run {t.run_id}"}]
             if report_url else [])
    return {
        "routing_key": routing_key, "event_action": "trigger", "dedup_key": cell_key(t),
        "client": "bias-monitor",
        "payload": {"summary": summary(t, simulated=simulated), "source": t.endpoint,
                    "severity": severity, "component": t.scenario,
                    "group": t.endpoint, "class": f"local-language bias {t.condition}",
                    "custom_details": details},
        **({"links": links} if links else {}),
    }


class PagerDutySink:
    name = "pagerduty"
    per_transition = True

    def __init__(self, cfg: PagerDuty, *, report: Report | None = None) -> None:
        self._cfg = cfg
        self._report = report or Report()
        self._key = os.environ.get(cfg.routing_key_env, "")
        if not self._key:
            log.warning("alerts.pagerduty: environment variable %s not set; PagerDuty gets no "
                        "alerts", cfg.routing_key_env)

    @property
    def enabled(self) -> bool:
        return bool(self._key)

    def deliver(self, message: Message) -> Outcome:
        if not message.transitions:
            return Outcome.SKIPPED  # a notice (model id changed, budget) is no incident
        outcome = Outcome.SKIPPED
        for t in message.transitions:  # one: the outbox hands PagerDuty one at a time
            doc = event(t, routing_key=self._key, severity=self._cfg.severity,
                        simulated=message.simulated, report_url=self._report.link(t.run_id))
            outcome = post(self.name, self._cfg.url, doc, headers={}, cfg=self._cfg,
                           secrets=[self._key], what=f"{doc['event_action']} {cell_key(t)}",
                           accepted=(202,))
            if outcome in (Outcome.FAILED, Outcome.REJECTED):
                return outcome
        return outcome
