"""The whole daemon against real local servers: an OpenAI-protocol server whose
injected bias the test raises and lowers, and a Slack webhook server.

Raising the Chinese-language bias for Chinese options moves all/CN to FIRING
with exactly one Slack message; a SIGKILL mid-run and a restart keep the
state and send nothing twice; lowering the bias brings one recovery message.
Secrets (a canary key and webhook URL) appear nowhere."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.catalog import Catalog
from monitor.store import Store
from tests.support.biased import BiasedModel
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import serve
from tests.support.process import daemon, free_port, get, wait_until
from tests.support.slack import serve_slack

pytestmark = pytest.mark.slow

KEY = "sk-canary-e2e-5d41402abc4b2a76"
HOOK_PATH = "/services/TCANARY/BCANARY/hookcanary9f3a"
CONTRACT = {
    "bias_monitor_md_points": {"endpoint", "scenario", "country"},
    "bias_monitor_md_ci_lower_points": {"endpoint", "scenario", "country"},
    "bias_monitor_md_ci_upper_points": {"endpoint", "scenario", "country"},
    "bias_monitor_md_drift_points": {"endpoint", "scenario", "country"},
    "bias_monitor_jsd_bits": {"endpoint", "scenario", "language"},
    "bias_monitor_alert_state": {"endpoint", "scenario", "country"},
    "bias_monitor_last_run_timestamp_seconds": {"endpoint"},
    "bias_monitor_last_run_success": {"endpoint"},
    "bias_monitor_coverage_ratio": {"endpoint", "language"},
    "bias_monitor_probes_total": {"endpoint", "status"},
    "bias_monitor_probe_latency_seconds_bucket": {"endpoint", "le"},
    "bias_monitor_tokens_total": {"endpoint", "direction"},
    "bias_monitor_cost_usd_total": {"endpoint"},
}


def _cell(db: Path, country: str) -> str:
    cell = Store(db, lock_timeout_s=60).alert_states("local").get(("all", country))
    return cell.state if cell else "none"


def test_bias_raised_fires_once_survives_sigkill_and_recovers(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    model = BiasedModel(shipped_catalog)
    port = free_port()
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)
    with serve(model) as llm, serve_slack() as slack:
        monkeypatch.setenv("TEST_SLACK_URL", slack.url(HOOK_PATH))
        cfg = write_config(
            # Priced, since bias_monitor_cost_usd_total exists only where a cost is known.
            tmp_path, [openai_endpoint(llm.api_base, api_key_env="TEST_OPENAI_KEY",
                                       max_concurrency=16,
                                       cost_per_1k_tokens={"input": 0.001, "output": 0.002})],
            schedule={"every": "2s", "cron": None},
            # Two languages: the CN cell is all this test watches, and a third of the
            # calls keeps the dozen runs it needs short.
            sampling={"triplets_per_run": 60, "scenarios": ["university"],
                      "languages": ["en", "zh"]},
            # A 4-run baseline: shorter ones carry enough estimation error to
            # drift-page on noise within a test's dozen runs.
            baseline={"auto_min_triplets": 240},
            alerts={"slack": {"webhook_url_env": "TEST_SLACK_URL"}, "cooldown_minutes": 0,
                    "min_runs_firing": 2},
            # A dozen runs: their reports (about 1.5 s each) would lengthen every run; the
            # served report is tested in test_daemon_process.py and test_site.py.
            report={"enabled": False},
            metrics={"host": "127.0.0.1", "port": port})
        db = tmp_path / "monitor.duckdb"
        log1, log2 = tmp_path / "d1.log", tmp_path / "d2.log"
        with daemon(cfg, log1) as proc:
            wait_until(lambda: Store(db, lock_timeout_s=60).baseline("local") is not None,
                       480, log1)
            wait_until(lambda: _cell(db, "CN") == "ok", 300, log1)  # compared, quiet
            assert slack.requests == []
            model.bias["CN"] = 3.0
            wait_until(lambda: _cell(db, "CN") == "firing", 480, log1)
            wait_until(lambda: len(slack.requests) >= 1, 300, log1)
            _, metrics_text = get(f"http://127.0.0.1:{port}/metrics")
            # Kill hard in the middle of the next run.
            asked = len(llm.requests)
            wait_until(lambda: len(llm.requests) > asked + 50, 300, log1)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert len(slack.requests) == 1
        fired = " ".join(slack.requests[0].texts())
        assert "FIRING" in fired and "CN" in fired and "all" in fired
        with daemon(cfg, log2) as proc:
            wait_until(lambda: get(f"http://127.0.0.1:{port}/metrics")[0] == 200, 300, log2)
            _, after = get(f"http://127.0.0.1:{port}/metrics")
            assert _cell(db, "CN") == "firing"  # the state survived the kill
            assert _value(after, "bias_monitor_probes_total", status="ok") >= _value(
                metrics_text, "bias_monitor_probes_total", status="ok")
            runs_before = len(Store(db, lock_timeout_s=60).runs("local"))
            wait_until(lambda: len(Store(db, lock_timeout_s=60).runs("local")) >= runs_before + 2,
                  480, log2)
            assert len(slack.requests) == 1  # still firing: nothing sent twice
            model.bias["CN"] = 0.0
            wait_until(lambda: _cell(db, "CN") == "ok", 720, log2)
            wait_until(lambda: len(slack.requests) >= 2, 300, log2)
            _, final = get(f"http://127.0.0.1:{port}/metrics")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        assert len(slack.requests) == 2, [" ".join(r.texts())[:300] for r in slack.requests]
        assert "resolved" in " ".join(slack.requests[1].texts())
        first_answers = [r for r in llm.requests if r.headers.get("authorization")]
        assert first_answers and first_answers[0].headers["authorization"] == f"Bearer {KEY}"
    # Every contract metric, with exactly its labels.
    families = {s.name: set(s.labels) for f in text_string_to_metric_families(final)
                for s in f.samples}
    for name, labels in CONTRACT.items():
        assert families.get(name) == labels, name
    # Secrets: nowhere in logs, the database, metrics or Slack payloads.
    payloads = json.dumps([p.body for p in slack.requests])
    haystacks = [log1.read_text(), log2.read_text(), final, payloads,
                 db.read_bytes().decode("latin-1")]
    for secret in (KEY, "hookcanary9f3a"):
        assert not any(secret in h for h in haystacks), secret


def _value(text: str, name: str, **labels: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))
