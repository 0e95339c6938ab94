"""`monitor run` as a real process: schedule, /metrics and /healthz, CLI commands
while it runs, SIGTERM exits 0 with the run interrupted and resumed next start, and
the latest run's report served at /report."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.store import Store
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve
from tests.support.process import Gate, daemon, free_port, get, wait_until

pytestmark = pytest.mark.slow


def _answer(req: Request) -> Reply:
    names = options_in(req.user)
    block = {lab: {"score": 5 + i} for i, lab in enumerate(names)}
    return Reply(json.dumps(block), delay_s=0.25)


def _ok_probes(port: int) -> float:
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return 0.0
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "bias_monitor_probes_total" and s.labels.get("status") == "ok")


def _latest_complete(db: Path) -> str:
    done = [r for r in Store(db, lock_timeout_s=60).runs("local") if r.status == "complete"]
    return max(done, key=lambda r: r.started_at).run_id if done else ""


def _report_shows(port: int, run_id: str) -> bool:
    """/report redirects to `run_id`'s report (not followed, to read where it goes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/report")
        resp = conn.getresponse()
        return bool(run_id) and resp.status == 302 and resp.getheader(
            "Location") == f"report/{run_id}/"
    finally:
        conn.close()


def test_daemon_serves_metrics_and_sigterm_interrupts_cleanly(tmp_path: Path) -> None:
    port = free_port()
    gate = Gate(6, _answer)
    with serve(gate) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=2)],
                           schedule={"every": "1h", "cron": None},
                           sampling={"triplets_per_run": 6},
                           metrics={"host": "127.0.0.1", "port": port})
        db = tmp_path / "monitor.duckdb"
        with daemon(cfg, tmp_path / "d1.log") as proc:
            # Runs at start (nothing measured yet): 6 calls are answered, then the
            # 7th and 8th (concurrency 2) are held by the gate: the run is mid-flight.
            wait_until(lambda: len(server.requests) >= 8, 300)
            status, body = get(f"http://127.0.0.1:{port}/healthz")
            assert status == 200 and json.loads(body)["scheduler_alive"] is True
            # A CLI command gets its answer while the daemon writes.
            out = subprocess.run([sys.executable, "-m", "monitor.cli", "baseline", "show",
                                  "--config", str(cfg)], capture_output=True, text=True,
                                 timeout=60)
            assert out.returncode == 0, out.stderr
            assert "no baseline yet" in out.stdout
            proc.send_signal(signal.SIGTERM)
            # No new call starts; the two in flight are awaited (paid for): let them end.
            wait_until(lambda: "stopping: no new call" in (tmp_path / "d1.log").read_text(), 300)
            gate.released.set()
            assert proc.wait(timeout=30) == 0
        runs = Store(db).runs("local")
        assert [r.status for r in runs] == ["interrupted"]
        assert runs[0].reason is not None and "SIGTERM" in runs[0].reason
        asked_before = len(Store(db).calls_frame([runs[0].run_id]))
        assert asked_before == 8 == len(server.requests)  # 6 before, 2 drained, no new one
        # Restart: the interrupted run is resumed first, then a new one is made.
        with daemon(cfg, tmp_path / "d2.log") as proc:
            wait_until(lambda: any(r.status == "complete" for r in Store(db).runs("local")), 360)
            wait_until(lambda: _ok_probes(port) >= 36, 300)
            _, text = get(f"http://127.0.0.1:{port}/metrics")
            # The latest finished run's report, written by its run process, is served.
            wait_until(lambda: _report_shows(port, _latest_complete(db)), 300)
            latest = _latest_complete(db)
            status, page = get(f"http://127.0.0.1:{port}/report")  # follows the redirect
            assert status == 200 and latest in page
            status, index = get(f"http://127.0.0.1:{port}/report/")
            assert status == 200 and f'href="{latest}/"' in index
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    first = Store(db).get_run(runs[0].run_id)
    assert first is not None and first.status == "complete"
    calls = Store(db).calls_frame([runs[0].run_id])
    assert len(calls) == 36 and not calls.duplicated(["triplet_id", "language"]).any()
    log = (tmp_path / "d2.log").read_text()
    assert f"resuming interrupted run {runs[0].run_id}" in log
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "bias_monitor_probes" in families  # counters are exposed without _total
    ok = [s for s in families["bias_monitor_probes"].samples
          if s.labels == {"endpoint": "local", "status": "ok"}]
    assert ok and ok[0].value >= 36
    assert any(s.labels.get("scenario") == "all"
               for s in families["bias_monitor_md_points"].samples)


def test_a_failing_endpoint_is_counted_and_the_daemon_keeps_running(tmp_path: Path) -> None:
    port = free_port()
    dead = free_port()  # nobody listens there
    cfg = write_config(tmp_path, [openai_endpoint(f"http://127.0.0.1:{dead}/v1")],
                       schedule={"every": "2s", "cron": None}, sampling={"triplets_per_run": 1},
                       metrics={"host": "127.0.0.1", "port": port})

    def failures() -> float:
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        if status != 200:
            return 0.0
        for fam in text_string_to_metric_families(text):
            if fam.name == "bias_monitor_run_failures":
                return sum(s.value for s in fam.samples if s.name.endswith("_total"))
        return 0.0

    log = tmp_path / "d.log"
    with daemon(cfg, log) as proc:
        # Each run is a child process that first imports LiteLLM (seconds), so the
        # 2 s slots are skipped (counted too) before the first run has failed.
        wait_until(lambda: failures() >= 2 and "produced no results" in log.read_text(), 360)
        assert proc.poll() is None  # still alive after failed runs
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert "produced no results" in log.read_text()
