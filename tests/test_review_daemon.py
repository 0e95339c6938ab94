"""A run's review through the real daemon (`monitor run` and its run processes) against a
local OpenAI-protocol server whose answers name no model:

- a daemon with no sink that can deliver says so at start, in /healthz and the metrics;
- the automatic baseline is set (a provider without a model id never got one);
- bias_monitor_baseline_comparable is 0 on the run that sets the baseline (it is not
  compared) and 1 once a run is compared;
- a daemon SIGTERMed while a run's top-up is asking leaves the run interrupted, not
  "complete"; the next daemon resumes the top-up where it stopped, and the run is
  evaluated, reported and listed as complete.
"""

from __future__ import annotations

import io
import json
import signal
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from monitor.catalog import Catalog
from monitor.cli import main
from monitor.store import Store
from monitor.vocab import RunStatus, StatKind
from tests.support.biased import BiasedModel
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import serve
from tests.support.process import Gate, daemon, free_port, get, wait_until

pytestmark = pytest.mark.slow

CALLS_PER_RUN = 40  # 20 triplets in en and zh


def _gauge(port: int, name: str) -> float | None:
    _, text = get(f"http://127.0.0.1:{port}/metrics")
    line = next((x for x in text.splitlines() if x.startswith(f'{name}{{endpoint="local"}}')),
                None)
    return None if line is None else float(line.rsplit(" ", 1)[1])


def _review(store: Store, run_id: str) -> float | None:
    found = store.stats_of([run_id], kind=StatKind.REVIEW)
    return found[0][1].value if found else None


def test_the_review_sets_a_baseline_without_model_ids_says_when_it_compared_and_resumes(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLACK_WEBHOOK_URL", raising=False)
    model = BiasedModel(shipped_catalog, model=None)
    gate = Gate(10**9, model)  # open until armed
    port = free_port()
    with serve(gate) as llm:
        cfg = write_config(
            tmp_path, [openai_endpoint(llm.api_base, max_concurrency=8)],
            schedule={"every": "2s", "cron": None},
            sampling={"triplets_per_run": 20, "scenarios": ["university"],
                      "languages": ["en", "zh"]},
            baseline={"auto_min_triplets": 40},  # two runs
            metrics={"host": "127.0.0.1", "port": port})
        db = tmp_path / "monitor.duckdb"
        store = Store(db, lock_timeout_s=60)
        log1, log2, log3 = (tmp_path / f"d{i}.log" for i in (1, 2, 3))

        with daemon(cfg, log1) as proc:
            wait_until(lambda: store.baseline("local") is not None, 480, log1)
            # No sink can deliver (SLACK_WEBHOOK_URL unset): said at start, in the metrics
            # and in /healthz; pages would wait in the outbox.
            assert "no sink can deliver" in log1.read_text()
            assert _gauge(port, "bias_monitor_alert_sinks") is None  # no endpoint label
            _, metrics = get(f"http://127.0.0.1:{port}/metrics")
            assert "bias_monitor_alert_sinks 0.0" in metrics
            assert json.loads(get(f"http://127.0.0.1:{port}/healthz")[1])["alert_sinks"] == []
            base = store.baseline("local")
            assert base is not None and base.model_id == "openai/test-model"
            # The run that set it was not compared: the gauge says so once read back.
            setter = base.run_ids[-1]
            assert _review(store, setter) == 0.0
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finished = [r for r in store.runs("local") if r.status == RunStatus.COMPLETE]
        assert finished[-1].run_id == setter  # no run compared yet

        # CN's bias is raised; the next run's own calls pass, its top-up's are held.
        model.bias["CN"] = 3.0
        gate.open_for = gate.seen + CALLS_PER_RUN
        with daemon(cfg, log2) as proc:
            wait_until(lambda: _gauge(port, "bias_monitor_baseline_present") == 1.0, 300, log2)
            assert _gauge(port, "bias_monitor_baseline_comparable") == 0.0
            wait_until(lambda: gate.seen > gate.open_for, 480, log2)  # a top-up is asking
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        gate.released.set()
        stopped = store.runs("local")
        run = next(r for r in stopped if r.status not in (RunStatus.COMPLETE, RunStatus.TOPUP)
                   and r.run_id not in base.run_ids)
        assert run.status == RunStatus.INTERRUPTED and "review" in (run.reason or "")
        assert _review(store, run.run_id) is None  # not evaluated: nothing half-stored
        assert all(c.last_run_id != run.run_id for c in store.alert_states("local").values())
        topup = next(r for r in stopped if r.status == RunStatus.TOPUP)
        asked_before = len(store.done_calls(topup.run_id))

        with daemon(cfg, log3) as proc:
            wait_until(lambda: _review(store, run.run_id) is not None, 480, log3)
            wait_until(lambda: _gauge(port, "bias_monitor_baseline_comparable") == 1.0, 300,
                       log3)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
    resumed = store.get_run(run.run_id)
    assert resumed is not None and resumed.status == RunStatus.COMPLETE
    assert _review(store, run.run_id) == 1.0  # compared
    cn = store.alert_states("local")[("all", "CN")]
    assert cn.state == "firing"  # confirmed by the top-up it resumed
    verdicts = {st.key: json.loads(st.extra or "{}")
                for _, st in store.stats_of([run.run_id], kind=StatKind.TOPUP)}
    assert verdicts["CN"]["decision"] == "confirmed"
    # The top-up went on from what it had: its answers before the stop are kept.
    assert len(store.done_calls(topup.run_id)) >= asked_before
    # Its report was written and the runs list says it completed.
    assert (tmp_path / "reports" / run.run_id / "index.html").is_file()
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["runs", "--config", str(cfg), "--json"]) == 0
    listed = {r["run_id"]: r["status"] for r in json.loads(out.getvalue())["runs"]}
    assert listed[run.run_id] == "complete"
