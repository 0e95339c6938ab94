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
    """Send what the outbox holds for `endpoint`, one message per run in the order
    queued, stopping at the first that fails: a FIRING and the resolve after it
    (both owed after an outage) arrive in that order, so Slack's last word is the
    state. True when everything was delivered."""
    pending = store.outbox_pending(endpoint)
    if not pending or not notifier.enabled:
        return True
    groups: list[tuple[list[int], list[Transition], list[str]]] = []
    last_run: str | None = None
    for item in pending:
        data = json.loads(item.payload)
        if data["kind"] == "note":
            if not groups:
                groups.append(([], [], []))
            groups[-1][0].append(item.id)
            groups[-1][2].append(data["text"])
            continue
        t = Transition.from_dict(data)
        if not groups or (last_run is not None and t.run_id != last_run):
            groups.append(([], [], []))
        last_run = t.run_id
        groups[-1][0].append(item.id)
        groups[-1][1].append(t)
    for ids, transitions, notes in groups:
        if not notifier.send(endpoint, transitions, simulated=simulated,
                             note="; ".join(notes) or None):
            return False
        store.outbox_delivered(ids)
        if transitions:
            store.mark_notified(endpoint, [(t.scenario, t.country) for t in transitions])
    return True
