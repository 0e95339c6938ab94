"""Serving: the metrics and the reports the daemon exposes.

    metrics.py   the gauges and counters, read back from the store once per run
    exporter.py  the only prometheus_client user: exposition and the HTTP server
                 (/metrics, /healthz, /report)
    site.py      the served report folder: publishing, the index, what /report may read
    publish.py   a finished run's report into that folder (built in the run process)

Nothing is imported here: the scheduler process must not load the report stack
(pandas, matplotlib); import the module you need.
"""
