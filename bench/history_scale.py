"""Statistics at scale (issue 13 item 3): every statistic of a year of a fleet recomputed.

    python bench/history_scale.py [--sizes 1M,3M,10M] [--threads 2] [--workdir DIR]
                                  [--store duckdb|postgresql]

For each size N a DuckDB file with the monitor's schema (its own migrations)
gets N probe calls generated INSIDE DuckDB (range() and hash(),
deterministic): runs of 40 triplets x 6 languages = 240 calls, one endpoint,
the real catalog's triplets of 3 scenarios, 3 scores per answered call
(1..10, option quality + an injected local-language bias CN .9, KR .6, JP .4,
FR .3, US/GB .1 + noise), ~0.8% failed and ~0.4% unparseable calls; 10M
calls is 41,666 runs, a fleet of 19 endpoints at 6-hourly runs for a year.
Then, each in a FRESH subprocess (ru_maxrss is that measurement's peak), the
monitor's one engine (monitor.stats, monitor.watch.history) computes:
  latest  - the latest run's MD/DiD, JSD, weakness share and coverage with CIs,
            the baseline's MD and the drift step of every cell (target < 2 s)
  history - every run's MD/DiD and JSD with CIs and the drift states replayed
            over all runs (target < 60 s, < 4 GB)
DuckDB `SET threads = --threads` (default 2), OPENBLAS_NUM_THREADS=1. Writes
bench/results/history_scale.json and .png; the DuckDB files (~5 GB at 10M) go
to a temporary folder that is removed, unless --workdir keeps them.

--store postgresql (issue 35 item 6): the same history in PostgreSQL, read by
the product's PgStore (what `storage.url_env` opens). A local PostgreSQL 15
(Debian's binaries, started in a temporary folder by tests/support/postgres.py,
shared_buffers 1 GB) gets a fresh database per size: the monitor's PostgreSQL
schema by its own migrations, then the DuckDB file's rows copied in by COPY
(CSV through psql) and VACUUM ANALYZE, as a restored or long-lived database
would be. The same two measurements run in fresh processes against it; the
server's CPU (postmaster and backends, /proc) is measured around each, beside
the monitor process's. Writes bench/results/history_scale_pg.json and .png.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

from tests.support.postgres import Cluster, cluster, pg_bin  # noqa: E402

ENDPOINT = "bench-0"
#: The variable naming the PostgreSQL URL in the measuring process (storage.url_env).
PG_ENV = "BENCH_PG_URL"
#: A server sized for a history of this size (the tests' cluster has 64 MB of buffers);
#: checkpoints spaced so a bulk load is not paced by them.
PG_SETTINGS = ("-c shared_buffers=1GB -c work_mem=64MB -c maintenance_work_mem=512MB "
               "-c max_wal_size=8GB -c checkpoint_timeout=30min")
TRIPLETS, LANGS = 40, ["en", "ja", "zh", "fr", "de", "ko"]
BIAS = {"CN": 0.9, "KR": 0.6, "JP": 0.4, "FR": 0.3, "US": 0.1, "GB": 0.1}
RAW = ("Considering teaching, research output and student life, here is my assessment.\n"
       '```json\n{"A": {"score": 7}, "B": {"score": 8}, "C": {"score": 6}}\n```')


def _size(text: str) -> int:
    text = text.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("km")) * mult)


def generate(path: Path, calls: int) -> dict[str, Any]:
    """N probe calls (rounded to whole runs) with their scores, in three INSERTs."""
    import duckdb  # the generator's own SQL; the monitor reads it back through its store

    from monitor.catalog import load_catalog
    from monitor.store import Store

    catalog = load_catalog()
    Store(path)  # the monitor's schema, by its own migrations
    n_runs = max(1, calls // (TRIPLETS * len(LANGS)))
    scen = sorted(catalog.scenarios)
    trip = [(si, k, t) for si, s in enumerate(scen)
            for k, t in enumerate(catalog.scenarios[s].triplets())]
    opts = [(s, o.id, o.country) for s in scen for o in catalog.scenarios[s].options.values()]
    t0 = time.perf_counter()
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "INSERT INTO runs (run_id, endpoint, model, simulated, run_index, seed, "
            "catalog_version, scenarios, languages, variants, triplets, planned_calls, "
            "started_at, finished_at, status) "
            "SELECT printf('bench-0-%06d', r), $1, 'simulated/bench', true, r, 0, "
            "$2, $3, $4, '[\"plain\", \"cot\", \"female\", \"male\"]', $5, $5 * 6, "
            "TIMESTAMPTZ '2026-01-01 00:00:00+00' + r * INTERVAL 30 MINUTE, "
            "TIMESTAMPTZ '2026-01-01 00:02:00+00' + r * INTERVAL 30 MINUTE, 'complete' "
            "FROM range($6) t(r)",
            [ENDPOINT, catalog.version, json.dumps(scen), json.dumps(LANGS), TRIPLETS, n_runs])
        per_scen = [sum(1 for t in trip if t[0] == i) for i in range(len(scen))]
        # Slot s of run r asks scenario s % 3 and walks that scenario's triplets, so a
        # run never repeats a triplet and the runs rotate through the catalog.
        con.execute(
            "INSERT INTO probe_calls WITH trip AS (SELECT unnest($1::INT[]) AS si, "
            "unnest($2::INT[]) AS k, unnest($3::VARCHAR[]) AS tid, unnest($4::VARCHAR[]) AS "
            "scenario, unnest($5::VARCHAR[]) AS target, unnest($6::VARCHAR[]) AS pair, "
            "unnest($7::VARCHAR[]) AS opts), "
            "slot AS (SELECT r, s, s % 3 AS si, (r * 14 + s // 3) % ($8::INT[])[s % 3 + 1] AS k "
            "FROM range($9) a(r), range($10) b(s)), "
            "lang AS (SELECT unnest($11::VARCHAR[]) AS language) "
            "SELECT printf('bench-0-%06d', r), tid, language, $12, scenario, target, pair, "
            "['plain', 'cot', 'female', 'male'][(r + s) % 4 + 1], "
            # the option order rotates with the slot, as the sampler's does
            "concat_ws(',', string_split(opts, ',')[(r + s) % 3 + 1], "
            "string_split(opts, ',')[(1 + r + s) % 3 + 1], "
            "string_split(opts, ',')[(2 + r + s) % 3 + 1]), "
            "md5(tid || language), $13, CASE WHEN hash(r, s, language) % 1000 < 8 THEN 'failed' "
            "WHEN hash(r, s, language) % 1000 < 12 THEN 'unparseable' ELSE 'ok' END, NULL, $14, "
            "NULL, 0.8 + (hash(r, s, language, 'l') % 1000) / 1000.0, 420, 380, 0.0011, "
            "'simulated/bench-2026', 'fp-bench', 1, "
            "TIMESTAMPTZ '2026-01-01 00:00:00+00' + r * INTERVAL 30 MINUTE "
            "+ s * INTERVAL 1 SECOND, 'text' FROM slot JOIN trip USING (si, k) CROSS JOIN lang",
            [[t[0] for t in trip], [t[1] for t in trip], [t[2].id for t in trip],
             [t[2].scenario for t in trip], [t[2].target_id for t in trip],
             [t[2].pair_id for t in trip], [",".join(t[2].option_ids) for t in trip],
             per_scen, n_runs, TRIPLETS, LANGS, ENDPOINT, catalog.version, RAW])
        local = {c: lang for lang, cs in catalog.languages.items() for c in cs}
        con.execute(
            "INSERT INTO scores WITH opt AS (SELECT unnest($1::VARCHAR[]) AS scenario, "
            "unnest($2::VARCHAR[]) AS option_id, unnest($3::VARCHAR[]) AS country), "
            "bias AS (SELECT unnest($4::VARCHAR[]) AS country, unnest($5::VARCHAR[]) AS loc, "
            "unnest($6::DOUBLE[]) AS points), "
            "lab AS (SELECT c.run_id, c.triplet_id, c.language, c.scenario, j, "
            "string_split(c.option_order, ',')[j + 1] AS option_id "
            "FROM probe_calls c, range(3) t(j) WHERE c.status = 'ok') "
            "SELECT l.run_id, l.triplet_id, l.language, chr(CAST(65 + j AS INTEGER)), "
            "l.option_id, o.country, "
            "l.option_id = split_part(l.triplet_id, '/', 2), "
            "greatest(1, least(10, round(3.0 + hash(l.option_id) % 6 "
            "  + CASE WHEN b.loc = l.language THEN b.points ELSE 0 END "
            "  + (hash(l.run_id, l.triplet_id, l.language, j, 1) % 10000 "
            "     + hash(l.run_id, l.triplet_id, l.language, j, 2) % 10000 "
            "     + hash(l.run_id, l.triplet_id, l.language, j, 3) % 10000 "
            "     + hash(l.run_id, l.triplet_id, l.language, j, 4) % 10000 - 19998.0) "
            "    / 10000.0 * sqrt(3)))), 2, 1 "
            "FROM lab l JOIN opt o USING (scenario, option_id) LEFT JOIN bias b USING (country)",
            [[o[0] for o in opts], [o[1] for o in opts], [o[2] for o in opts], list(BIAS),
             [local[c] for c in BIAS], list(BIAS.values())])
        counts = {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
                  for t in ("runs", "probe_calls", "scores")}
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return {**counts, "generate_s": round(time.perf_counter() - t0, 2),
            "file_mb": round(path.stat().st_size / 1e6, 1)}


def load_postgres(path: Path, url: str, port: int, work: Path) -> dict[str, Any]:
    """The DuckDB file's runs, calls and scores copied into the PostgreSQL database at
    `url` (schema by the monitor's migrations), then VACUUM ANALYZE. In a process of
    its own: DuckDB's export grows it by GBs, and a process started from one that
    grew inherits its peak RSS (ru_maxrss survives exec)."""
    import duckdb  # the generator's export; the monitor reads the rows through PgStore

    from monitor.store import PgStore
    from monitor.store.schema import CALL_COLUMNS, RUN_COLUMNS, SCORE_COLUMNS

    binary = pg_bin()
    assert binary is not None
    pg = Cluster(binary, port, "")
    PgStore(url, env=PG_ENV, path=work).close()
    db = url.rsplit("/", 1)[1]
    t0, cpu0 = time.perf_counter(), time.process_time()
    rows = {}
    for table, cols in (("runs", RUN_COLUMNS), ("probe_calls", CALL_COLUMNS),
                        ("scores", SCORE_COLUMNS)):
        names = ", ".join(c for c, _ in cols)
        csv = work / f"{db}-{table}.csv"
        con = duckdb.connect(str(path), read_only=True)
        try:
            con.execute(f"COPY (SELECT {names} FROM {table}) TO '{csv}' "
                        "(FORMAT csv, HEADER false)")
        finally:
            con.close()
        try:
            pg.psql(f"\\copy {table} ({names}) FROM '{csv}' WITH (FORMAT csv)", db=db,
                    timeout=7200)
        finally:
            csv.unlink()
        rows[table] = int(pg.psql(f"SELECT count(*) FROM {table}", db=db))
    pg.psql("VACUUM ANALYZE", db=db, timeout=7200)
    size = int(pg.psql(f"SELECT pg_database_size('{db}')", db=db))
    return {**rows, "load_s": round(time.perf_counter() - t0, 1),
            "load_cpu_s": round(time.process_time() - cpu0, 1),
            "database_mb": round(size / 1e6, 1)}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(path: Path, what: str, threads: int) -> dict[str, Any]:
    """One measurement in this (fresh) process; peak RSS includes the imports."""
    from monitor.catalog import load_catalog
    from monitor.config import CUSUM_H, Alerts, Thresholds
    from monitor.stats import md_of, summarise
    from monitor.store import PgStore, Store
    from monitor.watch import history, replay

    local = load_catalog().languages
    url = os.environ.get(PG_ENV)
    store = (PgStore(url, env=PG_ENV, path=Path(tempfile.mkdtemp(prefix="history-scale-")))
             if url else Store(path))
    store.configure(threads=threads)
    rss_imports = _rss_mb()
    t0, cpu0 = time.perf_counter(), time.process_time()
    runs = store.runs(ENDPOINT)
    base = [r.run_id for r in runs[:20]]
    with store.session():
        if what == "latest":
            latest = runs[-1]
            s = summarise(store, latest.run_id, LANGS, local, seed=latest.seed)
            bmd = md_of(store, base, LANGS, local)
            states = replay([*s.md], bmd, ["pooled"], thresholds=Thresholds(),
                            alerts=Alerts(), h=CUSUM_H)
            out = {"md_rows": len(s.md), "jsd_rows": len(s.jsd), "state_rows": len(states)}
        else:
            hist = history(store, ENDPOINT, local, baseline_runs=base, h=CUSUM_H)
            out = {"md_rows": len(hist.md), "jsd_rows": len(hist.jsd),
                   "state_rows": len(hist.states)}
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    # CPU seconds (all threads) next to wall time: the host is shared, wall time
    # moves with the neighbours' load, CPU time much less.
    return {"what": what, "seconds": round(seconds, 3), "cpu_s": round(cpu, 3),
            "peak_rss_mb": round(_rss_mb(), 1), "rss_after_imports_mb": round(rss_imports, 1),
            "runs": len(runs), **out}


def _child(*args: str, pg_url: str | None = None) -> dict[str, Any]:
    # One BLAS thread: on a shared 2-core host OpenBLAS's spinning threads made
    # the JSD GEMMs 3-4x slower.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    if pg_url:
        env[PG_ENV] = pg_url
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True,
                         text=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares exponent b of y ~ x^b (1 = linear)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if y > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
    return round(sum((x - mx) * (y - my) for x, y in pts)
                 / sum((x - mx) ** 2 for x, _ in pts), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1M,3M,10M")
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the DuckDB files here")
    ap.add_argument("--store", choices=("duckdb", "postgresql"), default="duckdb",
                    help="the store the history is read from")
    ap.add_argument("--generate", nargs=2, metavar=("PATH", "CALLS"), help=argparse.SUPPRESS)
    ap.add_argument("--load", nargs=3, metavar=("PATH", "PORT", "WORKDIR"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--measure", nargs=2, metavar=("PATH", "WHAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        print(json.dumps(generate(Path(args.generate[0]), int(args.generate[1]))))
        return
    if args.load:
        print(json.dumps(load_postgres(Path(args.load[0]), os.environ[PG_ENV],
                                       int(args.load[1]), Path(args.load[2]))))
        return
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), args.measure[1], args.threads)))
        return
    sizes = [_size(s) for s in args.sizes.split(",")]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="history-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    pg_ctx = cluster(PG_SETTINGS) if args.store == "postgresql" else contextlib.nullcontext()
    rows = []
    try:
        with pg_ctx as pg:
            for n in sizes:
                rows.append(_size_row(n, work, args.threads, pg))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    growth = {w: _slope([float(r["calls_requested"]) for r in rows],
                        [r[w]["seconds"] for r in rows]) for w in ("latest", "history")}
    name = "history_scale" if args.store == "duckdb" else "history_scale_pg"
    doc = {"command": f"python bench/history_scale.py --sizes {args.sizes} --store {args.store}",
           "store": args.store, "duckdb_threads": args.threads, "openblas_threads": 1,
           "cpus": os.cpu_count(), "postgresql_settings": PG_SETTINGS if pg is not None else None,
           "load_average_at_end": os.getloadavg(), "growth_exponent": growth,
           "targets": {"latest_s": 2, "history_s": 60, "peak_rss_mb": 4096}, "sizes": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    _figure(rows, name)
    print(json.dumps(doc, indent=2))


def _size_row(n: int, work: Path, threads: int, pg: Cluster | None) -> dict[str, Any]:
    """One size: generated (or reused), loaded into PostgreSQL if asked, measured."""
    path = work / f"calls-{n}.duckdb"
    gen = _child("--generate", str(path), str(n)) if not path.exists() else {"reused": True}
    gen["file_mb"] = round(path.stat().st_size / 1e6, 1)
    row: dict[str, Any] = {"calls_requested": n, "generate": gen}
    url = None
    if pg is not None:
        url = pg.database()
        server0 = pg.cpu_s()
        row["load"] = _child("--load", str(path), str(pg.port), str(work), pg_url=url)
        row["load"]["load_server_cpu_s"] = round(pg.cpu_s() - server0, 1)
        print(f"{n:>9} loaded   {row['load']['load_s']:8.1f} s  server cpu "
              f"{row['load']['load_server_cpu_s']:7.1f} s  {row['load']['database_mb']} MB",
              file=sys.stderr)
    for what in ("latest", "history"):
        server0 = pg.cpu_s() if pg else 0.0
        row[what] = _child("--threads", str(threads), "--measure", str(path), what, pg_url=url)
        if pg is not None:
            row[what]["server_cpu_s"] = round(pg.cpu_s() - server0, 3)
        server = (f"  server cpu {row[what]['server_cpu_s']:7.2f} s" if pg is not None
                  else "")
        print(f"{n:>9} {what:<8} {row[what]['seconds']:8.2f} s  cpu "
              f"{row[what]['cpu_s']:7.2f} s{server}  peak {row[what]['peak_rss_mb']:7.1f} MB",
              file=sys.stderr)
    if pg is not None and url is not None:  # the next size's database needs the disk
        pg.psql(f"DROP DATABASE \"{url.rsplit('/', 1)[1]}\"", timeout=600)
    return row


def _figure(rows: list[dict[str, Any]], name: str) -> None:
    from monitor.report.figures import Series, line_chart

    xs = [float(r["calls_requested"]) for r in rows]
    series = [Series(w, xs, [r[w]["seconds"] for r in rows]) for w in ("latest", "history")]
    line_chart(RESULTS / f"{name}.png", series,
               title="Recomputing the statistics vs stored probe calls",
               xlabel="stored probe calls", ylabel="seconds",
               hlines={"latest target 2 s": 2.0, "history target 60 s": 60.0},
               logx=True, logy=True)


if __name__ == "__main__":
    main()
