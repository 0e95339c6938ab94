"""The daemon: the scheduler process, and the run process it starts per scheduled run.

    scheduler.py  `monitor run`: the only APScheduler user; /metrics, /healthz, /report
    jobs.py       the scheduler's side of a run: a child process, its report
    child.py      `python -m monitor.daemon.child`: one run in its own process
    job.py        what a run does: budget, resume, run, compare, notify
    recovery.py   which interrupted run is resumed, which closed, and why
    metrics.py    the gauges and counters, read back from DuckDB
    exporter.py   the only prometheus_client user: exposition and the HTTP server
    outbox.py     messages owed to the alert sinks, delivered once to each, in order
    sinks.py      what a sink is; a JSON POST with retries (through monitor.httpio,
                  the only httpx user); secrets masked in what is logged
    slack.py      the only slack_sdk user
    webhook.py    the generic JSON webhook (alerts.webhook)
    pagerduty.py  PagerDuty Events v2 (alerts.pagerduty): trigger / resolve per cell
    publish.py    the run process's last step: the run's report into report.dir
    site.py       the served report folder: publishing, the index, what /report may read

Nothing is imported here: the scheduler process must not load the run stack
(LiteLLM, pandas, SciPy); import the module you need.
"""
