"""`monitor run` starts each run as a child process: the scheduler process stays
small (no LiteLLM, pandas or SciPy), a failed child is a failed run, and what the
child reports (failure counts, flags) reaches the metrics."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.daemon.launcher import RunLauncher
from monitor.serve.metrics import MetricsState
from monitor.store import Store

# A stand-in for `python -m monitor.daemon.child`: writes REPORT to --report-fd, exits CODE.
_FAKE = """
import json, os, sys
args = sys.argv[1:]
fd = int(args[args.index("--report-fd") + 1])
if {report!r} is not None:
    os.write(fd, json.dumps({report!r}).encode())
sys.exit({code})
"""


def _jobs(tmp_path: Path, code: int, report: dict[str, object] | None) -> RunLauncher:
    jobs = RunLauncher(None, Store(tmp_path / "m.duckdb"), MetricsState())
    jobs.COMMAND = (sys.executable, "-c", _FAKE.format(code=code, report=report))
    return jobs


def test_the_scheduler_process_does_not_import_the_run_stack() -> None:
    code = ("import sys, monitor.daemon.scheduler; "
            "print(sorted(m for m in ('litellm', 'pandas', 'scipy', 'monitor.measure.llm', "
            "'monitor.measure.run', 'monitor.daemon.scheduled', 'monitor.review', "
            "'monitor.alerts', 'monitor.daemon.child') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("code", "report"), [(1, None), (0, None), (-9, None)])
def test_a_crashed_or_silent_child_is_a_failed_run_not_an_exception(
        tmp_path: Path, code: int, report: dict[str, object] | None,
        caplog: pytest.LogCaptureFixture) -> None:
    jobs = _jobs(tmp_path, code if code >= 0 else 0, report)
    if code < 0:  # killed from outside (OOM killer): exits by signal
        jobs.COMMAND = (sys.executable, "-c", "import os, signal; "
                        "os.kill(os.getpid(), signal.SIGKILL)")
    asyncio.run(jobs.run_job("ep"))
    assert jobs.failures == {"ep": 1}
    assert jobs.state.snapshot().run_failures == {"ep": 1}
    assert "run process exited with code" in caplog.text
    assert not jobs.running


def test_the_childs_report_reaches_the_metrics(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, 0, {"failures": 2, "delivery_failures": 1,
                               "flags": {"budget_exhausted": 1}})
    asyncio.run(jobs.run_job("ep"))
    asyncio.run(jobs.run_job("ep"))
    snap = jobs.state.snapshot()
    assert snap.run_failures == {"ep": 4}  # counts add up over runs
    assert snap.delivery_failures == {"ep": 2}
    assert snap.budget_exhausted == {"ep": 1}


def test_a_clean_run_counts_nothing(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, 0, {"failures": 0, "delivery_failures": 0, "flags": {}})
    asyncio.run(jobs.run_job("ep"))
    assert jobs.failures == {}
    assert jobs.state.snapshot().run_failures == {}


def test_shutdown_stops_the_child_and_does_not_count_a_failure(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, 0, None)
    marker, ready = tmp_path / "stopped", tmp_path / "ready"
    # A child that runs until SIGTERM, then records that it was asked to stop.
    jobs.COMMAND = (sys.executable, "-c", "import signal, sys, time\n"
                    f"def stop(*_):\n    open({str(marker)!r}, 'w').close(); sys.exit(0)\n"
                    "signal.signal(signal.SIGTERM, stop)\n"
                    f"open({str(ready)!r}, 'w').close()\n"
                    "while True: time.sleep(0.05)")

    async def main() -> None:
        task = asyncio.create_task(jobs.run_job("ep"))
        while not ready.exists():  # the child is up and handles SIGTERM
            await asyncio.sleep(0.02)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert marker.exists()
    assert jobs.failures == {}
    assert json.dumps(jobs.state.snapshot().run_failures) == "{}"


def test_a_killed_childs_run_is_closed_as_interrupted(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The OOM killer's case: the child dies with its run `running`; the scheduler
    finds it at once (its owner process is gone), so the next run resumes it."""
    db = tmp_path / "m.duckdb"
    jobs = _jobs(tmp_path, 0, None)
    jobs.COMMAND = (sys.executable, "-c", "import os, signal, sys\n"
                    "from datetime import UTC, datetime\n"
                    "from monitor.store import owner\n"
                    "from monitor.store import RunRow, Store\n"
                    "now = datetime.now(UTC)\n"
                    f"Store({str(db)!r}).create_run(RunRow(run_id='ep-r1', endpoint='ep', "
                    "model='m', simulated=False, run_index=0, seed=0, catalog_version='v', "
                    "scenarios=['university'], languages=['en', 'zh'], variants=['plain'], "
                    "triplets=2, planned_calls=4, started_at=now, finished_at=None, "
                    "status='running', owner=owner.token(), heartbeat_at=now, reason=None, "
                    "attempts=1))\n"
                    "os.kill(os.getpid(), signal.SIGKILL)")
    asyncio.run(jobs.run_job("ep"))
    run = Store(db).get_run("ep-r1")
    assert run is not None and run.status == "interrupted"
    assert "ended without closing it" in (run.reason or "")
    assert "left running by its process (signal 9)" in caplog.text
    assert jobs.failures == {"ep": 1}


# A stand-in child that records how many run processes were live when it started (its
# `.live` file) and runs until the test writes its `.go` file.
_GATED = """
import json, os, pathlib, sys, time
args = sys.argv[1:]
name, fd = args[args.index("--endpoint") + 1], int(args[args.index("--report-fd") + 1])
d = pathlib.Path({folder!r})
(d / (name + ".start")).touch()
(d / (name + ".live")).write_text(str(len(list(d.glob("*.start"))) - len(list(d.glob("*.end")))))
while not (d / (name + ".go")).exists():
    time.sleep(0.02)
(d / (name + ".end")).touch()
os.write(fd, json.dumps({{"failures": 0, "delivery_failures": 0, "flags": {{}}}}).encode())
"""


def _gated(tmp_path: Path, max_runs: int, room_wait_s: float) -> RunLauncher:
    jobs = RunLauncher(None, Store(tmp_path / "m.duckdb"), MetricsState(), max_runs=max_runs,
                       room_wait_s=room_wait_s)
    jobs.COMMAND = (sys.executable, "-c", _GATED.format(folder=str(tmp_path)))
    return jobs


async def _until(path: Path) -> None:
    while not path.exists():
        await asyncio.sleep(0.02)


def test_a_slot_that_finds_the_run_processes_at_the_cap_is_skipped(tmp_path: Path) -> None:
    """schedule.max_concurrent_runs bounds a replica's run processes (their memory)."""
    jobs = _gated(tmp_path, max_runs=1, room_wait_s=0.0)

    async def main() -> None:
        first = asyncio.create_task(jobs.run_job("a"))
        await _until(tmp_path / "a.start")
        await jobs.run_job("b")  # no room, no wait: counted as skipped, not started
        assert jobs.skips == {"b": 1} and not (tmp_path / "b.start").exists()
        (tmp_path / "a.go").touch()
        await first
        (tmp_path / "b.go").touch()
        await jobs.run_job("b")  # room again

    asyncio.run(main())
    assert (tmp_path / "b.live").read_text() == "1"
    assert jobs.skips == {"b": 1} and jobs.failures == {} and jobs.busy == 0
    assert jobs.state.snapshot().runs_skipped == {"b": 1}


def test_a_slot_waits_for_room_and_runs_when_a_process_ends(tmp_path: Path) -> None:
    jobs = _gated(tmp_path, max_runs=2, room_wait_s=120.0)

    async def main() -> None:
        tasks = [asyncio.create_task(jobs.run_job(name)) for name in ("a", "b", "c")]
        await _until(tmp_path / "a.start")
        await _until(tmp_path / "b.start")
        (tmp_path / "c.go").touch()
        (tmp_path / "a.go").touch()  # a ends: c starts beside b
        await _until(tmp_path / "c.end")
        (tmp_path / "b.go").touch()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    live = {n: int((tmp_path / f"{n}.live").read_text()) for n in "abc"}
    assert live["c"] == 2 and max(live.values()) == 2  # c started once a had ended
    assert jobs.skips == {} and jobs.failures == {} and jobs.busy == 0 and not jobs.active
