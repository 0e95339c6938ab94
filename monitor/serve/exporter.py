"""Prometheus exposition: the only module that imports prometheus_client.

A Collector renders the MetricsState snapshot on each scrape into its own
CollectorRegistry (no process / platform collectors, no global registry).
An HTTP server on metrics.host:port (loopback by default) serves /metrics,
/healthz and /report; /healthz answers 200 while the scheduler is alive, else
503, with a JSON body that also gives each endpoint's last run age and a
`stale` flag; /report serves the report folder's static files read-only
(monitor.serve.site decides what a path may read). GET and HEAD only: any
other method is 405.
Names, labels and units follow the contract; labels are bounded (endpoint,
scenario, country, language, status, direction) and never carry text.
"""

from __future__ import annotations

import json
import platform
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from monitor import __version__
from monitor.serve import site
from monitor.serve.metrics import LATENCY_BUCKETS, MetricsState

__all__ = ["BiasCollector", "MetricsServer", "make_registry", "render"]

P = "bias_monitor_"
CELL = ["endpoint", "scenario", "country"]


def _gauge(name: str, doc: str, labels: list[str], values: dict[Any, float]) -> GaugeMetricFamily:
    g = GaugeMetricFamily(P + name, doc, labels=labels)
    for key, value in sorted(values.items()):
        g.add_metric(list(key) if isinstance(key, tuple) else [key], float(value))
    return g


def _counter(name: str, doc: str, labels: list[str],
             values: Mapping[Any, float]) -> CounterMetricFamily:
    c = CounterMetricFamily(P + name, doc, labels=labels)
    for key, value in sorted(values.items()):
        c.add_metric(list(key) if isinstance(key, tuple) else [key], float(value))
    return c


class BiasCollector(Collector):
    def __init__(self, state: MetricsState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        s = self.state.snapshot()
        # The version behind every series (the exporter guidelines' build_info).
        yield InfoMetricFamily(P + "build", "bias-monitor version and Python of this daemon.",
                               value={"version": __version__,
                                      "python": platform.python_version()})
        yield _gauge("md_points", "Latest local-language bias MD (score points).", CELL,
                     {k: v[0] for k, v in s.md.items()})
        yield _gauge("md_ci_lower_points", "Lower bound of the MD 95% CI (points).", CELL,
                     {k: v[1] for k, v in s.md.items() if v[1] is not None})
        yield _gauge("md_ci_upper_points", "Upper bound of the MD 95% CI (points).", CELL,
                     {k: v[2] for k, v in s.md.items() if v[2] is not None})
        yield _gauge("md_triplets", "Triplets behind that MD (its sample size; below 5 a cell "
                     "is never significant, so dashboards may grey it out).", CELL,
                     {k: float(v) for k, v in s.md_n.items()})
        yield _gauge("md_drift_points", "MD of the latest run minus the baseline MD (points).",
                     CELL, s.drift)
        yield _gauge("jsd_bits", "Excess JSD per language over the permutation null, recent "
                     "runs pooled (bits).", ["endpoint", "scenario", "language"], s.jsd)
        yield _gauge("jsd_shift_bits", "Excess JSD per language of the latest full rotation "
                     "cycle minus the baseline's (bits; compared once per cycle).",
                     ["endpoint", "language"], {k: v[0] for k, v in s.jsd_shift.items()})
        yield _gauge("jsd_shift_ci_lower_bits", "Lower bound of that change's 95% CI (bits).",
                     ["endpoint", "language"],
                     {k: v[1] for k, v in s.jsd_shift.items() if v[1] is not None})
        yield _gauge("jsd_shift_ci_upper_bits", "Upper bound of that change's 95% CI (bits).",
                     ["endpoint", "language"],
                     {k: v[2] for k, v in s.jsd_shift.items() if v[2] is not None})
        yield _gauge("jsd_shape_changed", "1 if that change's 95% CI lies wholly beyond "
                     "+-thresholds.jsd_excess_bits, else 0 (informative, never pages).",
                     ["endpoint", "language"], {k: float(v) for k, v in s.jsd_changed.items()})
        yield _gauge("alert_state", "Alert state per cell: 0 ok, 1 pending, 2 firing.", CELL,
                     {k: float(v) for k, v in s.alert.items()})
        yield _gauge("md_level", "MD level against thresholds.md_points, confirmed over 2 runs: "
                     "-1 below, 0 within, 1 above.", CELL,
                     {k: float(v) for k, v in s.level.items()})
        yield _gauge("last_run_timestamp_seconds", "Unix time the last run finished.",
                     ["endpoint"], s.last_run_ts)
        yield _gauge("last_run_success", "1 if the last run produced results, else 0.",
                     ["endpoint"], {k: float(v) for k, v in s.last_run_success.items()})
        yield _gauge("coverage_ratio", "Scored / asked per language in the last run.",
                     ["endpoint", "language"], s.coverage)
        yield _gauge("baseline_present", "1 once the endpoint has a baseline, else 0 (until "
                     "then nothing is compared and nothing pages).", ["endpoint"],
                     {k: float(v) for k, v in s.baseline_present.items()})
        yield _gauge("baseline_comparable", "1 if the last run was compared with the baseline "
                     "(same catalog, model id and assistant setup), else 0.", ["endpoint"],
                     {k: float(v) for k, v in s.comparable.items()})
        yield _gauge("budget_exhausted", "1 if the daily budget stopped runs, else 0.",
                     ["endpoint"], {k: float(v) for k, v in s.budget_exhausted.items()})
        yield _gauge("weakness_share", "Share of weaknesses among the points listed for a "
                     "country's options, in its own language (local) or the others (foreign).",
                     ["endpoint", "country", "locality"], s.weakness_share)
        yield _counter("probes", "Probe calls by outcome.", ["endpoint", "status"], s.probes)
        yield _counter("run_failures", "Scheduled runs that failed (no results, a crash, "
                       "storage), since start.", ["endpoint"], s.run_failures)
        yield _counter("runs_skipped", "Scheduled slots skipped because the previous run was "
                       "still going, since start.", ["endpoint"], s.runs_skipped)
        yield _counter("alert_delivery_failures", "Slack deliveries that failed (kept in the "
                       "outbox and retried), since start.", ["endpoint"], s.delivery_failures)
        yield _counter("tokens", "Tokens used.", ["endpoint", "direction"], s.tokens)
        yield _counter("cost_usd", "Cost in USD of the calls whose price is known (absent when "
                       "none is).", ["endpoint"], s.cost)
        yield _counter("probes_unpriced", "Answered calls whose cost is unknown (no price "
                       "known to LiteLLM or configured).", ["endpoint"], s.unpriced)
        yield _gauge("alert_messages_undelivered", "Alert messages in the outbox not delivered "
                     "yet: owed to a sink that failed, or held while no sink can deliver.",
                     ["endpoint"], {k: float(v) for k, v in s.undelivered.items()})
        yield _gauge("alert_sinks", "Alert sinks that can deliver (their variables set); "
                     "0: every message waits in the outbox.", [],
                     {} if s.alert_sinks is None else {(): s.alert_sinks})
        hist = HistogramMetricFamily(P + "probe_latency_seconds", "Latency of answered probe "
                                     "calls (seconds).", labels=["endpoint"])
        for ep, (counts, total, n) in sorted(s.latency.items()):
            buckets = [(str(b), c) for b, c in zip(LATENCY_BUCKETS, counts, strict=True)]
            hist.add_metric([ep], [*buckets, ("+Inf", n)], total)
        yield hist


def make_registry(state: MetricsState) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BiasCollector(state))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


class MetricsServer:
    """/metrics, /healthz and (with a report folder) /report in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int,
                 health: Callable[[], tuple[bool, dict[str, Any]]],
                 reports: Path | None = None) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # scrapes are not news
                pass

            def do_GET(self) -> None:
                self._answer(head=False)

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def _not_allowed(self) -> None:  # read-only: nothing here takes a write
                self._send(site.Answer(405, body=b"GET and HEAD only\n"), head=False,
                           extra={"Allow": "GET, HEAD"})

            do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = _not_allowed

            def _answer(self, *, head: bool) -> None:
                path = self.path.split("?")[0]
                if path == "/metrics":
                    answer = site.Answer(200, "text/plain; version=0.0.4; charset=utf-8",
                                         body=render(outer.registry))
                elif path == "/healthz":
                    ok, info = outer.health()
                    answer = site.Answer(200 if ok else 503, "application/json",
                                         body=json.dumps(info).encode())
                elif outer.reports is not None and (path == site.PREFIX
                                                    or path.startswith(site.PREFIX + "/")):
                    answer = site.lookup(outer.reports, self.path)
                    self._send(answer, head=head, extra=site.HEADERS)
                    return
                else:
                    answer = site.Answer(404, body=b"see /metrics, /healthz and /report\n")
                self._send(answer, head=head)

            def _send(self, answer: site.Answer, *, head: bool,
                      extra: Mapping[str, str] | None = None) -> None:
                body = answer.body
                if answer.file is not None:
                    try:
                        body = answer.file.read_bytes()
                    except OSError:  # pruned between the lookup and the read
                        answer = site.Answer(404, body=b"not found\n")
                        body = answer.body
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(body)))
                if answer.location is not None:
                    self.send_header("Location", answer.location)
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        self.registry = registry
        self.health = health
        self.reports = reports
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="metrics-http")

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def age_seconds(ts: float | None) -> float | None:
    return None if ts is None else max(0.0, time.time() - ts)
