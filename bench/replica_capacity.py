"""Endpoints one replica can serve at 4 runs a day (issue 35 item 6): a replica's run
measured on a PostgreSQL store, and the capacity derived from it.

    nice -n 10 python bench/replica_capacity.py [--runs 24] [--latency 0.2]
                                                [--slow-runs 2] [--slow-latency 2.0]
                                                [--concurrency 8]
    nice -n 10 python bench/replica_capacity.py --replica 6 [--cap 2] [--latency 0.2]

What a replica of `monitor run` does for one scheduled slot is one process,
`python -m monitor.daemon.child --endpoint NAME` (monitor.daemon.launcher starts it):
the endpoint's lease, the budget, recovery, the run (the default 40 triplets x 6
languages = 240 calls), its review (the statistics, the automatic baseline of the
first 20 runs, the drift states, the top-up when a cell asks for it), its report
and the outbox. This bench starts exactly that process, slot after slot, on one
endpoint: bench/server.py (another process) answers every call after --latency s;
the store is a fresh database of a local PostgreSQL 15 (tests/support/postgres.py,
Debian's binaries, fsync off) chosen by `storage.url_env`, as a replica's is.
The first --runs slots (fast answers) build the history: the first 20 are the
baseline, the later ones are reviewed against it. Then --slow-runs slots at
--slow-latency (an LLM's answer time) show the wall time of a realistic run.

Per slot: the run process's CPU (user + system, wait4) and peak RSS, the
PostgreSQL server's CPU (its processes, /proc), wall time, calls counted at the
server. Writes bench/results/replica_capacity.json; the capacity arithmetic is in
docs/benchmarks.md (section 11).

`--replica N`: one real `monitor run` (the daemon) with N endpoints whose slots all
fall due at its start, as a cron instant makes them, and `schedule.max_concurrent_runs`
= --cap: the memory of the daemon and its run processes together (the sum of their
RSS, /proc, every 0.1 s), the most run processes at once, and the time until every
endpoint's run is complete (bench/results/replica_capacity_replica.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

from tests.support.postgres import Cluster, cluster  # noqa: E402
from tests.support.process import free_port  # noqa: E402

ENV = "BENCH_PG_URL"
ENDPOINT = "bench"


def _server(latency: float, log: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "server.py"), "--delay",
                             str(latency), "--log-arrivals", str(log)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline().strip())


def _config(tmp: Path, port: int, conc: int, name: str, endpoints: tuple[str, ...] = (ENDPOINT,),
            **extra: Any) -> Path:
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(json.dumps({  # JSON is YAML
        "storage": {"path": str(tmp / "monitor.duckdb"), "url_env": ENV},
        "report": {"dir": str(tmp / "reports")},
        "endpoints": [{"name": ep, "model": "openai/bench-model",
                       "api_base": f"http://127.0.0.1:{port}/v1", "api_key_env": None,
                       "max_concurrency": conc, "rpm": 100_000, "timeout_s": 30,
                       "max_retries": 0} for ep in endpoints], **extra}))
    return cfg


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:  # ended meanwhile
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in task.read_text().split()]
    return found


def replica(n: int, cap: int, latency: float, conc: int) -> dict[str, Any]:
    """One `monitor run` with n endpoints due at once, to every endpoint's run's end."""
    from monitor.store import PgStore
    from monitor.vocab import RunStatus

    names = tuple(f"{ENDPOINT}{i}" for i in range(n))
    with tempfile.TemporaryDirectory(prefix="replica-") as tmp_, cluster() as pg:
        tmp = Path(tmp_)
        url = pg.database()
        log = tmp / "arrivals.log"
        log.write_text("")
        server, port = _server(latency, log)
        # A period long enough that only the start's slots (every endpoint never measured:
        # due at once) fall in the measurement.
        cfg = _config(tmp, port, conc, "replica", names,
                      schedule={"every": "1h", "max_concurrent_runs": cap},
                      metrics={"host": "127.0.0.1", "port": free_port()})
        store = PgStore(url, env=ENV, path=tmp / "probe")
        env = {**os.environ, ENV: url, "OPENBLAS_NUM_THREADS": "1"}
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config",
                                 str(cfg), "--log-level", "WARNING"], env=env, cwd=tmp,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak_mb, peak_procs, daemon_mb, samples = 0.0, 0, 0.0, 0
        try:
            while True:
                kids = _children(proc.pid)
                daemon_mb = max(daemon_mb, _rss_mb(proc.pid))
                peak_mb = max(peak_mb, _rss_mb(proc.pid) + sum(_rss_mb(k) for k in kids))
                peak_procs = max(peak_procs, len(kids))
                samples += 1
                if samples % 20 == 0 and all(
                        any(r.status == RunStatus.COMPLETE for r in store.runs(ep))
                        for ep in names):
                    break
                if proc.poll() is not None or time.perf_counter() - t0 > 3600:
                    raise RuntimeError(f"the daemon ended ({proc.returncode}) or timed out")
                time.sleep(0.1)
            wall = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(timeout=120)
            server.terminate()
            server.wait()
        return {"endpoints": n, "max_concurrent_runs": cap, "latency_s": latency,
                "concurrency": conc, "all_complete_s": round(wall, 1),
                "peak_rss_mb_daemon_and_runs": round(peak_mb, 1),
                "peak_rss_mb_daemon": round(daemon_mb, 1), "most_run_processes": peak_procs,
                "calls": len(log.read_text().split()),
                "runs": sum(len(store.runs(ep)) for ep in names)}


def slot(cfg: Path, pg: Cluster, url: str, log: Path, tmp: Path) -> dict[str, Any]:
    """One scheduled slot, as the daemon runs it: its own process, to its end."""
    before = len(log.read_text().split())
    read, write = os.pipe()
    env = {**os.environ, ENV: url, "OPENBLAS_NUM_THREADS": "1"}
    server0, t0 = pg.cpu_s(), time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "monitor.daemon.child", "--endpoint",
                             ENDPOINT, "--report-fd", str(write), "--config", str(cfg),
                             "--log-level", "WARNING"],
                            env=env, pass_fds=(write,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=tmp)
    os.close(write)
    with os.fdopen(read) as fh:
        report = json.loads(fh.read() or "{}")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0 or report.get("failures"):
        raise RuntimeError(f"run process exited {code}, {report}: {err[-800:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "server_cpu_s": round(pg.cpu_s() - server0, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "calls": len(log.read_text().split()) - before}


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=24, help="slots with fast answers")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--slow-runs", type=int, default=2)
    ap.add_argument("--slow-latency", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=8, help="the endpoint's max_concurrency")
    ap.add_argument("--replica", type=int, default=0, metavar="N",
                    help="instead: one daemon with N endpoints due at once")
    ap.add_argument("--cap", type=int, default=2, help="with --replica: "
                    "schedule.max_concurrent_runs")
    args = ap.parse_args()
    if args.replica:
        res = {"command": " ".join(["python bench/replica_capacity.py", *sys.argv[1:]]),
               "cpus": os.cpu_count(),
               **replica(args.replica, args.cap, args.latency, args.concurrency),
               "load_average_at_end": os.getloadavg()}
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "replica_capacity_replica.json").write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res, indent=2))
        return
    out: dict[str, Any] = {"command": " ".join(["python bench/replica_capacity.py",
                                                *sys.argv[1:]]),
                           "cpus": os.cpu_count(), "concurrency": args.concurrency,
                           "latency_s": args.latency, "slow_latency_s": args.slow_latency,
                           "slots": []}
    with tempfile.TemporaryDirectory(prefix="replica-") as tmp_, cluster() as pg:
        tmp = Path(tmp_)
        url = pg.database()
        for latency, runs in ((args.latency, args.runs), (args.slow_latency, args.slow_runs)):
            log = tmp / f"arrivals-{latency}.log"
            log.write_text("")
            server, port = _server(latency, log)
            try:
                cfg = _config(tmp, port, args.concurrency, f"latency-{latency}")
                for _ in range(runs):
                    row = {"latency_s": latency, "index": len(out["slots"]),
                           **slot(cfg, pg, url, log, tmp)}
                    out["slots"].append(row)
                    print(json.dumps(row), file=sys.stderr)
            finally:
                server.terminate()
                server.wait()
    reviewed = [r for r in out["slots"][20:] if r["latency_s"] == args.latency]
    slow = [r for r in out["slots"] if r["latency_s"] == args.slow_latency]
    out["median_after_baseline"] = {k: _median(reviewed, k) for k in (
        "wall_s", "cpu_s", "server_cpu_s", "peak_rss_mb", "calls")} if reviewed else None
    out["median_slow"] = {k: _median(slow, k) for k in (
        "wall_s", "cpu_s", "server_cpu_s", "peak_rss_mb", "calls")} if slow else None
    out["load_average_at_end"] = os.getloadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "replica_capacity.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "slots"}, indent=2))


if __name__ == "__main__":
    main()
