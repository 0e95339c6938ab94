"""Slack notifications: the only module that imports slack_sdk.

One Block Kit message per endpoint per run that changed an alert state
(to FIRING, FIRING -> OK; level changes with alerts.page_on_level), with the
cell, MD now and baseline with CIs and n, bias or leniency (DiD with its CI),
why it fired or why it resolved, the probes that moved most, the run id and
the report command, and a link to the run's report when report.base_url is set.
Delivery: an incoming webhook (alerts.slack.webhook_url_env) or a bot token
and channel, with slack_sdk's retry handlers for rate limits and connection
errors. Every dynamic text is escaped (&, <, >) and stripped of control
characters, so nothing in it can become a mention (<!channel>, <@U123>) or a
link. The webhook URL and token are secrets: they are never logged or put in
an exception; a failed delivery is logged by status only and never raises.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from slack_sdk import WebClient
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
from slack_sdk.webhook import WebhookClient

from monitor import USER_AGENT
from monitor.alerts.sinks import Message, Outcome, headline
from monitor.config import Report, Slack
from monitor.vocab import Condition
from monitor.watch import Transition, bias_or_leniency

__all__ = ["SlackNotifier", "build_blocks", "escape"]

log = logging.getLogger("monitor.alerts.slack")
# slack_sdk's clients log the request URL - the webhook secret - at INFO on every retry and at
# DEBUG on every request; they get a logger of their own that says nothing.
_sdk_log = logging.getLogger("monitor.alerts.slack.slack_sdk")
_sdk_log.setLevel(logging.CRITICAL + 1)
_sdk_log.propagate = False
_sdk_log.addHandler(logging.NullHandler())
MAX_SECTIONS = 45
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def escape(text: str) -> str:
    """Slack mrkdwn escaping: no mentions, links or formatting can be injected."""
    text = _CONTROL.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _ci(ci: tuple[float, float]) -> str:
    lo, hi = ci
    return "n/a" if lo != lo or hi != hi else f"[{lo:+.2f}, {hi:+.2f}]"


def build_blocks(endpoint: str, transitions: list[Transition], *, simulated: bool = False,
                 note: str | None = None,
                 report_url: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, Block Kit blocks) for one endpoint's state changes; `report_url`
    (from the configuration, checked there to hold no <, > or |) links the run's report."""
    head = headline(endpoint, transitions, simulated=simulated)
    blocks: list[dict[str, Any]] = [{"type": "header",
                                     "text": {"type": "plain_text", "text": head[:150]}}]
    shown = transitions[:MAX_SECTIONS]  # Block Kit allows 50 blocks per message
    for t in shown:
        what = "level " if t.condition == Condition.LEVEL else ""
        lines = [f"*{escape(t.country)}* - scenario {escape(t.scenario)}: {what}"
                 f"{escape(t.from_state)} -> *{escape(t.to_state)}*",
                 f"MD now {t.md:+.2f} {_ci(t.ci)} (n={t.n}) vs baseline {t.md_base:+.2f} "
                 f"{_ci(t.ci_base)} (n={t.n_base})" + (f", z={t.z:+.1f}" if t.z is not None
                                                       else ""),
                 escape(bias_or_leniency(t)),
                 f"why: {escape(t.reason or 'state changed')}"]
        for m in t.movers:
            lines.append(f"- {escape(m.name_local)} ({escape(m.name_en)}), {escape(m.language)}: "
                         f"{m.old:.1f} -> {m.new:.1f}")
        blocks.append({"type": "section", "text": {"type": "mrkdwn",
                                                   "text": "\n".join(lines)[:2900]}})
    if len(transitions) > len(shown):
        blocks.append({"type": "section", "text": {
            "type": "mrkdwn", "text": f"... and {len(transitions) - len(shown)} more cells"}})
    run_id = escape(transitions[0].run_id) if transitions else ""
    details = f"`monitor report --run {run_id}`"
    if report_url:
        details = f"<{report_url}|the run's report> or {details}"
    parts = [f"run {run_id} - details: {details}"] if run_id else []
    if note:
        parts.append(escape(note))
    context = " - ".join(parts) or "bias-monitor"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    text = head + ": " + (", ".join(f"{t.country} {t.to_state}" for t in transitions)
                          or (note or ""))
    return escape(text), blocks


class SlackNotifier:
    """Sends to Slack when configured; otherwise a no-op that logs once. An alert sink
    (monitor.alerts.sinks): one message per run."""

    name = "slack"
    per_transition = False

    def __init__(self, cfg: Slack, *, timeout_s: int = 10, report: Report | None = None) -> None:
        self._report = report or Report()
        handlers = [RateLimitErrorRetryHandler(max_retry_count=3),
                    ConnectionErrorRetryHandler(max_retry_count=3)]
        url = os.environ.get(cfg.webhook_url_env) if cfg.webhook_url_env else None
        token = os.environ.get(cfg.bot_token_env) if cfg.bot_token_env else None
        self._webhook = WebhookClient(url, timeout=timeout_s, retry_handlers=handlers,
                                      logger=_sdk_log) if url else None
        self._web = WebClient(token=token, timeout=timeout_s, retry_handlers=handlers,
                              logger=_sdk_log) if token and cfg.channel and not url else None
        # slack_sdk's User-Agent names the kernel release and Python version: ours instead.
        if self._webhook is not None:
            self._webhook.default_headers["User-Agent"] = USER_AGENT
        if self._web is not None:
            self._web.headers["User-Agent"] = USER_AGENT
        self._channel = cfg.channel
        self.sent = 0
        self.failed = 0

    @property
    def enabled(self) -> bool:
        return self._webhook is not None or self._web is not None

    def deliver(self, message: Message) -> Outcome:
        if not message.transitions and not message.note:
            return Outcome.SKIPPED
        if not self.enabled:
            log.info("slack not configured; %d alert change(s) for %s not sent",
                     len(message.transitions), message.endpoint)
            return Outcome.FAILED
        text, blocks = build_blocks(message.endpoint, message.transitions,
                                    simulated=message.simulated, note=message.note,
                                    report_url=self._report.link(message.run_id))
        return Outcome.DELIVERED if self.post(text, blocks) else Outcome.FAILED

    def post(self, text: str, blocks: list[dict[str, Any]]) -> bool:
        try:
            if self._webhook is not None:
                resp = self._webhook.send(text=text, blocks=blocks, unfurl_links=False,
                                          unfurl_media=False)
                ok = resp.status_code == 200
                status = str(resp.status_code)
            elif self._web is not None and self._channel:
                ok = bool(self._web.chat_postMessage(channel=self._channel, text=text,
                                                     blocks=blocks, unfurl_links=False,
                                                     unfurl_media=False).get("ok"))
                status = "ok" if ok else "not ok"
            else:
                return False
        except Exception as exc:  # never let a chat outage or its message leak the URL
            ok, status = False, type(exc).__name__
        if ok:
            self.sent += 1
        else:
            self.failed += 1
            log.warning("slack delivery failed (%s); the alert state is kept and the "
                        "dashboard shows it", status)
        return ok
