"""Alert delivery: the messages a run's review owes, queued, then delivered once to
each configured sink, in order.

    outbox.py     messages owed to the sinks (DuckDB), delivered once to each, in order
    sinks.py      what a sink is, the Message it takes; a JSON POST with retries
                  (through monitor.httpio); secrets masked in what is logged
    slack.py      Slack (the only slack_sdk user)
    webhook.py    the generic JSON webhook (alerts.webhook)
    pagerduty.py  PagerDuty Events v2 (alerts.pagerduty): trigger / resolve per cell
"""

from monitor.alerts.outbox import (
    OutboxStore,
    build_sinks,
    deliver,
    message_key,
    note,
    owed,
    payloads,
    queue,
)
from monitor.alerts.sinks import Message, Outcome, Sink

__all__ = ["Message", "OutboxStore", "Outcome", "Sink", "build_sinks", "deliver",
           "message_key", "note", "owed", "payloads", "queue"]
