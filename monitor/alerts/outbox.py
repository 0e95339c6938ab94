"""Messages owed to the alert sinks: queued in the DuckDB outbox first, then delivered
once to each sink (replicas sharing a store: by one replica at a time, Store.outbox_claim).

A message is owed to every sink configured (its variables set) when it is
queued, and marked done for a sink only after that sink took it (or refused
it for good: monitor.alerts.sinks), so an outage of one sink or a restart
loses nothing, a sink never gets a message twice, and one sink being down
holds back no other. Each sink gets its messages in the order queued and
stops at the first that fails, so a FIRING and the resolve after it (both
owed after an outage) arrive in that order and its last word is the state.
A notice (model id or fingerprint changed, daily budget reached) is queued
once per distinct text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict
from typing import Protocol

from monitor.alerts.pagerduty import PagerDutySink
from monitor.alerts.sinks import Message, Outcome, Sink
from monitor.alerts.slack import SlackNotifier
from monitor.alerts.webhook import WebhookSink
from monitor.config import Alerts, Report
from monitor.store import OutboxItem
from monitor.watch import Transition

__all__ = ["OutboxStore", "build_sinks", "deliver", "message_key", "note", "owed", "payloads",
           "queue", "transition"]


class OutboxStore(Protocol):
    """What the outbox reads and writes in the store."""

    def outbox_add(self, endpoint: str, payloads: Sequence[str],
                   sinks: Sequence[str]) -> None: ...

    def outbox_has(self, endpoint: str, payload: str) -> bool: ...

    def outbox_pending(self, endpoint: str, sink: str | None = None) -> list[OutboxItem]: ...

    def outbox_delivered(self, ids: Sequence[int], sink: str,
                         outcome: str = "delivered") -> None: ...

    def mark_notified(self, endpoint: str, cells: Sequence[tuple[str, str]]) -> None: ...

    def outbox_claim(self, endpoint: str, sink: str) -> AbstractContextManager[bool]: ...

    def outbox_adopt(self, endpoint: str, sinks: Sequence[str]) -> int: ...


def transition(t: Transition) -> str:
    return json.dumps({"kind": "transition", **asdict(t)})


def note(text: str) -> str:
    return json.dumps({"kind": "note", "text": text})


def build_sinks(alerts: Alerts, report: Report | None = None) -> list[Sink]:
    """Every configured sink, Slack first; each knows whether its variables are set.
    With `report.base_url`, each message links to its run's report."""
    report = report or Report()
    sinks: list[Sink] = [SlackNotifier(alerts.slack, report=report)]
    if alerts.webhook is not None:
        sinks.append(WebhookSink(alerts.webhook, report=report))
    if alerts.pagerduty is not None:
        sinks.append(PagerDutySink(alerts.pagerduty, report=report))
    return sinks


def payloads(transitions: Sequence[Transition], notes: Sequence[str]) -> list[str]:
    """One queueing's items: the transitions to tell, then the notices."""
    return [transition(t) for t in transitions] + [note(n) for n in notes]


def owed(sinks: Sequence[Sink]) -> list[str]:
    """The names of the sinks a message queued now is owed to: those configured."""
    return [s.name for s in sinks if s.enabled]


def queue(store: OutboxStore, sinks: Sequence[str], endpoint: str,
          items: Sequence[str]) -> None:
    """Queue one message (`items`, from `payloads`) owed to `sinks`; a notice already
    queued once is not queued again. With no sink ready the message is held (owed to
    none yet): the first sink that can deliver takes it (`deliver`), and `monitor runs`
    and bias_monitor_alert_messages_undelivered show it meanwhile - it is never lost."""
    fresh = [p for p in items
             if json.loads(p)["kind"] != "note" or not store.outbox_has(endpoint, p)]
    if fresh:
        store.outbox_add(endpoint, fresh, sinks)


def message_key(endpoint: str, items: list[OutboxItem]) -> str:
    """A message's id for a receiver to drop a retry: the same items, the same key (their
    queue time makes it unique beyond the database's ids, which a new file reuses)."""
    raw = json.dumps([endpoint, [[i.id, str(i.queued_at)] for i in items]])
    return "bm-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


Group = tuple[list[OutboxItem], list[Transition], list[str]]


def _groups(pending: list[OutboxItem], *, per_transition: bool) -> list[Group]:
    """The messages: the items of one queueing (one run's changes and its notices)
    together, or each item alone for a sink that takes one transition at a time."""
    groups: list[Group] = []
    last_at: object = None
    last_run: str | None = None
    for item in pending:
        data = json.loads(item.payload)
        t = None if data["kind"] == "note" else Transition.from_dict(data)
        run = t.run_id if t is not None else None
        if (per_transition or not groups or item.queued_at != last_at
                or (run is not None and last_run is not None and run != last_run)):
            groups.append(([], [], []))
            last_run = None
        last_at = item.queued_at
        last_run = run or last_run
        groups[-1][0].append(item)
        if t is None:
            groups[-1][2].append(data["text"])
        else:
            groups[-1][1].append(t)
    return groups


def _deliver_to(store: OutboxStore, sink: Sink, endpoint: str, *, simulated: bool) -> bool:
    for items, transitions, notes in _groups(store.outbox_pending(endpoint, sink.name),
                                             per_transition=sink.per_transition):
        outcome = sink.deliver(Message(endpoint=endpoint, transitions=transitions, notes=notes,
                                       key=message_key(endpoint, items), simulated=simulated))
        if outcome == Outcome.FAILED:
            return False
        store.outbox_delivered([i.id for i in items], sink.name, outcome.value)
        if transitions and outcome == Outcome.DELIVERED:
            store.mark_notified(endpoint, [(t.scenario, t.country) for t in transitions])
    return True


def deliver(store: OutboxStore, sinks: Sequence[Sink], endpoint: str, *,
            simulated: bool) -> bool:
    """Send what the outbox owes each enabled sink for `endpoint`. True when every sink
    took everything (a refused message counts as taken: it is logged, not retried)."""
    ready = owed(sinks)
    if ready:  # messages queued while no sink could deliver: owed to these now
        store.outbox_adopt(endpoint, ready)
    ok = True
    for sink in sinks:
        if not sink.enabled:
            continue
        # Replicas sharing a store: one at a time sends an endpoint's messages to a sink
        # (another at it now sends these too, in order); a DuckDB file always says yes.
        with store.outbox_claim(endpoint, sink.name) as mine:
            if mine:
                ok = _deliver_to(store, sink, endpoint, simulated=simulated) and ok
    return ok
