"""Every failure outside the configuration: what the user sees, the exit code, what is kept.

failure class                        exit     what the user sees (one line)
disk full while a run writes         4        no space on <mount>; free at least X; resume cmd
metrics port already in use          2        cannot listen on host:port (metrics.port)
damaged database (header or data)    2        the database file is damaged: backup, export
run process killed (SIGKILL, OOM)    -        `monitor runs`: orphaned; the daemon resumes it
old / repeatedly dying run           -        closed as failed with its reason, logged
endpoint unreachable                 3        all N calls failed; most common error: ...
every answer unreadable              3        every call was answered, but none could be read
one language only                    2        at least two different languages
Ctrl-C / SIGTERM of probe --once     130/143  resume with: monitor probe ... --config PATH
slot while a run goes on             -        counted in runs_skipped_total, not a failure
cron out of range (config check)     2        schedule.cron: ... is not a cron expression
malformed YAML                       2        file:line:column: not valid YAML

docs/reliability.md has the same table with what is kept and the test of each row.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog
from monitor.cli import main
from monitor.daemon.recovery import MAX_ATTEMPTS, triage
from monitor.serve.metrics import MetricsState
from monitor.store import CellRecord, RunRow, Store
from monitor.store import owner as owners
from tests.support.helpers import (
    DirectSimClient,
    metrics_of,
    openai_endpoint,
    sim_daemon,
    write_config,
)
from tests.support.openai import Reply, Request, options_in, serve
from tests.support.process import Gate, daemon, free_port, get, interrupt_cli, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _scored(req: Request) -> Reply:
    block = {lab: {"score": 5 + i, "strengths": ["a"], "weaknesses": ["b"]}
             for i, lab in enumerate(options_in(req.user))}
    return Reply(json.dumps(block), delay_s=0.02)


def _cli(*argv: str, env: dict[str, str] | None = None,
         timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: real exit code, real stderr."""
    return subprocess.run([sys.executable, "-m", "monitor.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _in_process(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("monitor: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


# -- 1. disk full -----------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 2 MB tmpfs, as a full disk; root is needed to mount it."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
def test_a_full_disk_stops_the_run_keeps_every_paid_answer_and_resume_imports_them(
        tmp_path: Path, small_disk: Path) -> None:
    state = tmp_path / "state"
    with serve(_scored) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=4)],
                           storage={"path": str(small_disk / "monitor.duckdb")},
                           sampling={"triplets_per_run": 40})
        env = {"XDG_STATE_HOME": str(state)}
        first = _cli("probe", "--once", "--config", str(cfg), env=env)
        assert first.returncode == 4, first.stderr
        line = _one_error_line(first.stderr)
        assert "No space left on device" in line and str(small_disk) in line
        assert "free at least" in line and "spool.jsonl" in line
        assert f"--config {cfg}" in line and "--resume" in line
        asked_first = len(server.requests)
        assert asked_first < 240  # the first failed write stopped the run from asking more
        store = Store(small_disk / "monitor.duckdb", read_only=True)
        [run] = store.runs()
        # Marking the run interrupted is itself a write: on a disk this full it may not
        # fit, and the run is left running with a dead owner (docs/reliability.md), which
        # the next command closes (the --resume below claims it).
        if run.status == "running":
            assert not owners.alive(run.owner, run.heartbeat_at)
        else:
            assert run.status == "interrupted" and "storage failed" in (run.reason or "")
        spools = list(state.rglob("*.spool.jsonl")) + list(small_disk.glob("*.spool.jsonl"))
        assert len(spools) == 1 and spools[0].name.endswith(f"{run.run_id}.spool.jsonl")
        spooled = len(spools[0].read_text().splitlines())
        stored = len(store.calls_frame([run.run_id]))
        assert stored + spooled == asked_first  # every answer paid for is kept
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        second = _cli("probe", "--once", "--config", str(cfg), "--resume", run.run_id, env=env)
        assert second.returncode == 0, second.stderr
        assert len(server.requests) == 240  # nothing spooled was asked again
    final = Store(small_disk / "monitor.duckdb").calls_frame([run.run_id])
    assert len(final) == 240 and not final.duplicated(["triplet_id", "language"]).any()
    assert not spools[0].exists()
    assert Store(small_disk / "monitor.duckdb").get_run(run.run_id).status == "complete"  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_full_disk_under_a_calibration_names_the_calibrate_resume_command(
        tmp_path: Path, small_disk: Path) -> None:
    with serve(_scored) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=4)],
                           storage={"path": str(small_disk / "monitor.duckdb")})
        out = _cli("baseline", "calibrate", "--config", str(cfg), "--triplets-per-cell", "40",
                   env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert out.returncode == 4, out.stderr
    line = _one_error_line(out.stderr)
    assert "No space left on device" in line
    assert "then resume with: monitor baseline calibrate --resume" in line
    assert f"--config {cfg}" in line


# -- 2. metrics port in use -------------------------------------------------------------------


@pytest.mark.slow
def test_a_taken_metrics_port_is_one_line_naming_host_port_and_key(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = write_config(tmp_path, [openai_endpoint("http://127.0.0.1:9/v1")],
                           metrics={"host": "127.0.0.1", "port": port})
        out = _cli("run", "--config", str(cfg), timeout=120)
    assert out.returncode == 2, out.stderr
    line = _one_error_line(out.stderr)
    assert f"127.0.0.1:{port}" in line and "metrics.port" in line and str(cfg) in line


# -- 3. a damaged database --------------------------------------------------------------------


def _demo_db(tmp_path: Path, catalog: Catalog) -> tuple[Path, Path]:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo",
                                   "max_concurrency": 16, "rpm": 100000,
                                   "params": {"seed": 1}}], sampling={"triplets_per_run": 30})
    code, _, err = _in_process("probe", "--once", "--config", str(cfg))
    assert code == 0, err
    return cfg, tmp_path / "monitor.duckdb"


def _flip(path: Path, offset: int, n: int = 200) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory, shipped_catalog: Catalog
            ) -> dict[str, Path]:
    """A demo database with a baseline; a copy with a damaged metadata block, and a
    copy whose blocks holding the scores are damaged while its metadata reads."""
    base = tmp_path_factory.mktemp("damaged")
    cfg, db = _demo_db(base, shipped_catalog)
    code, _, err = _in_process("baseline", "set", "--latest", "--config", str(cfg))
    assert code == 0, err
    meta = base / "meta.duckdb"
    shutil.copy(db, meta)
    _flip(meta, 12288 + 262144 + 100)  # the first data block: the catalog's metadata
    size = db.stat().st_size
    for block in range((size - 12288) // 262144 - 1, 1, -1):
        candidate = base / f"block{block}.duckdb"
        shutil.copy(db, candidate)
        _flip(candidate, 12288 + block * 262144 + 100)
        try:
            store = Store(candidate)
            run_ids = [r.run_id for r in store.runs()]
        except Exception:
            continue
        try:
            store.scores_frame(run_ids)
        except Exception:
            return {"cfg": cfg, "meta": meta, "data": candidate}
    pytest.fail("no block of the demo database holds only scores")


@pytest.mark.parametrize(("which", "command"), [
    ("meta", ["report", "--out", "REPORT"]), ("meta", ["baseline", "show"]),
    ("meta", ["runs"]), ("meta", ["probe", "--once", "--triplets", "2"]),
    ("data", ["report", "--out", "REPORT"]), ("data", ["baseline", "show"]),
    ("data", ["probe", "--once", "--triplets", "2"])])
def test_a_damaged_database_is_said_to_be_damaged_never_to_be_replaced(
        damaged: dict[str, Path], tmp_path: Path, which: str, command: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.duckdb"
    shutil.copy(damaged[which], db)
    digest = db.read_bytes()
    monkeypatch.setenv("MONITOR_STORAGE__PATH", str(db))
    argv = [a.replace("REPORT", str(tmp_path / "r")) for a in command]
    code, _, err = _in_process(*argv, "--config", str(damaged["cfg"]))
    assert code == 2, err
    line = _one_error_line(err)
    assert "the database file is damaged" in line and str(db) in line
    assert "storage.path" not in line and "backup" in line and "monitor export" in line
    if command[0] != "probe":  # a run may add its rows in fresh blocks before it reads
        assert db.read_bytes() == digest  # nothing was written to it


def test_export_saves_what_is_readable_of_a_damaged_database(
        damaged: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.duckdb"
    shutil.copy(damaged["data"], db)
    monkeypatch.setenv("MONITOR_STORAGE__PATH", str(db))
    out = tmp_path / "parquet"
    code, stdout, err = _in_process("export", "--parquet", str(out), "--config",
                                    str(damaged["cfg"]))
    assert code == 2
    line = _one_error_line(err)
    assert "damaged" in line and "not readable: " in line and "tables exported" in line
    assert "runs:" in stdout and (out / "runs").is_dir()  # the readable tables are saved


# -- 4. runs whose process is gone ------------------------------------------------------------


def _row(run_id: str, status: str, *, owner: str | None, started: datetime,
         attempts: int = 1, version: str = "v1", setup: str = "default") -> RunRow:
    return RunRow(run_id=run_id, endpoint="sim", model="simulated/demo", simulated=True,
                  run_index=0, seed=0, catalog_version=version, scenarios=["university"],
                  languages=["en", "zh"], variants=["plain"], triplets=2, planned_calls=4,
                  started_at=started, finished_at=None, status=status, owner=owner,
                  heartbeat_at=started, reason=None,
                  attempts=attempts, setup=setup)


def _dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    token = owners.token(proc.pid)
    proc.wait()
    return token


def test_a_run_whose_process_died_is_found_and_closed_as_interrupted(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.duckdb")
    now = datetime.now(UTC)
    store.create_run(_row("dead", "running", owner=_dead_owner(), started=now))
    store.create_run(_row("alive", "running", owner=owners.token(), started=now))
    closed = store.close_orphans()
    assert [r.run_id for r in closed] == ["dead"]
    dead = store.get_run("dead")
    assert dead is not None and dead.status == "interrupted"
    assert "ended without closing it" in (dead.reason or "")
    assert store.get_run("alive").status == "running"  # type: ignore[union-attr]


def test_resume_refuses_a_run_whose_process_still_runs(tmp_path: Path,
                                                        shipped_catalog: Catalog) -> None:
    cfg, db = _demo_db(tmp_path, shipped_catalog)
    store = Store(db)
    [run] = store.runs()
    store.claim_run(run.run_id, owners.token())  # this very process: alive
    code, _, err = _in_process("probe", "--once", "--config", str(cfg), "--resume", run.run_id)
    assert code == 2
    assert "still running in pid" in _one_error_line(err)


def test_the_resume_policy_resumes_the_newest_and_closes_the_rest_with_why() -> None:
    now = datetime.now(UTC)
    runs = [_row("old", "interrupted", owner=None, started=now - timedelta(days=2)),
            _row("moved", "interrupted", owner=None, started=now, version="v0"),
            _row("prompted", "interrupted", owner=None, started=now, setup="setup-1"),
            _row("dying", "interrupted", owner=None, started=now, attempts=MAX_ATTEMPTS),
            _row("older", "interrupted", owner=None, started=now - timedelta(hours=2)),
            _row("newest", "interrupted", owner=None, started=now - timedelta(hours=1))]
    plan = triage(runs, "v1", "default", now=now)
    assert plan.resume is not None and plan.resume.run_id == "newest"
    why = {r.run_id: reason for r, reason in plan.close}
    assert set(why) == {"old", "moved", "prompted", "dying", "older"}
    assert "more than 24 h" in why["old"] and "catalog changed" in why["moved"]
    assert "assistant setup changed" in why["prompted"]
    assert f"started {MAX_ATTEMPTS} times" in why["dying"] and "newer" in why["older"]


def test_the_daemon_resumes_an_orphan_and_logs_what_it_closes(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo",
                                   "max_concurrency": 8, "rpm": 100000, "params": {"seed": 2}}])
    daemon, _, store = sim_daemon(cfg, shipped_catalog)
    asyncio.run(daemon.run("sim"))  # a first, complete run
    [first] = store.runs("sim")
    now = datetime.now(UTC)
    stale = RunRow(**{**first.__dict__, "run_id": "sim-stale", "run_index": 7,
                      "status": "interrupted", "started_at": now - timedelta(days=3)})
    orphan = RunRow(**{**first.__dict__, "run_id": "sim-orphan", "run_index": 8,
                       "status": "running", "owner": _dead_owner(), "started_at": now,
                       "finished_at": None})
    store.create_run(stale)
    store.create_run(orphan)
    caplog.set_level("INFO")
    asyncio.run(daemon.run("sim"))
    assert store.get_run("sim-orphan").status == "complete"  # type: ignore[union-attr]
    closed = store.get_run("sim-stale")
    assert closed is not None and closed.status == "failed"
    assert "more than 24 h" in (closed.reason or "")
    assert "sim-orphan was left running" in caplog.text
    assert "sim-stale closed as failed" in caplog.text
    assert "resuming interrupted run sim-orphan" in caplog.text


# -- 5. endpoint down after a baseline ---------------------------------------------------------


class _Down:
    async def complete(self, messages: list[dict[str, str]], **_: Any) -> Any:
        from monitor.measure.calls import CallResult

        return CallResult(text=None, error="APIConnectionError: Connection refused",
                          latency_s=0.01, input_tokens=None, output_tokens=None,
                          cost_usd=None, model_id=None, fingerprint=None, attempts=1)


def test_an_unreachable_endpoint_says_nothing_about_the_model_and_keeps_the_gauges(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "openai/fake-model",
                                   "api_base": "http://127.0.0.1:9/v1", "max_concurrency": 8,
                                   "rpm": 100000}], baseline={"auto_min_triplets": 4})
    daemon, _, store = sim_daemon(cfg, shipped_catalog, lambda ep: DirectSimClient(
        {"seed": 3}, shipped_catalog.root, model="fake-model"))
    for _ in range(3):
        asyncio.run(daemon.run("sim"))
    assert store.baseline("sim") is not None
    before = metrics_of(store, "sim")
    assert before.comparable == {"sim": 1} and before.md
    daemon.client_factory = lambda ep: _Down()  # type: ignore[assignment,return-value]
    asyncio.run(daemon.run("sim"))
    after = metrics_of(store, "sim")
    assert after.last_run_success == {"sim": 0}
    assert after.comparable == {"sim": 1}  # the outage is not a model change
    assert after.md == before.md and after.drift == before.drift  # the series stay
    assert not any("model id changed" in i.payload for i in store.outbox_pending("sim"))
    assert daemon.failures == {"sim": 1}


# -- 6. one language ----------------------------------------------------------------------------


def test_a_single_language_is_refused_with_the_rule(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}])
    code, _, err = _in_process("probe", "--once", "--config", str(cfg), "--languages", "en")
    assert code == 2
    line = _one_error_line(err)
    assert "--languages en" in line and "at least two different languages" in line
    assert not Store(tmp_path / "monitor.duckdb").runs()  # nothing stored


# -- 7. Ctrl-C and SIGTERM of probe --once ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_probe_keeps_the_calls_in_flight_and_says_how_to_resume(
        tmp_path: Path, sig: signal.Signals, code: int) -> None:
    gate = Gate(4, _scored)
    with serve(gate) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=2)])
        # 4 answered, 2 held: mid-run; the two calls on the wire end and are kept.
        returncode, err = interrupt_cli(["probe", "--once", "--config", str(cfg)], server,
                                        gate, sig, held_at=6)
        asked = len(server.requests)
    assert returncode == code, err
    [run] = Store(tmp_path / "monitor.duckdb").runs()
    assert run.status == "interrupted" and run.reason
    assert f"monitor probe --once --resume {run.run_id} --config {cfg}" in err
    assert "Traceback" not in err and "never awaited" not in err
    assert len(Store(tmp_path / "monitor.duckdb").calls_frame([run.run_id])) == 6 == asked


# -- 8 and 10. the daemon: skipped slots, zeroed counters, quiet DEBUG logs, clean shutdown ----


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    status, text = get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return {}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.mark.slow
def test_skipped_slots_are_counted_apart_and_the_daemon_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    gate = Gate(2, _scored)  # the first run stays in flight: every later slot is skipped
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with serve(gate) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=2)],
                           schedule={"every": "1s", "cron": None},
                           metrics={"host": "127.0.0.1", "port": port})
        log = tmp_path / "d.log"
        key = ("endpoint", "local"),
        with daemon(cfg, log, "--log-level", "DEBUG", env={"TMPDIR": str(scratch)}) as proc:
            wait_until(lambda: len(server.requests) >= 4, 480)  # 2 answered, 2 held: in flight
            wait_until(lambda: _samples(port).get(("bias_monitor_runs_skipped_total", key), 0) >= 3,
                  480)
            values = _samples(port)
            assert values[("bias_monitor_run_failures_total", key)] == 0
            assert values[("bias_monitor_alert_delivery_failures_total", key)] == 0
            proc.send_signal(signal.SIGTERM)
            wait_until(lambda: "stopping: no new call" in log.read_text(), 300)
            gate.released.set()
            assert proc.wait(timeout=60) == 0
    text = log.read_text()
    assert "run not completed" not in text  # a skip is not a failure
    assert text.count("scheduled slot skipped") == 1  # logged once per 10 minutes
    assert "never awaited" not in text and "Traceback" not in text
    # DEBUG is the monitor's own: no request dumps of the OpenAI client or httpx.
    for noisy in ("openai._base_client", "httpcore", "httpx", "apscheduler"):
        assert f" {noisy}" not in text, noisy
    assert "DEBUG monitor" in text or "INFO monitor" in text
    assert list(scratch.iterdir()) == []  # no temporary file left behind


@pytest.mark.slow
def test_a_killed_daemon_leaves_no_temporary_file(tmp_path: Path) -> None:
    gate = Gate(2, _scored)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with serve(gate) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=2)],
                           metrics={"host": "127.0.0.1", "port": free_port()})
        with daemon(cfg, tmp_path / "d.log", env={"TMPDIR": str(scratch)}) as proc:
            wait_until(lambda: len(server.requests) >= 4, 480)  # the run is in its child
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        # The child has a session of its own, so no signal to the daemon's group reaches
        # it; the kernel tells it that its parent died and it stops like at SIGTERM, rather
        # than finishing its run beside the next daemon.
        log = tmp_path / "d.log"
        wait_until(lambda: "stopping: no new call" in log.read_text(errors="replace"), 300)
        gate.released.set()  # the two calls on the wire end and are kept
        # The child logs this once it has stored the run as interrupted. The database is
        # read only then: a reader polling it meanwhile could hold the file's lock just
        # when the child writes the run's end.
        wait_until(lambda: "run interrupted by shutdown" in log.read_text(errors="replace"),
                   480)
        wait_until(lambda: "nothing to report to" in log.read_text(errors="replace"), 300)
        assert "Traceback" not in log.read_text(errors="replace")
        [run] = Store(tmp_path / "monitor.duckdb").runs()
        # resumable by the next daemon
        assert run.status == "interrupted", (run, log.read_text(errors="replace")[-3000:])
    assert list(scratch.iterdir()) == []


# -- 9. config check: as strict as run, secrets masked, YAML positions -------------------------


def test_config_check_refuses_the_cron_that_run_refuses(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}],
                       schedule={"cron": "61 * * * *"})
    code, _, err = _in_process("config", "check", "--config", str(cfg))
    assert code == 2
    line = _one_error_line(err)
    assert "schedule.cron" in line and "61 * * * *" in line and str(cfg) in line


def test_config_check_masks_keys_in_params_and_in_the_url(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{
        "name": "gw", "model": "openai/x", "params": {"api_key": "sk-live-123", "max_tokens": 5},
        "api_base": "https://user:pw-456@gw.example/v1?key=qs-789&region=eu"}])
    code, out, err = _in_process("config", "check", "--config", str(cfg))
    assert code == 0
    for secret in ("sk-live-123", "pw-456", "qs-789"):
        assert secret not in out and secret not in err
    data = json.loads(out.split("\n", 1)[1])
    params = data["endpoints"][0]["params"]
    assert params["api_key"] == "***" and params["max_tokens"] == 5
    assert "params.api_key holds a secret" in err and "api_base carries credentials" in err


def test_malformed_yaml_keeps_its_line_and_column(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("endpoints:\n  - name: a\n    model: [unclosed\nsampling: {}\n")
    code, _, err = _in_process("config", "check", "--config", str(cfg))
    assert code == 2
    line = _one_error_line(err)
    assert f"{cfg}:4:" in line and "not valid YAML" in line


# -- 10. the small ones -------------------------------------------------------------------------


def test_version() -> None:
    out = _cli("--version", timeout=60)
    from monitor import __version__

    assert out.returncode == 0 and out.stdout.strip() == f"bias-monitor {__version__}"


def test_runs_lists_status_calls_failures_and_the_most_common_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [openai_endpoint("http://127.0.0.1:9/v1")])  # nobody there
    code, _, err = _in_process("probe", "--once", "--config", str(cfg))
    assert code == 3
    line = _one_error_line(err)
    assert "all 24 calls failed" in line and "most common error (24 of 24)" in line
    assert "Connection" in line
    code, out, _ = _in_process("runs", "--config", str(cfg), "--json")
    assert code == 0
    [run] = json.loads(out)["runs"]
    assert run["status"] == "failed" and run["calls"] == 24 and run["planned_calls"] == 24
    assert run["status_counts"]["failed"] == 24 and "Connection" in run["top_error"]
    assert run["top_error_count"] == 24 and "no answer could be scored" in run["reason"]
    assert run["setup"] == "default"  # the paper's way: no system prompt, text answers
    code, out, _ = _in_process("runs", "--config", str(cfg))
    assert code == 0 and run["run_id"] in out and "failed" in out and "Connection" in out


def test_answers_that_cannot_be_read_are_said_to_be_unreadable(tmp_path: Path) -> None:
    with serve(lambda req: Reply("I think all three are lovely places.")) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        code, _, err = _in_process("probe", "--once", "--config", str(cfg))
    assert code == 3
    line = _one_error_line(err)
    assert "every call was answered, but no answer could be read" in line
    assert "24 unparseable" in line and "most common reason (24 of 24): no scores" in line
    assert "check the endpoint" not in line


def test_export_writes_every_table(tmp_path: Path, shipped_catalog: Catalog) -> None:
    cfg, db = _demo_db(tmp_path, shipped_catalog)
    store = Store(db)
    [run] = store.runs()
    store.set_baseline("sim", [run], auto=False)
    store.save_alert_states("sim", [CellRecord(scenario="all", country="CN", state="pending",
                                               s_plus=1.0, s_minus=0.0, alarm_runs=1, calm_runs=0,
                                               z=2.0, reason="r",
                                               last_run_id=run.run_id,
                                               changed_at=datetime.now(UTC), notified_at=None)], [])
    store.outbox_add("sim", [json.dumps({"kind": "note", "text": "hello"})], ["slack"])
    code, out, err = _in_process("export", "--parquet", str(tmp_path / "pq"), "--config",
                                 str(cfg))
    assert code == 0, err
    for table in ("runs", "probe_calls", "scores", "run_stats", "baselines", "alert_state",
                  "outbox", "outbox_delivery"):
        assert f"{table}: " in out and any((tmp_path / "pq" / table).rglob("*.parquet")), table


def test_an_unknown_cost_is_no_cost_series_and_counted_as_unpriced(tmp_path: Path) -> None:
    from monitor.serve.exporter import make_registry, render

    with serve(_scored) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        code, _, err = _in_process("probe", "--once", "--config", str(cfg))
    assert code == 0, err
    state = MetricsState()
    state.refresh(Store(tmp_path / "monitor.duckdb"), "local")
    text = render(make_registry(state)).decode()
    assert 'bias_monitor_cost_usd_total{endpoint="local"}' not in text
    assert 'bias_monitor_probes_unpriced_total{endpoint="local"} 24.0' in text


def test_the_daemon_runs_at_start_when_an_interrupted_run_waits(tmp_path: Path) -> None:
    from monitor.daemon.scheduler import _wants_run_now

    store = Store(tmp_path / "m.duckdb")
    now = datetime.now(UTC)
    assert not _wants_run_now(store, "sim", "v1")
    store.create_run(_row("old", "interrupted", owner=None, started=now - timedelta(days=2)))
    assert not _wants_run_now(store, "sim", "v1")  # too old: the next run closes it
    store.create_run(_row("killed", "running", owner=_dead_owner(), started=now))
    assert _wants_run_now(store, "sim", "v1")  # an orphan, closed now and resumed at once
    assert store.get_run("killed").status == "interrupted"  # type: ignore[union-attr]
