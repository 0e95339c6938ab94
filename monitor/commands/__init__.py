"""One module per command line verb: parse its arguments' meaning, call the stages,
print, return the exit code. monitor.cli imports a verb's module only when it runs.

    probe.py      `monitor probe --once`: runs and their reviews (monitor.review)
    summary.py    what probe prints: the text summary, the JSON document
    runs.py       `monitor runs`
    baseline.py   `monitor baseline set | show`
    calibrate.py  `monitor baseline calibrate`
    plan.py       `monitor plan`
    plan_compare.py  `monitor plan --compare`: the calls a comparison needs
    compare.py    `monitor compare`: a candidate against production (monitor.compare)
    report.py     `monitor report`
    export.py     `monitor export --parquet`
    migrate.py    `monitor migrate --from FILE`: a DuckDB history into PostgreSQL
    config.py     `monitor config check`
    catalog.py    `monitor catalog validate | stats | new-scenario | pairs`
    reading.py    the database as the commands that only read open it (read-only)
"""
