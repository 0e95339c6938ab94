"""Rate-limit compliance: requests per sliding 60 s window, counted AT THE SERVER.

    python bench/rpm_compliance.py [--minutes 10] [--rpm 120] [--concurrency 8]
                                   [--latency 0.01]

Starts the local OpenAI-protocol server (bench/server.py) in another
process with `--log-arrivals`, so every request's arrival time is stamped by
the server, then keeps monitor.measure.llm.LLMClient (rpm and concurrency as a real
endpoint) busy for the whole run: more work than the limit allows, so the
limiter alone decides the pace. Every 60 s window [w, w + 60) with w between
the first arrival and the end of the run minus 60 s is counted (the count only
changes at arrivals, so every arrival and every instant just after one is a
window start; the extremes are exact). Target: max <= rpm (never exceeded)
and min >= 95% of rpm (capacity used). Writes bench/results/rpm_compliance.json
and .png. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
WINDOW_S = 60.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rpm", type=int, default=120)
    ap.add_argument("--concurrency", type=int, default=8, help="the config default")
    ap.add_argument("--latency", type=float, default=0.01, help="server delay, seconds")
    ap.add_argument("--out", type=Path, default=RESULTS / "rpm_compliance")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "arrivals.txt"
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "server.py"), "--delay", str(args.latency),
             "--log-arrivals", str(log_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            t_start, t_stop, outcomes = asyncio.run(_drive(port, args))
            time.sleep(0.5)  # the last answers are logged before the server stops
        finally:
            server.terminate()
            server.wait()
        arrivals = sorted(float(x) for x in log_path.read_text().split())
    result = _analyse(arrivals, t_start, t_stop, args, outcomes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    series = result.pop("series")
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    _figure(args.out.with_suffix(".png"), series, args.rpm)
    print(json.dumps(result, indent=2))


async def _drive(port: int, args: argparse.Namespace) -> tuple[float, float, dict[str, int]]:
    from monitor.config import Endpoint
    from monitor.measure.llm import LLMClient

    ep = Endpoint(name="bench", model="openai/bench-model",
                  api_base=f"http://127.0.0.1:{port}/v1", max_concurrency=args.concurrency,
                  rpm=args.rpm, timeout_s=30, max_retries=0)
    client = LLMClient(ep)
    messages = [{"role": "user", "content": "A. Alpha\nB. Beta\nC. Gamma\nScore each."}]
    outcomes = {"ok": 0, "failed": 0}
    t_start = time.time()
    deadline = time.monotonic() + 60 * args.minutes

    async def worker() -> None:
        while time.monotonic() < deadline:
            res = await client.complete(messages)
            outcomes["ok" if res.ok else "failed"] += 1

    # Twice the concurrency in workers: a queue always waits at the limiter.
    tasks = [asyncio.create_task(worker()) for _ in range(2 * args.concurrency)]
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    t_stop = time.time()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return t_start, t_stop, outcomes


def _count(arrivals: list[float], w: float) -> int:
    return bisect_left(arrivals, w + WINDOW_S) - bisect_left(arrivals, w)


def _analyse(arrivals: list[float], t_start: float, t_stop: float,
             args: argparse.Namespace, outcomes: dict[str, int]) -> dict[str, object]:
    first, last_start = arrivals[0], t_stop - WINDOW_S
    # Maxima start at an arrival; minima just after one (that arrival has left).
    starts = [a for a in arrivals if a <= last_start]
    starts += [a + 1e-6 for a in arrivals if a + 1e-6 <= last_start]
    counts = [_count(arrivals, w) for w in starts]
    steady = [c for w, c in zip(starts, counts, strict=True) if w >= first + WINDOW_S]
    grid = [first + i for i in range(int(last_start - first) + 1)]
    lo, hi = int(0.95 * args.rpm), args.rpm
    return {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}",
        "command": "python bench/rpm_compliance.py " + " ".join(sys.argv[1:]),
        "rpm": args.rpm, "max_concurrency": args.concurrency, "server_latency_s": args.latency,
        "minutes": args.minutes, "requests_at_server": len(arrivals), "client_outcomes": outcomes,
        "windows_counted": len(counts),
        "max_per_window": max(counts), "min_per_window": min(counts),
        "min_per_window_after_first_window": min(steady) if steady else None,
        "mean_rate_per_min": round(len(arrivals) / (t_stop - first) * 60, 2),
        "target_max": hi, "target_min": lo,
        "met": max(counts) <= hi and min(steady or counts) >= lo,
        "series": {"t": [round(w - first, 1) for w in grid],
                   "n": [_count(arrivals, w) for w in grid]},
        "client_started_at": t_start,
    }


def _figure(path: Path, series: dict[str, list[float]], rpm: int) -> None:
    from monitor.report.figures import Series, line_chart

    line_chart(path, [Series("requests in [t, t + 60 s) at the server", series["t"],
                             series["n"])],
               title=f"Requests per sliding 60 s window (rpm = {rpm})",
               xlabel="window start, s after the first request", ylabel="requests",
               hlines={f"limit {rpm}": rpm, f"95% = {int(0.95 * rpm)}": int(0.95 * rpm)})


if __name__ == "__main__":
    main()
