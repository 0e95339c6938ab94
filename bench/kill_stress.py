"""SIGKILL `monitor probe --once` mid-run, many times, and check the DuckDB file after each.

    python bench/kill_stress.py --reps 200 [--mode fork|spawn] [--load N] [--readers N]

Each repetition: a run of 4 triplets x 6 languages (24 calls, 50 ms each, 2 in
flight) against a local OpenAI-protocol server; SIGKILL after a seeded number
of answers; then the file must open, hold the run (status `running`, its owner
gone), no duplicate call and 3 scores per answered call; `--resume` must
complete it to 24 calls. `--mode fork` forks the run from this process (as
tests/reliability/test_crash.py does: the child inherits a process that has
used DuckDB and LiteLLM, threads included); `spawn` starts a fresh interpreter.
`--load N` keeps N processes spinning on the CPU; `--readers N` runs N
processes that open the file read-only in a loop while the run writes.
Writes bench/results/kill_stress-<mode>[-load][-readers].json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CALLS = 24


def _config(tmp: Path, api_base: str) -> Path:
    cfg = {"storage": {"path": str(tmp / "monitor.duckdb")},
           "endpoints": [{"name": "local", "model": "openai/test-model", "api_base": api_base,
                          "api_key_env": None, "max_concurrency": 2, "rpm": 100000,
                          "timeout_s": 5, "max_retries": 0}],
           "sampling": {"triplets_per_run": 4}}
    path = tmp / "monitor.yaml"
    path.write_text(json.dumps(cfg))
    return path


def _silent_main(argv: list[str]) -> None:
    from monitor.cli import main

    with open(os.devnull, "w") as null, redirect_stdout(null), redirect_stderr(null):
        main(argv)


def _spin() -> None:
    while True:
        pass


def _reader(db: str) -> None:
    from monitor.store import Store

    while True:
        try:
            Store(db, lock_timeout_s=1, read_only=True).runs()
        except Exception:
            time.sleep(0.005)


def _arrivals(log: Path) -> int:
    try:
        return sum(1 for _ in log.open())
    except OSError:
        return 0


def check(db: Path) -> tuple[str | None, str | None]:
    """(problem, run_id): what is wrong with the file after the kill, if anything."""
    from monitor.store import Store

    try:
        store = Store(db)
        runs = store.runs()
    except Exception as exc:
        return f"reopen: {type(exc).__name__}: {exc}", None
    if len(runs) != 1:
        return f"{len(runs)} runs", None
    run = runs[0]
    calls = store.calls_frame([run.run_id])
    if calls.duplicated(["triplet_id", "language"]).any():
        return "duplicate calls", run.run_id
    scores = store.scores_frame([run.run_id])
    per = scores.groupby(["triplet_id", "language"]).size()
    ok = calls[calls["status"] == "ok"]
    if len(per) != len(ok) or (len(per) and set(per) != {3}):
        return "scores do not match the answered calls", run.run_id
    return None, run.run_id


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--mode", choices=["fork", "spawn"], default="fork")
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--readers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    from monitor.cli import main as cli

    work = Path(tempfile.mkdtemp(prefix="kill-stress-"))
    arrivals = work / "arrivals.log"
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "server.py"), "--delay", "0.05",
                               "--log-arrivals", str(arrivals)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    api_base = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
    spinners = [multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
                for _ in range(args.load)]
    for p in spinners:
        p.start()
    rng = random.Random(args.seed)
    results: list[dict[str, Any]] = []
    fork = multiprocessing.get_context("fork")
    started = time.monotonic()
    try:
        for rep in range(args.reps):
            tmp = work / f"r{rep}"
            tmp.mkdir()
            cfg = _config(tmp, api_base)
            argv = ["probe", "--once", "--json", "--config", str(cfg)]
            readers = [fork.Process(target=_reader, args=(str(tmp / "monitor.duckdb"),),
                                    daemon=True) for _ in range(args.readers)]
            seen = _arrivals(arrivals)
            kill_after = rng.randint(1, CALLS - 2)
            if args.mode == "fork":
                proc: Any = fork.Process(target=_silent_main, args=(argv,))
                proc.start()
                pid = proc.pid
            else:
                proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", *argv], cwd=ROOT,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                pid = proc.pid
            for r in readers:
                r.start()
            deadline = time.monotonic() + 120
            while _arrivals(arrivals) - seen < kill_after and time.monotonic() < deadline:
                time.sleep(0.002)
            os.kill(pid, signal.SIGKILL)
            proc.join(30) if args.mode == "fork" else proc.wait(30)
            for r in readers:
                r.kill()
                r.join(10)
            problem, run_id = check(tmp / "monitor.duckdb")
            resumed = None
            if problem is None and run_id is not None:
                with open(os.devnull, "w") as null, redirect_stdout(null), redirect_stderr(null):
                    code = cli(["probe", "--once", "--config", str(cfg), "--resume", run_id])
                from monitor.store import Store

                n = len(Store(tmp / "monitor.duckdb").calls_frame([run_id]))
                resumed = n
                if code != 0 or n != CALLS:
                    problem = f"resume: exit {code}, {n} calls"
            results.append({"rep": rep, "kill_after": kill_after, "problem": problem,
                            "calls_after_resume": resumed})
            if problem:
                print(f"rep {rep}: {problem}", file=sys.stderr, flush=True)
            elif rep % 20 == 0:
                print(f"rep {rep}: ok ({time.monotonic() - started:.0f} s)", file=sys.stderr,
                      flush=True)
    finally:
        server.kill()
        for p in spinners:
            p.kill()
    failures = [r for r in results if r["problem"]]
    tag = args.mode + ("-load" if args.load else "") + ("-readers" if args.readers else "")
    out = ROOT / "bench" / "results" / f"kill_stress-{tag}.json"
    out.parent.mkdir(exist_ok=True)
    summary = {"mode": args.mode, "load_processes": args.load, "reader_processes": args.readers,
               "reps": len(results), "failures": len(failures),
               "problems": [r["problem"] for r in failures],
               "seconds": round(time.monotonic() - started, 1),
               "duckdb": __import__("duckdb").__version__, "results": results}
    out.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
