"""Messages owed to Slack: queued in the DuckDB outbox first, then delivered once.

A message is marked delivered only after Slack accepted it, so a Slack outage
or a restart loses none and a delivered one is never sent again. A notice
(model id or fingerprint changed, daily budget reached) is queued once per
distinct text.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from monitor.daemon.slack import SlackNotifier
from monitor.store import Store
from monitor.watch import Transition

__all__ = ["deliver", "note", "queue", "transition"]


def transition(t: Transition) -> str:
    return json.dumps({"kind": "transition", **asdict(t)})


def note(text: str) -> str:
    return json.dumps({"kind": "note", "text": text})


def queue(store: Store, notifier: SlackNotifier, endpoint: str, payloads: list[str]) -> None:
    if not notifier.enabled:
        return
    fresh = [p for p in payloads
             if json.loads(p)["kind"] != "note" or not store.outbox_has(endpoint, p)]
    if fresh:
        store.outbox_add(endpoint, fresh)


def deliver(store: Store, notifier: SlackNotifier, endpoint: str, *, simulated: bool) -> bool:
    """Send what the outbox holds for `endpoint` as one message; True when delivered."""
    pending = store.outbox_pending(endpoint)
    if not pending or not notifier.enabled:
        return True
    transitions, notes = [], []
    for item in pending:
        data = json.loads(item.payload)
        if data["kind"] == "note":
            notes.append(data["text"])
        else:
            transitions.append(Transition.from_dict(data))
    ok = notifier.send(endpoint, transitions, simulated=simulated, note="; ".join(notes) or None)
    if ok:
        store.outbox_delivered([i.id for i in pending])
        store.mark_notified(endpoint, [(t.scenario, t.country) for t in transitions])
    return ok
