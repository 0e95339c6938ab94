"""The daemon: process management only - the scheduler, the run processes, recovery.

    scheduler.py  `monitor run`: the only APScheduler user; serves /metrics, /healthz,
                  /report (monitor.serve)
    launcher.py   the scheduler's side of a run: a run process launched, its counts read
    child.py      `python -m monitor.daemon.child`: one scheduled run in its own process
    scheduled.py  what that process does: budget, recovery, the run, its review
                  (monitor.review), its report, the deliveries (monitor.alerts)
    recovery.py   which interrupted run is resumed, which closed, and why
    fleet.py      a replica among others on a shared store: takeovers, metrics of all

Nothing is imported here: the scheduler process must not load the run stack
(LiteLLM, pandas, SciPy); import the module you need.
"""
