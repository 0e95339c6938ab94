"""The daemon's job in-process: no false alarms without change, Slack outages,
the outbox, the budget. (tests/test_daemon_process.py runs the real process.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts import outbox
from monitor.catalog import Catalog
from monitor.config import Settings
from monitor.daemon.scheduled import ScheduledRun
from monitor.serve.metrics import MetricsState
from monitor.store import Store
from tests.support.db import rows
from tests.support.helpers import DirectSimClient, sim_daemon, write_config
from tests.support.process import free_port
from tests.support.slack import Answer, serve_slack

SIM = {"name": "sim", "model": "simulated/demo", "max_concurrency": 32, "rpm": 100000}


def _daemon(tmp_path: Path, catalog: Catalog, params: dict[str, Any],
            **sections: Any) -> tuple[ScheduledRun, Settings, Store]:
    daemon, settings, store = sim_daemon(write_config(tmp_path, [{**SIM, "params": params}],
                                                      **sections), catalog)
    return daemon, settings, store


def test_slack_outage_keeps_the_alert_and_delivers_it_once_back(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    script = [Answer(500), Answer(429, headers={"Retry-After": "0"}), Answer(200)]
    with serve_slack(script) as slack:
        monkeypatch.setenv("TEST_SLACK_URL", slack.url())
        daemon, _, store = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                                   alerts={"slack": {"webhook_url_env": "TEST_SLACK_URL"}})
        note = json.dumps({"kind": "note", "text": "model id changed (a -> b)"})
        outbox.queue(store, outbox.owed(daemon.sinks), "sim", [note])
        outbox.queue(store, outbox.owed(daemon.sinks), "sim", [note])  # queued once only
        endpoint = daemon.settings.endpoint("sim")
        # slack_sdk retries the 429 itself; 500 is a failed delivery, kept.
        assert daemon.deliver(endpoint) is False
        assert len(store.outbox_pending("sim")) == 1
        assert daemon.delivery_failures["sim"] == 1  # told to the scheduler, counted there
        # A run still completes while Slack is down, and delivers when it is back.
        asyncio.run(daemon.run("sim"))
        assert store.runs("sim")[-1].status == "complete"
        assert store.outbox_pending("sim") == []
        # Three posts: the 500, the 429 (retried by slack_sdk) and the delivered one.
        delivered = [p for p in slack.requests if "model id changed" in " ".join(p.texts())]
        assert len(delivered) == 3
        asyncio.run(daemon.run("sim"))
        assert len([p for p in slack.requests
                    if "model id changed" in " ".join(p.texts())]) == 3  # never again


def test_unreachable_slack_never_fails_a_run(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # nobody listens there
    monkeypatch.setenv("TEST_SLACK_URL", f"http://127.0.0.1:{port}/services/T/B/CANARY")
    daemon, _, store = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                               alerts={"slack": {"webhook_url_env": "TEST_SLACK_URL"}})
    outbox.queue(store, outbox.owed(daemon.sinks), "sim", [outbox.note("hello")])
    asyncio.run(daemon.run("sim"))
    assert store.runs("sim")[-1].status == "complete"
    assert len(store.outbox_pending("sim")) == 1  # kept for the next run


def test_probe_budget_limits_the_day(tmp_path: Path, shipped_catalog: Catalog) -> None:
    daemon, _, store = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                               sampling={"triplets_per_run": 10},
                               budget={"max_probes_per_day": 90})
    for _ in range(3):
        asyncio.run(daemon.run("sim"))
    calls = rows(store.path, "SELECT count(*) FROM probe_calls")[0][0]
    assert calls == 60 + 30  # 10 triplets, then the 5 that fit in 90 - 60 = 30, then none
    assert daemon.budget_exhausted["sim"] == 1
    assert daemon.failures["sim"] == 1


def test_a_run_says_its_start_and_progress_in_the_log(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Under an rpm limit a run takes minutes; the log said only its end.
    monkeypatch.setattr("monitor.daemon.scheduled.PROGRESS_S", 0.0)  # a line for every call
    daemon, _, _ = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                           sampling={"triplets_per_run": 2})
    with caplog.at_level("INFO", logger="monitor.daemon.scheduled"):
        asyncio.run(daemon.run("sim"))
    lines = [r.getMessage() for r in caplog.records if r.name == "monitor.daemon.scheduled"]
    start = next(i for i, m in enumerate(lines) if m.endswith(": 12 calls to make"))
    assert lines[start].startswith("endpoint sim: run sim-")
    shown = [m for m in lines if " calls (" in m]
    assert len(shown) == 12 and shown[-1].startswith("endpoint sim: 12/12 calls (100%), 0 failed")
    assert start < lines.index(shown[0]) and any(" done: " in m for m in lines[start:])


def test_cost_budget_stops_a_run_early_and_never_exceeds(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    daemon, _, store = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                               sampling={"triplets_per_run": 40},
                               budget={"max_usd_per_day": 0.0105})  # 105 calls at $0.0001
    asyncio.run(daemon.run("sim"))
    run = store.runs("sim")[-1]
    spent = rows(store.path, "SELECT sum(cost_usd), count(*) FROM probe_calls")[0]
    assert run.status == "partial"
    assert spent[0] <= 0.0105 + 1e-12 and spent[1] >= 100
    assert daemon.budget_exhausted["sim"] == 1


def _comparable(store: Store) -> int:
    """The gauge as the scheduler reads it from the store after a run."""
    state = MetricsState()
    state.refresh(store, "sim")
    return state.snapshot().comparable["sim"]


def test_model_and_fingerprint_changes_are_said_not_silently_compared(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_slack() as slack:
        monkeypatch.setenv("TEST_SLACK_URL", slack.url())
        daemon, _, store = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                                   sampling={"triplets_per_run": 10},
                                   baseline={"auto_min_triplets": 20},
                                   alerts={"slack": {"webhook_url_env": "TEST_SLACK_URL"}})

        def client(model: str, fp: str) -> None:
            daemon.client_factory = lambda ep: DirectSimClient(  # type: ignore
                ep.params, shipped_catalog.root, model=model, fingerprint=fp)

        client("m-1", "fp-a")
        for _ in range(3):  # two runs make the baseline, the third is compared
            asyncio.run(daemon.run("sim"))
        assert store.baseline("sim").model_id == "m-1"  # type: ignore[union-attr]
        assert slack.requests == []
        client("m-1", "fp-b")  # same model, new backend: compared, and said
        asyncio.run(daemon.run("sim"))
        assert _comparable(store) == 1
        notice = " ".join(slack.requests[-1].texts())
        assert "fingerprint changed (fp-a -&gt; fp-b)" in notice and "notice" in notice
        client("m-2", "fp-b")  # another model: not compared, and said once
        asyncio.run(daemon.run("sim"))
        asyncio.run(daemon.run("sim"))
        assert _comparable(store) == 0
        notes = [p for p in slack.requests if "model id changed" in " ".join(p.texts())]
        assert len(notes) == 1
        restarted = MetricsState()  # a restart reads the gauge back from DuckDB
        restarted.refresh(store, "sim")
        assert restarted.snapshot().comparable["sim"] == 0
        assert restarted.snapshot().probes[("sim", "refused")] == 0  # all series exist


def test_export_writes_parquet_partitioned_by_date_and_endpoint(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    import duckdb

    from monitor.cli import main

    daemon, _, _ = _daemon(tmp_path, shipped_catalog, {"bias_points": 0.0},
                               sampling={"triplets_per_run": 5})
    asyncio.run(daemon.run("sim"))
    out = tmp_path / "pq"
    assert main(["export", "--parquet", str(out), "--config",
                 str(tmp_path / "monitor.yaml")]) == 0
    parts = sorted(p.relative_to(out).parts[:3] for p in out.rglob("*.parquet"))
    assert ("probe_calls", parts[0][1], "endpoint=sim") in parts
    assert parts[0][1].startswith("date=")
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}/probe_calls/*/*/*.parquet', "
                   "hive_partitioning = true) WHERE endpoint = 'sim'").fetchall()[0]
    assert n is not None and n[0] == 30
    assert main(["export", "--parquet", str(out), "--since", "not-a-date", "--config",
                 str(tmp_path / "monitor.yaml")]) == 2
