"""Soak: run the daemon for a while and watch its footprint (not a test).

    python bench/soak.py [--minutes 30] [--every 10s] [--triplets 10] [--fault-rate 0.05]

Starts the local OpenAI-protocol server (in this process, answering scored
JSON, with a fault mix: 429 with Retry-After, 500, 3 s stalls, garbage) and
`monitor run` as a subprocess with `every: 10s`, then samples the daemon's
RSS, open file descriptors, its child processes (each scheduled run is one;
zombies counted) and the DuckDB file size every 5 s, and reads run
durations from the store at the end. Writes bench/results/soak.json (and
prints it): the samples, the RSS slope (MB per hour, least squares over the
second half, after warm-up) and the run durations.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _children(pid: int) -> tuple[int, int, float]:
    """Live children of pid, how many are zombies, and their RSS (MB): each
    scheduled run is a child process, and none may be left behind."""
    n = zombies = 0
    rss = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            n += 1
            zombies += fields[0] == "Z"
            rss += _rss_mb(int(entry.name)) if fields[0] != "Z" else 0.0
    return n, zombies, rss


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 3:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--every", default="10s")
    ap.add_argument("--triplets", type=int, default=10)
    ap.add_argument("--fault-rate", type=float, default=0.05)
    args = ap.parse_args()

    from monitor.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    samples: list[dict[str, float]] = []
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "server.py"), "--delay",
                               "0.05", "--fault-rate", str(args.fault_rate)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = server.stdout.readline().strip()
    try:
        cfg = tmp / "monitor.yaml"
        cfg.write_text(json.dumps({
            "storage": {"path": str(tmp / "monitor.duckdb")},
            "endpoints": [{"name": "local", "model": "openai/bench-model",
                           "api_base": f"http://127.0.0.1:{port}/v1", "api_key_env": None,
                           "max_concurrency": 8, "rpm": 100000, "timeout_s": 10,
                           "max_retries": 2}],
            "schedule": {"every": args.every, "cron": None},
            "sampling": {"triplets_per_run": args.triplets},
            "metrics": {"host": "127.0.0.1", "port": 0}}))
        log = (tmp / "daemon.log").open("w")
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config",
                                 str(cfg), "--log-level", "WARNING"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=log)
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < args.minutes * 60 and proc.poll() is None:
                db = tmp / "monitor.duckdb"
                kids, zombies, kid_rss = _children(proc.pid)
                samples.append({
                    "children": kids, "zombies": zombies, "children_rss_mb": round(kid_rss, 1),
                    "t_s": round(time.monotonic() - t0, 1), "rss_mb": round(_rss_mb(proc.pid), 1),
                    "fds": len(os.listdir(f"/proc/{proc.pid}/fd")),
                    "db_mb": round(db.stat().st_size / 2**20, 2) if db.exists() else 0.0})
                time.sleep(5)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
            log.close()
    finally:
        server.kill()
    runs = Store(tmp / "monitor.duckdb").runs("local")
    durations = [(r.finished_at - r.started_at).total_seconds() for r in runs if r.finished_at]
    half = samples[len(samples) // 2:]
    result = {
        "date": time.strftime("%Y-%m-%d"), "minutes": args.minutes, "every": args.every,
        "triplets_per_run": args.triplets, "fault_rate": args.fault_rate,
        "exit_code_after_sigterm": code, "runs": len(runs),
        "run_status": {s: sum(r.status == s for r in runs) for s in {r.status for r in runs}},
        "run_seconds": {"min": min(durations, default=0), "max": max(durations, default=0),
                        "mean": sum(durations) / len(durations) if durations else 0},
        "rss_mb": {"start": samples[0]["rss_mb"] if samples else 0,
                   "peak": max((s["rss_mb"] for s in samples), default=0),
                   "end": samples[-1]["rss_mb"] if samples else 0,
                   "slope_mb_per_hour_second_half": round(3600 * _slope(
                       [s["t_s"] for s in half], [s["rss_mb"] for s in half]), 2)},
        "fds": {"start": samples[0]["fds"] if samples else 0,
                "max": max((s["fds"] for s in samples), default=0),
                "end": samples[-1]["fds"] if samples else 0},
        "children": {"max": max((s["children"] for s in samples), default=0),
                     "zombies_max": max((s["zombies"] for s in samples), default=0),
                     "rss_peak_mb": max((s["children_rss_mb"] for s in samples), default=0)},
        "db_mb_end": samples[-1]["db_mb"] if samples else 0,
        "samples": samples,
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))


if __name__ == "__main__":
    main()
