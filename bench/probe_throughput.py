"""Probe throughput: calls per second and client CPU ms per call.

    python bench/probe_throughput.py [--latency 0.2] [--concurrency 32] [--calls 640]

Starts the local OpenAI-protocol server (tests/openai_server.py) in ANOTHER
process with a fixed latency, then drives real catalog prompts through
monitor.llm.LLMClient (LiteLLM's openai/ provider) and the parser, as a run
does. Client CPU is this process's CPU time, so the server's work is not
counted. The ceiling is concurrency / latency (or rpm / 60). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--calls", type=int, default=640)
    args = ap.parse_args()

    server = subprocess.Popen([sys.executable, "-m", "tests.openai_server", "--delay",
                               str(args.latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        print(json.dumps(asyncio.run(_drive(port, args)), indent=2))
    finally:
        server.terminate()
        server.wait()


async def _drive(port: int, args: argparse.Namespace) -> dict[str, object]:
    from monitor.catalog import VARIANTS, load_catalog
    from monitor.config import Endpoint
    from monitor.llm import LLMClient
    from monitor.parse import parse_answer
    from monitor.prompts import build_prompt
    from monitor.sampling import Sampler

    catalog = load_catalog()
    langs = list(catalog.languages)
    sampler = Sampler(catalog, scenarios=sorted(catalog.scenarios), variants=list(VARIANTS),
                      seed=0, triplets_per_run=args.calls // len(langs) + 1)
    prompts = [build_prompt(catalog, s, lang) for s in sampler.sample(0) for lang in langs]
    prompts = prompts[:args.calls]
    ep = Endpoint(name="bench", model="openai/bench-model",
                  api_base=f"http://127.0.0.1:{port}/v1", max_concurrency=args.concurrency,
                  rpm=100_000, timeout_s=30, max_retries=0)
    client = LLMClient(ep)
    # Warm-up: the first call pays for connection set-up and lazy imports.
    await asyncio.gather(*(client.complete(p.messages) for p in prompts[:args.concurrency]))

    async def one(p: object) -> str:
        res = await client.complete(p.messages)  # type: ignore[attr-defined]
        if not res.ok or res.text is None:
            return "failed"
        return parse_answer(res.text, p.names, []).status  # type: ignore[attr-defined]

    cpu0, t0 = time.process_time(), time.perf_counter()
    statuses = await asyncio.gather(*(one(p) for p in prompts))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ceiling = args.concurrency / args.latency
    return {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "latency_s": args.latency, "concurrency": args.concurrency, "calls": len(prompts),
        "ok": statuses.count("ok"), "wall_s": round(wall, 2),
        "calls_per_s": round(len(prompts) / wall, 1), "ceiling_calls_per_s": ceiling,
        "share_of_ceiling": round(len(prompts) / wall / ceiling, 3),
        "client_cpu_ms_per_call": round(1000 * cpu / len(prompts), 2),
    }


if __name__ == "__main__":
    main()
