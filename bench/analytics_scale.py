"""Analytics at scale (issue 7 item 4): statistics over 100k..1M stored probe calls.

    python bench/analytics_scale.py [--sizes 100k,250k,500k,1M] [--threads 2]
                                    [--pandas-max 100k] [--workdir DIR]

For each size N a DuckDB file with the monitor's real schema (monitor/store.py
migrations) gets N probe calls generated INSIDE DuckDB (range() and hash(),
deterministic): runs of 40 triplets x 6 languages = 240 calls, one endpoint,
the real catalog's triplets of 3 scenarios, 3 scores per answered call
(1..10, option quality + an injected local-language bias CN .9, KR .6, JP .4,
FR .3, US/GB .1 + noise), ~0.8% failed and ~0.4% unparseable calls. Then,
each in a FRESH subprocess (so ru_maxrss is that measurement's peak):
  latest  - MD/DiD/JSD with CIs and the drift state for the endpoint's latest run
            (target < 2 s)
  history - every run's MD/JSD with CIs and the drift states over all runs
            (target < 30 s)
both on the current pandas path (Store.scores_frame + stats.md_table /
jsd_table per run; history only up to --pandas-max, it is minutes at 1M) and
on the DuckDB path (monitor/analytics.py). Children run with DuckDB
`SET threads = --threads` (default 2) and OPENBLAS_NUM_THREADS=1. Writes
bench/results/analytics_scale.json and analytics_scale.png; the DuckDB files
(~1 GB) go to a temporary folder that is removed, unless --workdir keeps them.
"""

from __future__ import annotations

import argparse
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
ENDPOINT = "bench-0"
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
    from monitor.catalog import load_catalog
    from monitor.store import Store

    catalog = load_catalog()
    store = Store(path)
    n_runs = max(1, calls // (TRIPLETS * len(LANGS)))
    scen = sorted(catalog.scenarios)
    trip = [(si, k, t) for si, s in enumerate(scen)
            for k, t in enumerate(catalog.scenarios[s].triplets())]
    opts = [(s, o.id, o.country) for s in scen for o in catalog.scenarios[s].options.values()]
    t0 = time.perf_counter()
    with store.session():
        store.query(
            "INSERT INTO runs SELECT printf('bench-0-%06d', r), $1, 'simulated/bench', true, r, 0, "
            "$2, $3, $4, '[\"plain\", \"cot\", \"female\", \"male\"]', $5, $5 * 6, "
            "TIMESTAMPTZ '2026-01-01 00:00:00+00' + r * INTERVAL 30 MINUTE, "
            "TIMESTAMPTZ '2026-01-01 00:02:00+00' + r * INTERVAL 30 MINUTE, 'complete' "
            "FROM range($6) t(r)",
            [ENDPOINT, catalog.version, json.dumps(scen), json.dumps(LANGS), TRIPLETS, n_runs])
        per_scen = [sum(1 for t in trip if t[0] == i) for i in range(len(scen))]
        # Slot s of run r asks scenario s % 3 and walks that scenario's triplets, so a
        # run never repeats a triplet and the runs rotate through the catalog.
        store.query(
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
            "TIMESTAMPTZ '2026-01-01 00:00:00+00' + r * INTERVAL 30 MINUTE + s * INTERVAL 1 SECOND "
            "FROM slot JOIN trip USING (si, k) CROSS JOIN lang",
            [[t[0] for t in trip], [t[1] for t in trip], [t[2].id for t in trip],
             [t[2].scenario for t in trip], [t[2].target_id for t in trip],
             [t[2].pair_id for t in trip], [",".join(t[2].option_ids) for t in trip],
             per_scen, n_runs, TRIPLETS, LANGS, ENDPOINT, catalog.version, RAW])
        local = {c: lang for lang, cs in catalog.languages.items() for c in cs}
        store.query(
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
        counts = {t: int(store.query(f"SELECT count(*) FROM {t}")[0][0])
                  for t in ("runs", "probe_calls", "scores")}
    return {**counts, "generate_s": round(time.perf_counter() - t0, 2),
            "file_mb": round(path.stat().st_size / 1e6, 1)}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(path: Path, what: str, threads: int) -> dict[str, Any]:
    """One measurement in this (fresh) process; peak RSS includes the imports."""
    import pandas as pd

    from monitor.catalog import load_catalog
    from monitor.stats import jsd_table, md_table
    from monitor.store import Store
    from monitor.watch import history as analytics

    local = {lang: list(c) for lang, c in load_catalog().languages.items()}
    store = Store(path)
    rss_imports = _rss_mb()
    t0, cpu0 = time.perf_counter(), time.process_time()
    with store.session():
        store.query(f"SET threads = {threads}")
        store.query("SET enable_progress_bar = false")
        runs = store.runs(ENDPOINT)
        ids, base = [r.run_id for r in runs], [r.run_id for r in runs[:10]]
        latest = runs[-1]
        if what == "latest-pandas":
            sc = store.scores_frame([latest.run_id])
            md = md_table(sc, LANGS, local).assign(run_id=latest.run_id)
            jsd = jsd_table(sc, LANGS, seed=latest.seed)
            bmd = md_table(store.scores_frame(base), LANGS, local)
            states = analytics.drift_replay(md, bmd, [latest.run_id])
        elif what == "latest-sql":
            md = analytics.md_frame(store, LANGS, local, run_ids=[latest.run_id])
            jsd = analytics.jsd_frame(store, LANGS, {latest.run_id: latest.seed},
                                      run_ids=[latest.run_id])
            bmd = analytics.md_frame(store, LANGS, local, run_ids=base, pooled=True)
            states = analytics.drift_replay(md, bmd, [latest.run_id])
        elif what == "history-pandas":
            mds, jsds = [], []
            for k in range(0, len(ids), 50):  # 50 runs per query: one scan per batch
                sc = store.scores_frame(ids[k:k + 50])
                for run_id, part in sc.groupby("run_id", sort=False):
                    mds.append(md_table(part, LANGS, local).assign(run_id=run_id))
                    jsds.append(jsd_table(part, LANGS, seed=0))
            md, jsd = pd.concat(mds), pd.concat(jsds)
            bmd = md_table(store.scores_frame(base), LANGS, local)
            states = analytics.drift_replay(md, bmd, ids[10:])
        else:  # history-sql
            hist = analytics.history(store, ENDPOINT, baseline_runs=base)
            md, jsd = hist[hist["kind"] == "md"], hist[hist["kind"] == "jsd"]
            states = hist[hist["state"].notna()]
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    # CPU seconds (all threads) next to wall time: the host is shared, wall time
    # moves with the neighbours' load, CPU time much less.
    return {"what": what, "seconds": round(seconds, 3), "cpu_s": round(cpu, 3),
            "peak_rss_mb": round(_rss_mb(), 1),
            "rss_after_imports_mb": round(rss_imports, 1), "runs": len(runs),
            "md_rows": len(md), "jsd_rows": len(jsd), "state_rows": len(states)}


def _child(*args: str, blas_threads: int = 1) -> dict[str, Any]:
    # One BLAS thread: on a shared 2-core host OpenBLAS's spinning threads made
    # the JSD GEMMs 3-4x slower (measured 18 s vs 4 s for history at 100k).
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(blas_threads)}
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
    ap.add_argument("--sizes", default="100k,250k,500k,1M")
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads (SET threads)")
    ap.add_argument("--pandas-max", default="100k", help="largest size for pandas history")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the DuckDB files here")
    ap.add_argument("--generate", nargs=2, metavar=("PATH", "CALLS"), help=argparse.SUPPRESS)
    ap.add_argument("--measure", nargs=2, metavar=("PATH", "WHAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        print(json.dumps(generate(Path(args.generate[0]), int(args.generate[1]))))
        return
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), args.measure[1], args.threads)))
        return
    sizes = [_size(s) for s in args.sizes.split(",")]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="analytics-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows = _run_sizes(args, sizes, work)
    finally:
        if args.workdir is None:  # ~1 GB of DuckDB files for the default sizes
            shutil.rmtree(work, ignore_errors=True)
    growth = {w: _slope([float(r["calls_requested"]) for r in rows],
                        [r[w]["seconds"] for r in rows])
              for w in ("latest-pandas", "latest-sql", "history-sql")}
    doc = {"command": "python bench/analytics_scale.py --sizes " + args.sizes,
           "duckdb_threads": args.threads, "openblas_threads": 1, "cpus": os.cpu_count(),
           "load_average_at_end": os.getloadavg(), "growth_exponent": growth,
           "targets": {"latest_s": 2, "history_s": 30, "peak_rss_mb": 2048}, "sizes": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "analytics_scale.json").write_text(json.dumps(doc, indent=2) + "\n")
    _figure(rows)
    print(json.dumps(doc, indent=2))


def _run_sizes(args: argparse.Namespace, sizes: list[int], work: Path) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        path = work / f"calls-{n}.duckdb"
        gen = (_child("--generate", str(path), str(n)) if not path.exists()
               else {"reused": True, "file_mb": round(path.stat().st_size / 1e6, 1)})
        row: dict[str, Any] = {"calls_requested": n, "generate": gen}
        whats = ["latest-pandas", "latest-sql", "history-sql"]
        if n <= _size(args.pandas_max):
            whats.append("history-pandas")
        for what in whats:
            row[what] = _child("--threads", str(args.threads), "--measure", str(path), what)
            print(f"{n:>9} {what:<15} {row[what]['seconds']:8.2f} s  "
                  f"peak {row[what]['peak_rss_mb']:7.1f} MB", file=sys.stderr)
        rows.append(row)
    return rows


def _figure(rows: list[dict[str, Any]]) -> None:
    from monitor.report.figures import Series, line_chart

    xs = [float(r["calls_requested"]) for r in rows]
    series = [Series(w, [x for x, r in zip(xs, rows, strict=True) if w in r],
                     [r[w]["seconds"] for r in rows if w in r])
              for w in ("latest-sql", "latest-pandas", "history-sql", "history-pandas")]
    line_chart(RESULTS / "analytics_scale.png", [s for s in series if s.x],
               title="Analytics time vs stored probe calls", xlabel="stored probe calls",
               ylabel="seconds", hlines={"latest target 2 s": 2.0, "history target 30 s": 30.0},
               logx=True, logy=True)


if __name__ == "__main__":
    main()
