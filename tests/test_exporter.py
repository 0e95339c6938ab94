"""Prometheus exposition: contract names and labels, the HTTP server, values from DuckDB.

Everything is read back the way Prometheus reads it: the rendered text (or the HTTP body)
parsed with prometheus_client's own parser.
"""

from __future__ import annotations

import http.client
import json
import math
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import Metrics
from monitor.serve.exporter import MetricsServer, make_registry, render
from monitor.serve.metrics import LATENCY_BUCKETS, MetricsState
from monitor.store import CALL_COLUMNS, SCORE_COLUMNS, CellRecord, RunRow, StatRow, Store
from monitor.vocab import RunStatus

CELL = {"endpoint", "scenario", "country"}
# family name (as the parser reports it) -> (type, labels of its samples)
CONTRACT: dict[str, tuple[str, set[str]]] = {
    "bias_monitor_md_points": ("gauge", CELL),
    "bias_monitor_md_ci_lower_points": ("gauge", CELL),
    "bias_monitor_md_ci_upper_points": ("gauge", CELL),
    "bias_monitor_md_drift_points": ("gauge", CELL),
    "bias_monitor_jsd_bits": ("gauge", {"endpoint", "scenario", "language"}),
    "bias_monitor_alert_state": ("gauge", CELL),
    "bias_monitor_last_run_timestamp_seconds": ("gauge", {"endpoint"}),
    "bias_monitor_last_run_success": ("gauge", {"endpoint"}),
    "bias_monitor_coverage_ratio": ("gauge", {"endpoint", "language"}),
    "bias_monitor_probes": ("counter", {"endpoint", "status"}),
    "bias_monitor_probe_latency_seconds": ("histogram", {"endpoint"}),
    "bias_monitor_tokens": ("counter", {"endpoint", "direction"}),
    "bias_monitor_cost_usd": ("counter", {"endpoint"}),
    "bias_monitor_weakness_share": ("gauge", {"endpoint", "country", "locality"}),
    "bias_monitor_jsd_shift_bits": ("gauge", {"endpoint", "language"}),
    "bias_monitor_jsd_shift_ci_lower_bits": ("gauge", {"endpoint", "language"}),
    "bias_monitor_jsd_shift_ci_upper_bits": ("gauge", {"endpoint", "language"}),
    "bias_monitor_jsd_shape_changed": ("gauge", {"endpoint", "language"}),
    "bias_monitor_baseline_present": ("gauge", {"endpoint"}),
    "bias_monitor_md_triplets": ("gauge", CELL),
    # The text format has no info type: Prometheus reads an info family as a gauge of 1.
    "bias_monitor_build_info": ("gauge", {"version", "python"}),
    "bias_monitor_alert_messages_undelivered": ("gauge", {"endpoint"}),
    "bias_monitor_alert_sinks": ("gauge", set()),
}
A, B = "gpt4o-prod", "claude-prod"
Key = tuple[str, frozenset[tuple[str, str]]]


def parse(text: str) -> dict[str, Metric]:
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families, "nothing parsed"
    return families


def values(families: dict[str, Metric]) -> dict[Key, float]:
    """(sample name, labels) -> value over every sample."""
    out: dict[Key, float] = {}
    for fam in families.values():
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def v(table: dict[Key, float], name: str, **labels: str) -> float:
    return table[(name, frozenset(labels.items()))]


def filled_state() -> MetricsState:
    state = MetricsState()
    s = state.snapshot()
    s.md[(A, "all", "CN")] = (1.25, 0.5, 2.0)
    s.md[(A, "university", "JP")] = (-0.75, -1.5, 0.0)
    s.md[(B, "all", "CN")] = (0.125, None, None)  # n < 2: no CI
    s.md_n[(A, "all", "CN")] = 14
    s.md_n[(B, "all", "CN")] = 1
    s.drift[(A, "all", "CN")] = 0.875
    s.drift[(B, "all", "CN")] = -0.25
    s.jsd[(A, "all", "zh")] = 0.0312
    s.jsd[(B, "travel", "ko")] = 0.0
    s.jsd_shift[(A, "ja")] = (0.0625, 0.03125, 0.09375)
    s.jsd_changed[(A, "ja")] = 1
    s.alert[(A, "all", "CN")] = 2
    s.alert[(A, "all", "JP")] = 1
    s.alert[(B, "all", "CN")] = 0
    s.level[(A, "all", "CN")] = 1
    s.level[(B, "all", "CN")] = 0
    s.last_run_ts[A] = 1_767_225_600.5
    s.last_run_ts[B] = 1_767_200_000.0
    s.last_run_success[A] = 1
    s.last_run_success[B] = 0
    s.coverage[(A, "en")] = 1.0
    s.coverage[(A, "zh")] = 0.875
    s.coverage[(B, "ja")] = 0.5
    s.probes[(A, "ok")] = 120
    s.probes[(A, "failed")] = 3
    s.probes[(A, "unparseable")] = 2
    s.probes[(A, "refused")] = 1
    s.probes[(B, "ok")] = 7
    s.tokens[(A, "input")] = 84_000
    s.tokens[(A, "output")] = 36_500
    s.tokens[(B, "input")] = 0
    s.tokens[(B, "output")] = 0
    s.cost[A] = 1.2345
    s.cost[B] = 0.0
    counts = [0, 10, 40, 80, 110, 120, 122, 123, 123, 123, 123]
    s.latency[A] = (counts, 181.25, 123)
    s.latency[B] = ([0] * len(LATENCY_BUCKETS), 0.0, 0)
    s.weakness_share[(A, "CN", "local")] = 0.25
    s.weakness_share[(A, "CN", "foreign")] = 0.75
    state.set_flag("comparable", A, 1)
    state.set_flag("baseline_present", A, 1)
    state.set_flag("baseline_present", B, 0)
    state.set_flag("budget_exhausted", B, 1)
    state.set_flag("run_failures", B, 4)
    state.set_flag("delivery_failures", A, 2)
    state.set_flag("runs_skipped", A, 5)
    state.set_flag("unpriced", B, 7)
    state.set_flag("undelivered", A, 2)
    state.set_sinks(1)
    return state


# -- names, labels, help, values -----------------------------------------------------------


def test_every_contract_metric_with_exactly_its_labels() -> None:
    families = parse(render(make_registry(filled_state())).decode())
    for name, (kind, labels) in CONTRACT.items():
        assert name in families, f"{name} missing"
        fam = families[name]
        assert fam.type == kind, name
        assert fam.samples, f"{name} has no samples"
        for s in fam.samples:
            expected = labels | {"le"} if s.name.endswith("_bucket") else labels
            assert set(s.labels) == expected, (s.name, s.labels)
    for fam in families.values():
        assert fam.name.startswith("bias_monitor_"), fam.name  # no process_/python_ metrics
        assert fam.documentation.strip(), f"{fam.name} has no HELP"
        assert len(fam.documentation) > 10
    # counters are exposed with the _total suffix the contract names
    names = {s.name for fam in families.values() for s in fam.samples}
    assert {"bias_monitor_probes_total", "bias_monitor_tokens_total",
            "bias_monitor_cost_usd_total"} <= names
    assert {"bias_monitor_probe_latency_seconds_bucket", "bias_monitor_probe_latency_seconds_sum",
            "bias_monitor_probe_latency_seconds_count"} <= names


def test_values_round_trip() -> None:
    t = values(parse(render(make_registry(filled_state())).decode()))
    assert v(t, "bias_monitor_md_points", endpoint=A, scenario="all", country="CN") == 1.25
    assert v(t, "bias_monitor_md_ci_lower_points", endpoint=A, scenario="all",
             country="CN") == 0.5
    assert v(t, "bias_monitor_md_ci_upper_points", endpoint=A, scenario="all",
             country="CN") == 2.0
    assert v(t, "bias_monitor_md_points", endpoint=A, scenario="university",
             country="JP") == -0.75
    assert v(t, "bias_monitor_md_points", endpoint=B, scenario="all", country="CN") == 0.125
    # no CI: no series (not NaN, not 0)
    assert ("bias_monitor_md_ci_lower_points",
            frozenset({"endpoint": B, "scenario": "all", "country": "CN"}.items())) not in t
    assert v(t, "bias_monitor_md_drift_points", endpoint=A, scenario="all",
             country="CN") == 0.875
    assert v(t, "bias_monitor_md_drift_points", endpoint=B, scenario="all",
             country="CN") == -0.25
    assert v(t, "bias_monitor_jsd_bits", endpoint=A, scenario="all", language="zh") == 0.0312
    assert v(t, "bias_monitor_jsd_bits", endpoint=B, scenario="travel", language="ko") == 0.0
    assert v(t, "bias_monitor_jsd_shift_bits", endpoint=A, language="ja") == 0.0625
    assert v(t, "bias_monitor_md_triplets", endpoint=B, scenario="all", country="CN") == 1
    from monitor import __version__

    [info] = [k for k in t if k[0] == "bias_monitor_build_info"]
    assert dict(info[1])["version"] == __version__ and t[info] == 1
    assert v(t, "bias_monitor_jsd_shift_ci_lower_bits", endpoint=A, language="ja") == 0.03125
    assert v(t, "bias_monitor_jsd_shape_changed", endpoint=A, language="ja") == 1
    assert v(t, "bias_monitor_alert_state", endpoint=A, scenario="all", country="CN") == 2
    assert v(t, "bias_monitor_alert_state", endpoint=A, scenario="all", country="JP") == 1
    assert v(t, "bias_monitor_alert_state", endpoint=B, scenario="all", country="CN") == 0
    assert v(t, "bias_monitor_last_run_timestamp_seconds", endpoint=A) == 1_767_225_600.5
    assert v(t, "bias_monitor_last_run_success", endpoint=A) == 1
    assert v(t, "bias_monitor_last_run_success", endpoint=B) == 0
    assert v(t, "bias_monitor_coverage_ratio", endpoint=A, language="zh") == 0.875
    assert v(t, "bias_monitor_coverage_ratio", endpoint=B, language="ja") == 0.5
    for status, n in {"ok": 120, "failed": 3, "unparseable": 2, "refused": 1}.items():
        assert v(t, "bias_monitor_probes_total", endpoint=A, status=status) == n
    assert v(t, "bias_monitor_probes_total", endpoint=B, status="ok") == 7
    assert v(t, "bias_monitor_tokens_total", endpoint=A, direction="input") == 84_000
    assert v(t, "bias_monitor_tokens_total", endpoint=A, direction="output") == 36_500
    assert v(t, "bias_monitor_cost_usd_total", endpoint=A) == 1.2345
    assert v(t, "bias_monitor_cost_usd_total", endpoint=B) == 0.0
    assert v(t, "bias_monitor_weakness_share", endpoint=A, country="CN", locality="local") == 0.25
    # the developers' extra gauges (not in the contract) carry the daemon's flags
    assert v(t, "bias_monitor_baseline_comparable", endpoint=A) == 1
    assert v(t, "bias_monitor_budget_exhausted", endpoint=B) == 1
    assert v(t, "bias_monitor_run_failures_total", endpoint=B) == 4
    # nothing invented: one md series per snapshot entry
    assert sum(1 for name, _ in t if name == "bias_monitor_md_points") == 3
    assert sum(1 for name, _ in t if name == "bias_monitor_probes_total") == 5


def test_latency_histogram_is_cumulative_with_inf_equal_to_count() -> None:
    t = values(parse(render(make_registry(filled_state())).decode()))
    for ep, counts, total, n in ((A, [0, 10, 40, 80, 110, 120, 122, 123, 123, 123, 123],
                                  181.25, 123),
                                 (B, [0] * len(LATENCY_BUCKETS), 0.0, 0)):
        got = {float(dict(labels)["le"]): value for (name, labels), value in t.items()
               if name == "bias_monitor_probe_latency_seconds_bucket"
               and dict(labels)["endpoint"] == ep}
        assert sorted(got) == [*LATENCY_BUCKETS, math.inf]
        assert [got[b] for b in LATENCY_BUCKETS] == counts
        assert got[math.inf] == n
        ordered = [got[b] for b in sorted(got)]
        assert ordered == sorted(ordered)  # cumulative
        assert v(t, "bias_monitor_probe_latency_seconds_count", endpoint=ep) == n
        assert v(t, "bias_monitor_probe_latency_seconds_sum", endpoint=ep) == total


def test_empty_state_renders_valid_text_with_help_only() -> None:
    text = render(make_registry(MetricsState())).decode()
    families = parse(text)
    assert set(CONTRACT) <= set(families)
    # Nothing measured yet: only the daemon's own version is a sample.
    assert all(not fam.samples for name, fam in families.items()
               if name != "bias_monitor_build_info")
    assert [ln.split("{")[0] for ln in text.splitlines()
            if ln and not ln.startswith("#")] == ["bias_monitor_build_info"]


# -- the HTTP server ------------------------------------------------------------------------


def get(port: int, path: str) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read().decode()
    finally:
        conn.close()


def test_metrics_server_serves_metrics_and_health() -> None:
    health: dict[str, Any] = {"ok": True, "info": {"status": "ok", "last_run_age_s": 12.5}}
    server = MetricsServer(make_registry(filled_state()), "127.0.0.1", 0,
                           lambda: (health["ok"], health["info"])).start()
    try:
        assert server.port > 0
        status, ctype, body = get(server.port, "/metrics")
        assert status == 200
        assert ctype.startswith("text/plain")
        t = values(parse(body))
        assert v(t, "bias_monitor_md_points", endpoint=A, scenario="all", country="CN") == 1.25
        assert get(server.port, "/metrics?name[]=x")[0] == 200

        status, ctype, body = get(server.port, "/healthz")
        assert (status, ctype) == (200, "application/json")
        assert json.loads(body) == {"status": "ok", "last_run_age_s": 12.5}

        health.update(ok=False, info={"status": "stale", "reason": "no run for 3h"})
        status, ctype, body = get(server.port, "/healthz")
        assert (status, ctype) == (503, "application/json")
        assert json.loads(body) == {"status": "stale", "reason": "no run for 3h"}

        for path in ("/", "/metric", "/healthz/x", "/favicon.ico"):
            assert get(server.port, path)[0] == 404, path
    finally:
        server.stop()


def test_metrics_bind_loopback_by_default() -> None:
    assert Metrics().host == "127.0.0.1"
    assert Metrics().port == 9464


# -- values from DuckDB ------------------------------------------------------------------------


def _call(run_id: str, i: int, endpoint: str, status: str, latency: float | None,
          tin: int | None, tout: int | None, cost: float | None) -> dict[str, Any]:
    return {
        "run_id": run_id, "triplet_id": f"university:t{i:04d}", "language": "zh",
        "endpoint": endpoint, "scenario": "university", "target_id": f"opt-{i}",
        "pair_id": f"p{i:03d}", "variant": "plain", "option_order": "opt-1,opt-2,opt-3",
        "prompt_hash": f"h{i:015d}", "catalog_version": "2026.1-test", "status": status,
        "detail": None, "raw_text": None if status == "failed" else f"answer {i}",
        "error": "Timeout" if status == "failed" else None, "latency_s": latency,
        "input_tokens": tin, "output_tokens": tout, "cost_usd": cost,
        "model_id": None if status == "failed" else "gpt-4o-2024-08-06", "fingerprint": None,
        "attempts": 1, "created_at": datetime(2026, 3, 1, 12, 0, i, tzinfo=UTC),
        "answer_format": "text",
    }


# (status, latency_s, input tokens, output tokens, cost) for endpoint A
CALLS: list[tuple[str, float | None, int | None, int | None, float | None]] = [
    ("ok", 0.05, 700, 300, 0.004),
    ("ok", 0.3, 710, 310, 0.005),
    ("ok", 2.0, 720, 320, 0.006),
    ("unparseable", 0.3, 730, 90, 0.003),
    ("refused", 0.05, 640, 20, 0.001),
    ("failed", 60.0, None, None, None),  # timed out: no answer, no usage
    ("failed", 12.0, None, None, None),
]
MD_ROWS = [("all", "CN", 1.25, 0.5, 2.0, 40), ("all", "JP", -0.5, None, None, 1),
           ("university", "CN", 0.75, -0.25, 1.75, 12)]
COVERAGE = {"en": 1.0, "zh": 0.6}


def _run(run_id: str, endpoint: str) -> RunRow:
    return RunRow(run_id=run_id, endpoint=endpoint, model="openai/gpt-4o", simulated=False,
                  run_index=0, seed=0, catalog_version="2026.1-test", scenarios=["university"],
                  languages=["en", "zh"], variants=["plain"], triplets=4, planned_calls=8,
                  started_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC), finished_at=None,
                  status="running")


def _columns(rows: list[dict[str, Any]], cols: tuple[tuple[str, str], ...]) -> dict[str, list[Any]]:
    return {c: [r[c] for r in rows] for c, _ in cols}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "m.duckdb")
    store.create_run(_run("r-a", A))
    calls = [_call("r-a", i, A, *row) for i, row in enumerate(CALLS)]
    scores = [{"run_id": "r-a", "triplet_id": c["triplet_id"], "language": "zh", "label": lab,
               "option_id": f"opt-{j}", "country": ("CN", "US", "GB")[j], "is_target": j == 0,
               "score": 7.0 + j, "strengths": 2, "weaknesses": 1}
              for c in calls if c["status"] == "ok" for j, lab in enumerate("ABC")]
    store.write_batch(_columns(calls, CALL_COLUMNS), _columns(scores, SCORE_COLUMNS))
    stats = [StatRow(kind="md", scenario=scen, key=country, value=md, ci_lower=lo, ci_upper=hi,
                     n=n) for scen, country, md, lo, hi, n
             in MD_ROWS]
    stats += [StatRow(kind="coverage", scenario="all", key=lang, value=ratio, n=5) for lang,
              ratio in COVERAGE.items()]
    store.write_stats("r-a", stats)
    store.write_stats("r-a", [StatRow(kind="drift", scenario="all", key="CN", value=0.5),
                              StatRow(kind="jsd_window", scenario="all", key="zh", value=0.02,
                                      ci_lower=0.01, ci_upper=0.03, n=30)],
                      replace=False)
    store.finish_run("r-a", RunStatus.COMPLETE)
    store.save_alert_states(A, [CellRecord(scenario="all", country="CN", state="firing",
                                           s_plus=6.0, s_minus=0.0, alarm_runs=2, calm_runs=0,
                                           z=3.1, reason="r",
                                           last_run_id="r-a", changed_at=datetime.now(UTC),
                                           notified_at=None)], [])
    # another endpoint in the same file: its calls must not count for A
    store.create_run(_run("r-b", B))
    other = [_call("r-b", i, B, "ok", 0.2, 10, 5, 1.0) for i in range(3)]
    store.write_batch(_columns(other, CALL_COLUMNS), _columns([], SCORE_COLUMNS))
    store.finish_run("r-b", "failed")
    return store


def test_refresh_reads_counters_histogram_and_gauges_from_duckdb(store: Store) -> None:
    state = MetricsState()
    state.refresh(store, A)
    t = values(parse(render(make_registry(state)).decode()))

    for status in ("ok", "failed", "unparseable", "refused"):
        want = sum(1 for c in CALLS if c[0] == status)
        assert v(t, "bias_monitor_probes_total", endpoint=A, status=status) == want
    answered = [c for c in CALLS if c[0] != "failed"]
    assert v(t, "bias_monitor_tokens_total", endpoint=A, direction="input") == \
        sum(c[2] or 0 for c in answered)
    assert v(t, "bias_monitor_tokens_total", endpoint=A, direction="output") == \
        sum(c[3] or 0 for c in answered)
    assert v(t, "bias_monitor_cost_usd_total", endpoint=A) == pytest.approx(0.019)

    # histogram of answered calls: 0.05 x2, 0.3 x2, 2.0 x1 (failed calls' 60 s and 12 s are not
    # latencies of an answer)
    buckets = {float(dict(labels)["le"]): value for (name, labels), value in t.items()
               if name == "bias_monitor_probe_latency_seconds_bucket"}
    expected = {b: sum(1 for c in answered if c[1] is not None and c[1] <= b)
                for b in LATENCY_BUCKETS}
    assert expected[0.1] == 2 and expected[0.5] == 4 and expected[2.5] == 5
    assert {b: buckets[b] for b in LATENCY_BUCKETS} == expected
    assert buckets[math.inf] == 5
    assert v(t, "bias_monitor_probe_latency_seconds_count", endpoint=A) == 5
    assert v(t, "bias_monitor_probe_latency_seconds_sum", endpoint=A) == pytest.approx(2.7)

    for scen, country, md, lo, hi, _ in MD_ROWS:
        cell = {"endpoint": A, "scenario": scen, "country": country}
        assert v(t, "bias_monitor_md_points", **cell) == md
        if lo is None:
            assert ("bias_monitor_md_ci_lower_points", frozenset(cell.items())) not in t
        else:
            assert v(t, "bias_monitor_md_ci_lower_points", **cell) == lo
            assert v(t, "bias_monitor_md_ci_upper_points", **cell) == hi
    for lang, ratio in COVERAGE.items():
        assert v(t, "bias_monitor_coverage_ratio", endpoint=A, language=lang) == ratio
    assert v(t, "bias_monitor_md_drift_points", endpoint=A, scenario="all", country="CN") == 0.5
    assert v(t, "bias_monitor_jsd_bits", endpoint=A, scenario="all", language="zh") == 0.02
    assert v(t, "bias_monitor_alert_state", endpoint=A, scenario="all", country="CN") == 2
    assert v(t, "bias_monitor_last_run_success", endpoint=A) == 1
    finished = store.get_run("r-a")
    assert finished is not None and finished.finished_at is not None
    assert v(t, "bias_monitor_last_run_timestamp_seconds", endpoint=A) == pytest.approx(
        finished.finished_at.timestamp(), abs=1e-3)
    # only A was refreshed: nothing of B is shown yet
    assert not any(dict(labels).get("endpoint") == B for _, labels in t)
    # No baseline yet: nothing is compared and the metrics say so; then one is set.
    assert v(t, "bias_monitor_baseline_present", endpoint=A) == 0
    assert finished is not None
    store.set_baseline(A, [finished], auto=False)
    state.refresh(store, A)
    t = values(parse(render(make_registry(state)).decode()))
    assert v(t, "bias_monitor_baseline_present", endpoint=A) == 1


def test_refresh_per_endpoint_and_restart_gives_identical_values(store: Store) -> None:
    state = MetricsState()
    state.refresh(store, A)
    state.refresh(store, B)
    state.refresh(store, A)  # refreshing again replaces, never adds up
    first = values(parse(render(make_registry(state)).decode()))
    assert v(first, "bias_monitor_probes_total", endpoint=A, status="ok") == 3
    assert v(first, "bias_monitor_probes_total", endpoint=B, status="ok") == 3
    assert v(first, "bias_monitor_cost_usd_total", endpoint=B) == 3.0
    assert v(first, "bias_monitor_last_run_success", endpoint=B) == 0
    assert not any(name == "bias_monitor_md_points" and dict(labels)["endpoint"] == B
                   for name, labels in first)

    restarted = MetricsState()
    for ep in (B, A):
        restarted.refresh(store, ep)
    assert values(parse(render(make_registry(restarted)).decode())) == first


def test_a_new_endpoint_exposes_every_known_label_set_from_the_start(tmp_path: Path) -> None:
    """The exporter guidelines: series that exist before their first event. An endpoint
    with no run and no baseline yet has no alert state to show; baseline_present = 0 says
    so explicitly, and every counter starts at 0 (rate() of a series born at 1 is 0)."""
    state = MetricsState()
    state.prime(Store(tmp_path / "new.duckdb"), "fresh")
    t = values(parse(render(make_registry(state)).decode()))
    want = {("bias_monitor_baseline_present", ()): 0.0,
            ("bias_monitor_run_failures_total", ()): 0.0,
            ("bias_monitor_runs_skipped_total", ()): 0.0,
            ("bias_monitor_alert_delivery_failures_total", ()): 0.0,
            ("bias_monitor_probes_unpriced_total", ()): 0.0,
            ("bias_monitor_alert_messages_undelivered", ()): 0.0,
            ("bias_monitor_probe_latency_seconds_count", ()): 0.0,
            ("bias_monitor_probe_latency_seconds_sum", ()): 0.0}
    want |= {("bias_monitor_probes_total", (("status", s),)): 0.0
             for s in ("ok", "failed", "unparseable", "refused")}
    want |= {("bias_monitor_tokens_total", (("direction", d),)): 0.0
             for d in ("input", "output")}
    want |= {("bias_monitor_probe_latency_seconds_bucket", (("le", str(b)),)): 0.0
             for b in (*LATENCY_BUCKETS, math.inf)}
    got = {}
    for (name, labels), value in t.items():
        rest = dict(labels)
        if name == "bias_monitor_build_info":
            continue
        assert rest.pop("endpoint") == "fresh", (name, labels)
        if "le" in rest:
            rest["le"] = str(float(rest["le"]))
        got[(name, tuple(sorted(rest.items())))] = value
    assert got == want
    assert not any(n == "bias_monitor_alert_state" for n, _ in t)


# -- concurrency -------------------------------------------------------------------------------


def test_scrape_while_the_daemon_updates_never_breaks() -> None:
    """The daemon sets flags / refreshes in a worker thread while /metrics is scraped."""
    state = filled_state()
    registry = make_registry(state)
    stop = threading.Event()

    def daemon() -> None:
        i = 0
        while not stop.is_set():  # a new series each time: the tables grow while being read
            for name in ("comparable", "budget_exhausted", "run_failures"):
                state.set_flag(name, f"ep{i}", 1)
            i += 1

    errors: list[BaseException] = []
    scrapes = 0
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the two threads as often as possible
    writer = threading.Thread(target=daemon, daemon=True)
    try:
        writer.start()
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            try:
                families = list(registry.collect())  # what every scrape does first
            except RuntimeError as exc:  # "dictionary changed size during iteration"
                errors.append(exc)
                break
            assert len(families) >= len(CONTRACT)
            scrapes += 1
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(old)
    assert not errors, errors
    assert scrapes >= 3
    table = values(parse(render(registry).decode()))
    assert v(table, "bias_monitor_md_points", endpoint=A, scenario="all", country="CN") == 1.25
    assert v(table, "bias_monitor_run_failures_total", endpoint="ep0") == 1
