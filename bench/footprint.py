"""Footprint: `monitor --help` time, daemon RSS idle and peak, DuckDB bytes per probe.

    python bench/footprint.py [--minutes 3] [--every 30s] [--triplets 40] [--before e512c75]

- `monitor --help`: median wall time of 7 runs of the installed script.
- Daemon RSS: `monitor run` on the simulated endpoint (schedule `every`, a
  throwaway DuckDB), its VmRSS and its children's sampled from /proc every
  0.25 s. Idle = the daemon process alone between runs, after the first run
  (median and max); peak = the largest sum of the daemon and its children.
  The same is measured, interleaved in the same run, for the package as it
  was at --before (runs in-process; checked out of git into a temp dir), so
  the two figures share the machine's state.
- Each import's share of a process's RSS (what the child process saves).
- DuckDB bytes per stored probe: file size / probe_calls rows after the runs.

Writes bench/results/footprint.json and .png. Not a test.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
IMPORTS = ("monitor.config", "monitor.store", "monitor.serve.exporter",
           "apscheduler.schedulers.asyncio", "pandas", "scipy.stats", "litellm",
           "monitor.daemon.child")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=3.0, help="per daemon variant")
    ap.add_argument("--every", default="30s")
    ap.add_argument("--triplets", type=int, default=40)
    ap.add_argument("--before", default="e512c75", help="git ref of the 'before' daemon")
    ap.add_argument("--out", type=Path, default=RESULTS / "footprint")
    ap.add_argument("--rss-of-imports", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_of_imports is not None:  # worker: RSS after each import, in a fresh process
        print(json.dumps(_import_steps(args.rss_of_imports)))
        return
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), "
                   f"Python {platform.python_version()}",
        "command": "python bench/footprint.py " + " ".join(sys.argv[1:]),
        "help_wall_s": _help_time(),
        "import_rss_mb": _imports(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        before = _checkout(args.before, Path(tmp) / "before")
        daemons: dict[str, Any] = {}
        # Interleaved halves: after, before, after, before (the machine drifts).
        for half in range(2):
            for name, path in (("child process (now)", None), (f"in-process ({args.before})",
                                                               before)):
                work = Path(tmp) / f"{half}-{name[:5]}"
                work.mkdir()
                got = _daemon(work, args, pythonpath=path)
                daemons.setdefault(name, []).append(got)
        result["daemon"] = {name: _merge(runs) for name, runs in daemons.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    traces = {n: d.pop("trace") for n, d in result["daemon"].items()}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    _figure(args.out.with_suffix(".png"), traces)
    print(json.dumps(result, indent=2))


def _help_time() -> dict[str, Any]:
    exe = shutil.which("monitor")
    cmd = [exe, "--help"] if exe else [sys.executable, "-m", "monitor.cli", "--help"]
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return {"median": round(statistics.median(times), 3), "max": round(max(times), 3),
            "runs": 7, "command": " ".join(Path(c).name if i == 0 else c
                                           for i, c in enumerate(cmd))}


def _import_steps(mods: list[str]) -> list[tuple[str, float]]:
    steps = [("python", _rss_mb(os.getpid()))]
    for m in mods:
        importlib.import_module(m)
        steps.append((m, _rss_mb(os.getpid())))
    return steps


def _imports() -> dict[str, float]:
    """MB each import adds, cumulatively in this order, in a fresh process."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no network at import
    out = subprocess.run([sys.executable, __file__, "--rss-of-imports", *IMPORTS],
                         capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    steps = json.loads(out.stdout.strip().splitlines()[-1])
    added = {"python": round(steps[0][1], 1)}
    for (_, prev), (name, now) in pairwise(steps):
        added[name] = round(now - prev, 1)
    added["total"] = round(steps[-1][1], 1)
    return added


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    """Every descendant of pid (a run's child and anything it started)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _checkout(ref: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    # With its own catalog: the catalogue's format moved on (option_id, 0.4), and the
    # old code reads only its own.
    archive = subprocess.run(["git", "archive", ref, "monitor", "probes"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _daemon(work: Path, args: argparse.Namespace, pythonpath: Path | None) -> dict[str, Any]:
    db = work / "monitor.duckdb"
    cfg = {"storage": {"path": str(db)},
           "endpoints": [{"name": "sim", "model": "simulated/demo",
                          "params": {"bias_points": 0.5, "noise_sd": 1.0, "seed": 1}}],
           "sampling": {"triplets_per_run": args.triplets},
           "schedule": {"every": args.every, "cron": None},
           "metrics": {"host": "127.0.0.1", "port": _free_port()}}
    path = work / "monitor.yaml"
    path.write_text(json.dumps(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
    env["PYTHONPATH"] = str(pythonpath) if pythonpath else str(ROOT)
    log = (work / "daemon.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config", str(path)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work)
    trace: list[tuple[float, float, float]] = []  # (t, daemon MB, children MB)
    t0 = time.monotonic()
    first_done = None
    try:
        while time.monotonic() - t0 < 60 * args.minutes / 2 and proc.poll() is None:
            kids = _children(proc.pid)
            t = round(time.monotonic() - t0, 2)
            trace.append((t, _rss_mb(proc.pid), sum(_rss_mb(k) for k in kids)))
            if first_done is None and "done: {" in (work / "daemon.log").read_text(
                    errors="replace"):
                first_done = t
            time.sleep(0.25)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        log.close()
    text = (work / "daemon.log").read_text(errors="replace")
    runs = text.count("done: {")
    rows = _probe_rows(db)
    return {"trace": trace, "exit_code": code, "runs_done": runs, "probe_rows": rows,
            "db_bytes": db.stat().st_size if db.exists() else 0,
            "first_run_done_s": first_done}


def _probe_rows(db: Path) -> int:
    from monitor.store import Store

    if not db.exists():
        return 0
    return sum(s.calls for s in Store(db, read_only=True).run_summaries())


def _merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Idle = the daemon process alone (no run process) after the first run ended (its
    log line); in-process that includes the next runs' moments too, which barely move
    RSS once everything is imported. Peak = daemon + run process."""
    idle, peak, trace = [], 0.0, []
    for r in runs:
        start = r["first_run_done_s"] if r["first_run_done_s"] is not None else float("inf")
        idle += [d for t, d, k in r["trace"] if t >= start + 1 and k == 0]
        peak = max([peak, *(d + k for _, d, k in r["trace"])])
        trace = trace or r["trace"]
    rows = sum(r["probe_rows"] for r in runs)
    size = sum(r["db_bytes"] for r in runs)
    return {"idle_rss_mb_median": round(statistics.median(idle), 1) if idle else None,
            "idle_rss_mb_max": round(max(idle), 1) if idle else None,
            "peak_rss_mb": round(peak, 1), "runs_done": [r["runs_done"] for r in runs],
            "exit_codes": [r["exit_code"] for r in runs], "probe_rows": rows,
            "db_bytes_per_probe": round(size / rows) if rows else None, "trace": trace}


def _figure(path: Path, traces: dict[str, list[tuple[float, float, float]]]) -> None:
    from monitor.report.figures import Series, line_chart

    series = []
    for name, tr in traces.items():
        series.append(Series(f"{name}: daemon", [t for t, _, _ in tr], [d for _, d, _ in tr]))
        if any(k for _, _, k in tr):
            series.append(Series(f"{name}: daemon + run process", [t for t, _, _ in tr],
                                 [d + k for _, d, k in tr]))
    line_chart(path, series, title="monitor run: resident memory (simulated endpoint)",
               xlabel="seconds since start", ylabel="RSS, MB", hlines={"target idle 150 MB": 150})


if __name__ == "__main__":
    main()
