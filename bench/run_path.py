"""The whole run path measured: `monitor probe --once` (the real CLI, DuckDB writes
included) against a bare LiteLLM loop, same server, same prompts, same run.

    python bench/run_path.py [--latency 0.2,2.0] [--concurrency 8,32] [--calls 240,720]
                             [--reps 2] [--inspect PATH] [--promptfoo PATH] [--out FILE]

bench/server.py (another process) answers every request after --latency s.
Each measurement is a fresh process:
- cli: `python -m monitor.cli probe --once --triplets N` on a config pointing at
  the server (max_concurrency = the concurrency), so the measured path is the
  product's: sampling, prompts, LiteLLM, the rate limiter, parsing, the writer's
  DuckDB batches, the progress line and the run's statistics;
- litellm: a bare asyncio loop of litellm.acompletion with the same prompts
  and arguments and the same number of calls in flight;
- inspect: Inspect AI (`inspect eval`, --max-connections = the concurrency,
  its OpenAI-compatible provider, logs written) in its own venv, if
  --inspect names that venv's `inspect` (pip install inspect-ai);
- promptfoo: `promptfoo eval` (-j = the concurrency, cache and telemetry off,
  results not written) if --promptfoo names its binary (npm i promptfoo).
Inspect and promptfoo get the same prompts (a JSON file) and arguments.
Client CPU per call is MARGINAL: (CPU at the larger call count - CPU at the
smaller) / (calls difference), so the fixed costs of either process (imports,
the CLI's statistics) drop out and what is left is what one more call costs.
Calls per second are counted at the server (first to last arrival of the
larger run). Peak RSS is each process's (wait4). Interleaved, medians over
--reps. Writes bench/results/run_path.json (--out). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
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
LANGS = 6


def _server(latency: float, log: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "server.py"), "--delay",
                             str(latency), "--log-arrivals", str(log)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline().strip())


def _config(tmp: Path, port: int, conc: int) -> Path:
    cfg = tmp / "monitor.yaml"
    cfg.write_text(json.dumps({
        "storage": {"path": str(tmp / "monitor.duckdb")},
        "endpoints": [{"name": "bench", "model": "openai/bench-model",
                       "api_base": f"http://127.0.0.1:{port}/v1", "api_key_env": None,
                       "max_concurrency": conc, "rpm": 100_000, "timeout_s": 30,
                       "max_retries": 0}]}))
    return cfg


def _measured(argv: list[str], env: dict[str, str], cwd: str | None = None) -> dict[str, float]:
    """Run a process to its end; its own CPU seconds and peak RSS (wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{argv[:4]} exited {code}: {err[-500:]}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "wall_s": time.perf_counter() - t0}


def _arrivals(log: Path) -> list[float]:
    return sorted(float(x) for x in log.read_text().split())


def measure(mode: str, latency: float, conc: int, calls: int, port: int,
            log: Path) -> dict[str, float]:
    log.write_text("")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "cli":
            cfg = _config(Path(tmp), port, conc)
            out = _measured([sys.executable, "-m", "monitor.cli", "probe", "--once",
                             "--config", str(cfg), "--triplets", str(calls // LANGS)], env)
        elif mode in TOOLS:
            argv, extra = TOOLS[mode](Path(tmp), port, conc, calls)
            out = _measured(argv, {**env, **extra}, cwd=tmp)  # Inspect wants a relative task
        else:
            out = _measured([sys.executable, __file__, "--worker", mode, "--port", str(port),
                             "--conc", str(conc), "--n", str(calls)], env)
    at = _arrivals(log)
    span = (at[-1] - at[0]) + latency if len(at) > 1 else float("nan")
    return {**out, "calls": len(at), "calls_per_s": len(at) / span}


def _prompts(n: int) -> list[list[dict[str, str]]]:
    """The first n prompts a run would ask (the catalog's, the sampler's order)."""
    from monitor.catalog import load_catalog
    from monitor.measure.prompts import build_prompt
    from monitor.measure.sampling import Sampler

    cat = load_catalog()
    langs = ["en", "ja", "zh", "fr", "de", "ko"]
    sampler = Sampler(cat, scenarios=["university", "relocation", "travel"],
                      variants=["plain", "cot", "female", "male"], seed=0,
                      triplets_per_run=n // LANGS + 1)
    out = [build_prompt(cat, spec, lang).messages for spec in sampler.sample(0)
           for lang in langs]
    return out[:n]


def _prompt_file(tmp: Path, n: int) -> Path:
    path = tmp / "prompts.json"
    path.write_text(json.dumps(_prompts(n)))
    return path


INSPECT_TASK = """
import json, os
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.solver import generate

ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser}

@task
def bench():
    prompts = json.load(open(os.environ["BENCH_PROMPTS"]))
    samples = [Sample(input=[ROLES[m["role"]](content=m["content"]) for m in msgs])
               for msgs in prompts]
    return Task(dataset=samples, solver=generate(),
                config=GenerateConfig(temperature=0.7, max_tokens=900))
"""


def _inspect(tmp: Path, port: int, conc: int, n: int) -> tuple[list[str], dict[str, str]]:
    task = tmp / "bench_task.py"
    task.write_text(INSPECT_TASK)
    argv = [TOOL_PATHS["inspect"], "eval", task.name, "--model", "openai-api/bench/bench-model",
            "--max-connections", str(conc), "--max-retries", "0", "--timeout", "30",
            "--log-dir", str(tmp / "logs"), "--display", "none"]
    return argv, {"BENCH_PROMPTS": str(_prompt_file(tmp, n)), "BENCH_API_KEY": "no-key",
                  "BENCH_BASE_URL": f"http://127.0.0.1:{port}/v1",
                  "INSPECT_DISABLE_TELEMETRY": "1"}


def _promptfoo(tmp: Path, port: int, conc: int, n: int) -> tuple[list[str], dict[str, str]]:
    cfg = tmp / "promptfooconfig.json"
    # A prompt that renders to a JSON message list is sent as those messages.
    cfg.write_text(json.dumps({
        "prompts": ["{{ messages }}"],
        "providers": [{"id": "openai:chat:bench-model", "config": {
            "apiBaseUrl": f"http://127.0.0.1:{port}/v1", "apiKey": "no-key",
            "temperature": 0.7, "max_tokens": 900}}],
        "tests": [{"vars": {"messages": json.dumps(m)}} for m in _prompts(n)]}))
    argv = [TOOL_PATHS["promptfoo"], "eval", "-c", str(cfg), "-j", str(conc), "--no-cache",
            "--no-write", "--no-table", "--no-progress-bar"]
    return argv, {"PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
                  "PROMPTFOO_CONFIG_DIR": str(tmp / "pfconfig"), "NO_COLOR": "1"}


TOOLS = {"inspect": _inspect, "promptfoo": _promptfoo}
TOOL_PATHS: dict[str, str] = {}


def worker_litellm(port: int, conc: int, n: int) -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    prompts = _prompts(n)

    async def go() -> None:
        sem = asyncio.Semaphore(conc)

        async def one(messages: list[dict[str, str]]) -> None:
            async with sem:
                await litellm.acompletion(
                    model="openai/bench-model", messages=messages, timeout=30, num_retries=0,
                    max_retries=0, api_base=f"http://127.0.0.1:{port}/v1", api_key="no-key",
                    temperature=0.7, max_tokens=900)

        await asyncio.gather(*(one(m) for m in prompts))

    asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", default="0.2,2.0")
    ap.add_argument("--concurrency", default="8,32")
    ap.add_argument("--calls", default="240,720", help="the two call counts (marginal CPU)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--modes", default="cli,litellm")
    ap.add_argument("--out", default="run_path.json", help="file name under bench/results/")
    ap.add_argument("--inspect", help="path of `inspect` (its venv) to add Inspect AI")
    ap.add_argument("--promptfoo", help="path of the `promptfoo` binary to add promptfoo")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--conc", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "litellm":
        worker_litellm(args.port, args.conc, args.n)
        return
    small, large = (int(x) for x in args.calls.split(","))
    modes = args.modes.split(",")
    for tool in TOOLS:
        if getattr(args, tool):
            TOOL_PATHS[tool] = getattr(args, tool)
            modes.append(tool)
    rows: list[dict[str, Any]] = []
    for latency in (float(x) for x in args.latency.split(",")):
        log = Path(tempfile.mkdtemp()) / "arrivals.log"
        server, port = _server(latency, log)
        try:
            for conc in (int(x) for x in args.concurrency.split(",")):
                raw: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
                for _ in range(args.reps):
                    for mode in modes:  # interleaved: the machine is shared
                        a = measure(mode, latency, conc, small, port, log)
                        b = measure(mode, latency, conc, large, port, log)
                        raw[mode].append({
                            "cpu_ms_per_call": 1000 * (b["cpu_s"] - a["cpu_s"])
                            / (b["calls"] - a["calls"]),
                            "calls_per_s": b["calls_per_s"], "rss_mb": b["rss_mb"],
                            "cpu_s_large": b["cpu_s"], "wall_s_large": b["wall_s"]})
                        print(f"latency {latency} conc {conc} {mode:8} "
                              f"{raw[mode][-1]['calls_per_s']:6.1f}/s "
                              f"{raw[mode][-1]['cpu_ms_per_call']:6.2f} ms/call "
                              f"rss {b['rss_mb']:.0f} MB", file=sys.stderr, flush=True)
                med = {m: {k: round(statistics.median(r[k] for r in raw[m]), 3)
                           for k in raw[m][0]} for m in modes}
                row: dict[str, Any] = {"latency_s": latency, "concurrency": conc,
                                       "ceiling_per_s": conc / latency, **med}
                for other in (m for m in modes if m != "cli" and "cli" in med):
                    row[f"cli_vs_{other}"] = {
                        "calls_per_s": round(med["cli"]["calls_per_s"]
                                             / med[other]["calls_per_s"], 3),
                        "cpu_per_call": round(med["cli"]["cpu_ms_per_call"]
                                              / med[other]["cpu_ms_per_call"], 3)}
                rows.append(row)
        finally:
            server.kill()
    doc = {"command": "python bench/run_path.py " + " ".join(sys.argv[1:]),
           "calls": [small, large], "reps": args.reps, "cpus": os.cpu_count(),
           "load_average_at_end": os.getloadavg(),
           "targets": {"calls_per_s_vs_litellm": ">= 0.95", "cpu_per_call_vs_litellm": "<= 1.3",
                       "cli_peak_rss_mb": "<= 300"}, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
