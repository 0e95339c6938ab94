"""The write path on each store (issue 35 item 6): CPU per call written, DuckDB file
against PostgreSQL.

    nice -n 10 python bench/store_write.py [--calls 20000] [--batches 32,256]

The product's own write (Store.write_batch: one transaction per batch of calls and
their 3 scores each, the run's heartbeat in it, as the run's writer does) into a
fresh DuckDB file and into a fresh database of a local PostgreSQL 15 (Debian's
binaries, started in a temporary folder by tests/support/postgres.py; fsync off,
so the figure is CPU, not a disk's flush). Measured: the monitor process's CPU
(user + system), the PostgreSQL server processes' CPU (from /proc), wall time,
each per call. Writes bench/results/store_write.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

from monitor.store import PgStore, RunRow, Store  # noqa: E402
from monitor.store.base import Base  # noqa: E402
from tests.support.postgres import Cluster, cluster  # noqa: E402


def _rows(run_id: str, start: int, n: int) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    now = datetime.now(UTC)
    ids = [f"t{start + i:07d}" for i in range(n)]
    calls: dict[str, list[Any]] = {
        "run_id": [run_id] * n, "triplet_id": ids, "language": ["zh"] * n,
        "endpoint": ["bench"] * n, "scenario": ["university"] * n, "target_id": ["cn1"] * n,
        "pair_id": ["p1"] * n, "variant": ["plain"] * n, "option_order": ["ABC"] * n,
        "prompt_hash": [f"h{i}" for i in ids], "catalog_version": ["2026.1"] * n,
        "status": ["ok"] * n, "detail": [None] * n,
        "raw_text": ['{"A": {"score": 7}, "B": {"score": 6}, "C": {"score": 8}}'] * n,
        "error": [None] * n, "latency_s": [0.8] * n, "input_tokens": [420] * n,
        "output_tokens": [160] * n, "cost_usd": [0.0004] * n, "model_id": ["gpt-x"] * n,
        "fingerprint": ["fp"] * n, "attempts": [1] * n, "created_at": [now] * n,
        "answer_format": ["json"] * n}
    scores: dict[str, list[Any]] = {k: [] for k in (
        "run_id", "triplet_id", "language", "label", "option_id", "country", "is_target",
        "score", "strengths", "weaknesses")}
    for t in ids:
        for label, country in (("A", "CN"), ("B", "US"), ("C", "FR")):
            for k, v in (("run_id", run_id), ("triplet_id", t), ("language", "zh"),
                         ("label", label), ("option_id", f"o{label}"), ("country", country),
                         ("is_target", label == "A"), ("score", 7.0), ("strengths", 2),
                         ("weaknesses", 1)):
                scores[k].append(v)
    return calls, scores


def measure(store: Base, calls: int, batch: int, pg: Cluster | None) -> dict[str, Any]:
    assert isinstance(store, Store)
    run_id = "bench-run"
    store.create_run(RunRow(run_id=run_id, endpoint="bench", model="openai/x", simulated=False,
                            run_index=0, seed=0, catalog_version="2026.1",
                            scenarios=["university"], languages=["zh"], variants=["plain"],
                            triplets=calls, planned_calls=calls,
                            started_at=datetime.now(UTC), finished_at=None, status="running"))
    batches = [_rows(run_id, start, min(batch, calls - start))
               for start in range(0, calls, batch)]
    server0 = pg.cpu_s() if pg else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with store.session():  # the writer holds its connection across batches
        for c, s in batches:
            store.write_batch(c, s, heartbeat=run_id, replaces=False)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    server = (pg.cpu_s() - server0) if pg else 0.0
    return {"calls": calls, "batch": batch, "client_cpu_us_per_call": cpu / calls * 1e6,
            "server_cpu_us_per_call": server / calls * 1e6,
            "total_cpu_us_per_call": (cpu + server) / calls * 1e6,
            "wall_us_per_call": wall / calls * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--batches", default="32,256", help="calls per batch (the writer's: "
                    "what arrived in 0.25 s, at most 256)")
    args = ap.parse_args()
    out: dict[str, Any] = {"machine": f"{os.cpu_count()} CPUs (shared)", "rows": []}
    with tempfile.TemporaryDirectory() as tmp, cluster() as pg:
        for batch in (int(b) for b in args.batches.split(",")):
            duck = Store(Path(tmp) / f"bench-{batch}.duckdb")
            pgs = PgStore(pg.database(), env="BENCH_PG", path=Path(tmp) / "pg")
            for engine, store, server in (("duckdb", duck, None), ("postgresql", pgs, pg)):
                row = {"engine": engine, **measure(store, args.calls, batch, server)}
                out["rows"].append(row)
                print(f"{engine:10s} batch {batch:4d}: client {row['client_cpu_us_per_call']:5.0f}"
                      f" us/call, server {row['server_cpu_us_per_call']:5.0f} us/call, wall "
                      f"{row['wall_us_per_call']:5.0f} us/call")
            pgs.close()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "store_write.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
