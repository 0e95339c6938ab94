"""Probe throughput: calls per second and client CPU ms per call, three clients.

    python bench/probe_throughput.py [--latency 0.2] [--concurrency 4,8,32,128] [--reps 3]
                                     [--modes monitor,litellm,openai,monitor-before]
                                     [--before e512c75]

Starts the local OpenAI-protocol server (bench/server.py) in ANOTHER
process with a fixed latency, then measures, interleaved in one run (the
machine is shared, so only numbers from the same run are compared):

- monitor: real catalog prompts through monitor.measure.llm.LLMClient (LiteLLM's
  openai/ provider, the rate limiter, the result) and the parser, as a run does;
- monitor-before: the same with the package as it was at --before (checked
  out of git into a temporary directory): what the tuning bought;
- litellm: a bare asyncio loop of litellm.acompletion with the same arguments;
- openai: a bare asyncio loop of openai.AsyncOpenAI chat.completions.create.

Each measurement is a fresh worker process (this script with --worker), so
one client's settings, caches and connection pool never leak into another's
and the client CPU is that process's CPU time only (not the server's). The
ceiling is concurrency / latency (or rpm / 60 if lower). Medians over --reps.
Writes bench/results/probe_throughput.json and .png. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
MODES = ("monitor", "litellm", "openai", "monitor-before")
BEFORE = "e512c75"  # the package before the issue-7 tuning (monitor-before)
RPM = 100_000  # far above the ceiling: the limiter is on the path but never waits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", default="4,8,32,128",
                    help="4: the one ceiling under 40/s (the 90%%-of-ceiling target)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0,
                    help="aim for about this long per measurement at the ceiling")
    ap.add_argument("--before", default=BEFORE, help="git ref of monitor-before")
    ap.add_argument("--out", type=Path, default=RESULTS / "probe_throughput")
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.concurrency = int(args.concurrency)
        print(json.dumps(asyncio.run(_worker(args))))
        return
    concs = [int(c) for c in args.concurrency.split(",")]
    modes = args.modes.split(",")
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "server.py"), "--delay",
                               str(args.latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    raw: list[dict[str, Any]] = []
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        for rep in range(args.reps):
            for c in concs:
                # Rotating the order each rep spreads the machine's drift over the modes.
                for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:
                    calls = max(256, min(1600, int(args.seconds * c / args.latency)))
                    out = subprocess.run(
                        [sys.executable, __file__, "--worker", mode, "--port", str(port),
                         "--concurrency", str(c), "--calls", str(calls),
                         "--latency", str(args.latency), "--before", args.before],
                        cwd=ROOT, capture_output=True, text=True)
                    if out.returncode:
                        sys.exit(f"worker {mode} at {c} failed:\n{out.stderr[-3000:]}")
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    raw.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
    result = _summarise(raw, concs, modes, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    _figure(args.out.with_suffix(".png"), result, concs, modes)
    print(json.dumps(result["summary"], indent=2))


def _summarise(raw: list[dict[str, Any]], concs: list[int], modes: list[str],
               args: argparse.Namespace) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for c in concs:
        ceiling = min(c / args.latency, RPM / 60)
        cell: dict[str, Any] = {"ceiling_calls_per_s": round(ceiling, 1)}
        for mode in modes:
            rows = [r for r in raw if r["mode"] == mode and r["concurrency"] == c]
            cps = statistics.median(r["calls_per_s"] for r in rows)
            cpu = statistics.median(r["client_cpu_ms_per_call"] for r in rows)
            cell[mode] = {"calls_per_s": round(cps, 1), "share_of_ceiling": round(cps / ceiling, 3),
                          "client_cpu_ms_per_call": round(cpu, 2),
                          "ok": sum(r["ok"] for r in rows), "calls": sum(r["calls"] for r in rows)}
        if "monitor" in cell and "litellm" in cell:
            m, b = cell["monitor"], cell["litellm"]
            cell["monitor_vs_litellm"] = {
                "calls_per_s_ratio": round(m["calls_per_s"] / b["calls_per_s"], 3),
                "cpu_per_call_ratio": round(m["client_cpu_ms_per_call"]
                                            / b["client_cpu_ms_per_call"], 3)}
        if "monitor-before" in cell and "monitor" in cell:
            cell["tuning_cpu_saving_ms_per_call"] = round(
                cell["monitor-before"]["client_cpu_ms_per_call"]
                - cell["monitor"]["client_cpu_ms_per_call"], 2)
        summary[str(c)] = cell
    return {"date": time.strftime("%Y-%m-%d"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), "
                       f"Python {platform.python_version()}",
            "command": "python bench/probe_throughput.py " + " ".join(sys.argv[1:]),
            "latency_s": args.latency, "reps": args.reps, "summary": summary, "runs": raw}


def _figure(path: Path, result: dict[str, Any], concs: list[int], modes: list[str]) -> None:
    from monitor.report.figures import Series, line_chart

    s = result["summary"]
    series = [Series(m, concs, [s[str(c)][m]["calls_per_s"] for c in concs]) for m in modes]
    series.append(Series("ceiling (concurrency / latency)", concs,
                         [s[str(c)]["ceiling_calls_per_s"] for c in concs]))
    line_chart(path, series, title=f"Probe throughput, {result['latency_s'] * 1000:.0f} ms "
               "server latency", xlabel="concurrency", ylabel="calls / s", logx=True, logy=True)


# --- worker: one client, one concurrency, in its own process -------------------------------

async def _worker(args: argparse.Namespace) -> dict[str, Any]:
    if args.worker == "monitor-before":
        _use_package_at(args.before)
    prompts = _prompts(args.calls)
    base = f"http://127.0.0.1:{args.port}/v1"
    one = await _make_one(args.worker, base, args.concurrency)
    sem = asyncio.Semaphore(args.concurrency)

    async def bounded(p: Any) -> str:
        async with sem:  # the monitor's own limiter bounds it too; harmless twice
            return await one(p)

    # Warm-up: connection set-up and lazy imports are paid before the clock starts.
    await asyncio.gather(*(bounded(p) for p in prompts[:args.concurrency]))
    cpu0, t0 = time.process_time(), time.perf_counter()
    statuses = await asyncio.gather(*(bounded(p) for p in prompts))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"mode": args.worker, "concurrency": args.concurrency, "calls": len(prompts),
            "ok": statuses.count("ok"), "wall_s": round(wall, 3),
            "calls_per_s": round(len(prompts) / wall, 2),
            "client_cpu_ms_per_call": round(1000 * cpu / len(prompts), 3)}


def _prompts(n: int) -> list[Any]:
    from monitor.catalog import VARIANTS, load_catalog
    from monitor.measure.prompts import build_prompt
    from monitor.measure.sampling import Sampler

    catalog = load_catalog()
    langs = list(catalog.languages)
    sampler = Sampler(catalog, scenarios=sorted(catalog.scenarios), variants=list(VARIANTS),
                      seed=0, triplets_per_run=n // len(langs) + 1)
    return [build_prompt(catalog, s, lang) for s in sampler.sample(0) for lang in langs][:n]


async def _make_one(mode: str, base: str, conc: int) -> Any:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before any litellm import
    if mode in ("monitor", "monitor-before"):
        return _monitor_one(base, conc)
    if mode == "litellm":
        import litellm

        async def via_litellm(p: Any) -> str:
            r = await litellm.acompletion(model="openai/bench-model", messages=p.messages,
                                          api_base=base, api_key="no-key", timeout=30,
                                          num_retries=0, max_retries=0)
            return "ok" if r.choices[0].message.content else "failed"
        return via_litellm
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base, api_key="no-key", max_retries=0, timeout=30)

    async def via_openai(p: Any) -> str:
        r = await client.chat.completions.create(model="bench-model", messages=p.messages)
        return "ok" if r.choices[0].message.content else "failed"
    return via_openai


def _monitor_one(base: str, conc: int) -> Any:
    from monitor.config import Endpoint
    from monitor.measure.llm import LLMClient
    from monitor.measure.parse import parse_answer

    ep = Endpoint(name="bench", model="openai/bench-model", api_base=base,
                  max_concurrency=conc, rpm=RPM, timeout_s=30, max_retries=0)
    client = LLMClient(ep)

    async def via_monitor(p: Any) -> str:
        res = await client.complete(p.messages)
        if not res.ok or res.text is None:
            return "failed"
        return parse_answer(res.text, p.names, []).status
    return via_monitor


def _use_package_at(ref: str) -> None:
    """Put the monitor package as it was at `ref` first on sys.path (nothing imported yet)."""
    import atexit
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="bench-before-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    archive = subprocess.run(["git", "archive", ref, "monitor"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    sys.path.insert(0, tmp)


if __name__ == "__main__":
    main()
