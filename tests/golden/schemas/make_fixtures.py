"""Write a small database of every schema version, as each release left it.

    python -m tests.golden.schemas.make_fixtures

Run once per new schema version (it writes the missing file):
v<k>.duckdb.gz is what migrations 1..k make, holding the rows a release of
that version wrote. tests/test_schema.py migrates each to the current schema.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import duckdb

from monitor.store.schema import APP, MIGRATIONS

HERE = Path(__file__).parent
T0 = "2026-11-01 10:00:00+00"
T1 = "2026-11-01 10:05:00+00"


def _rows(con: duckdb.DuckDBPyConnection, version: int) -> None:
    langs = json.dumps(["en", "zh"])
    run = ["ep-r1", "ep", "openai/gpt-4o", False, 0, 0, "cat1", json.dumps(["university"]),
           langs, json.dumps(["plain"]), 1, 2, T0, T1, "complete"]
    if version >= 4:
        run += ["host|boot|1|2", T1, None, 1]
    if version >= 6:
        run += ["setup-0123456789ab"]
    if version >= 8:
        run += ["gpt-4o-2024"]
    con.execute(f"INSERT INTO runs VALUES ({', '.join('?' for _ in run)})", run)
    fmt = ", 'json_schema'" if version >= 6 else ""
    for lang, text in (("en", "A: 7/10 B: 5/10 C: 6/10"), ("zh", "A：9分 B：5分 C：6分")):
        con.execute("INSERT INTO probe_calls VALUES (?, 'university/tsinghua/p001', ?, 'ep', "
                    "'university', 'tsinghua', 'p001', 'plain', 'tsinghua,mit,ethz', 'h', "
                    "'cat1', 'ok', 'lines', ?, NULL, 0.5, 100, 50, 0.001, 'gpt-4o-2024', "
                    f"'fp', 1, ?{fmt})", ["ep-r1", lang, text, T0])
        for label, oid, country, score in (("A", "tsinghua", "CN", 9 if lang == "zh" else 7),
                                           ("B", "mit", "US", 5), ("C", "ethz", "CH", 6)):
            con.execute("INSERT INTO scores VALUES ('ep-r1', 'university/tsinghua/p001', ?, ?, "
                        "?, ?, ?, ?, 2, 1)", [lang, label, oid, country, oid == "tsinghua",
                                               score])
    con.execute("INSERT INTO run_stats VALUES ('ep-r1', 'md', 'all', 'CN', 1.0, NULL, NULL, 1, "
                "NULL, '{}')")
    if version >= 2:
        setup = ", 'setup-0123456789ab'" if version >= 6 else ""
        con.execute("INSERT INTO baselines VALUES ('ep', ?, ?, 'cat1', 'gpt-4o-2024', false, "
                    f"true{setup})", [T1, json.dumps(["ep-r1"])])
        level = ", 'above', 0" if version >= 5 else ""
        con.execute("INSERT INTO alert_state VALUES ('ep', 'all', 'CN', 'pending', 1.5, 0.0, 1, "
                    f"0, 2.1, 'drift up', 'ep-r1', ?, NULL{level})", [T1])
        con.execute("INSERT INTO alert_events VALUES ('ep', 'all', 'CN', ?, 'ok', 'pending', "
                    "'ep-r1', 1.0, 0.2, 2.1, 'drift up')", [T1])
    if version >= 3:
        con.execute("INSERT INTO outbox VALUES (1, 'ep', ?, ?, NULL)",
                    [T1, json.dumps({"kind": "note", "text": "hello"})])
    if version >= 7:  # owed to Slack and PagerDuty; PagerDuty skipped it, Slack is down
        con.execute("INSERT INTO outbox_delivery VALUES (1, 'slack', NULL, NULL), "
                    "(1, 'pagerduty', ?, 'skipped')", [T1])
    if version >= 9:  # a finished comparison of ep (production) and a staging endpoint
        con.execute("INSERT INTO comparisons VALUES ('cmp-1', 'live', 'ep', 'ep-staging', "
                    "'cmp-1-baseline', 'cmp-1-candidate', '[]', 0.5, 10000, 0.05, 0.1, 10, 0, "
                    "?, ?, 'complete', 'every country decided', 'regression')", [T0, T1])
    if version >= 10:  # a replica's claim of a slot, and its lease of the endpoint's runs
        con.execute("INSERT INTO slots VALUES ('ep', ?, 'replica-a', ?)", [T0, T0])
        con.execute("INSERT INTO leases VALUES ('endpoint/ep', 'replica-a|1', ?, ?)", [T0, T1])


def make(version: int, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "v.duckdb"
        con = duckdb.connect(str(db))
        con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', ?)",
                    [APP, str(version)])
        for statements in MIGRATIONS[:version]:
            for sql in statements:
                con.execute(sql)
        _rows(con, version)
        con.execute("CHECKPOINT")
        con.close()
        with db.open("rb") as src, out.open("wb") as raw, \
                gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    # Only the versions without a file: a committed fixture is what that release
    # wrote and is never made again (`--all` remakes every one, on purpose only).
    import sys

    for v in range(1, len(MIGRATIONS) + 1):
        out = HERE / f"v{v}.duckdb.gz"
        if out.exists() and "--all" not in sys.argv:
            continue
        make(v, out)
        print(f"v{v}: {out.stat().st_size} bytes")
