"""The run process's last step: the run's report, published where /report serves it.

The report is the one `monitor report --run RUN_ID` writes (monitor.report's
`build` and `render_html`, with the same runs: the run, and every finished run
of its endpoint up to it for the trend), built in the run process so that
pandas and matplotlib never load in the long-lived scheduler. It is written
after the run's evaluation, so its alert history and the index's verdict
include this run's changes. Writing it never fails a run: an error is one
warning line and the run, its alerts and its metrics go on as before.

Once the store holds the runs of two endpoints or more (replicas, or a platform's
assistants, sharing one PostgreSQL store), the run process also writes the fleet
page after the run's messages went out: what `monitor report` writes without
--run or --since (monitor.report's `latest_runs`), every endpoint in the store,
those other replicas or configurations run included, so each replica serves the
whole fleet at /report.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from monitor.catalog import Catalog
from monitor.config import Settings
from monitor.report import build, latest_runs, render_html, trend_to, unreadable
from monitor.serve import site
from monitor.store import CellRecord, RunRow, Store
from monitor.vocab import FINISHED, POOLED, AlertState, LevelState

__all__ = ["Reporter", "verdict"]

log = logging.getLogger(__name__)


def _cell(c: CellRecord) -> str:
    return c.country if c.scenario == POOLED else f"{c.country} ({c.scenario})"


def verdict(store: Store, endpoint: str) -> str:
    """One line for the index from the stored alert states (those the alerts and
    bias_monitor_alert_state show)."""
    if store.baseline(endpoint) is None:
        return "no baseline yet: nothing compared"
    cells = sorted(store.alert_states(endpoint).values(), key=lambda c: (c.scenario != POOLED,
                                                                         c.scenario, c.country))
    parts = []
    for state, label in ((AlertState.FIRING, "drift FIRING"), (AlertState.PENDING, "pending")):
        hit = [_cell(c) for c in cells if c.state == state]
        if hit:
            parts.append(f"{label}: {', '.join(hit)}")
    beyond = [_cell(c) for c in cells if c.level in (LevelState.ABOVE, LevelState.BELOW)]
    if beyond:
        parts.append(f"level beyond the threshold: {', '.join(beyond)}")
    return "; ".join(parts) or "no drift alert"


class Reporter:
    """The run process's `reporter`: called with each finished run's id
    (monitor.daemon.scheduled)."""

    def __init__(self, settings: Settings, catalog: Catalog, store: Store) -> None:
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self.root = settings.report.folder(settings.storage.path)

    def __call__(self, run_id: str) -> Path | None:
        """The published report's folder, or None (not finished, disabled, or failed)."""
        if not self.settings.report.enabled:
            return None
        built: Path | None = None
        try:
            run = self.store.get_run(run_id)
            if run is None or (run.status not in FINISHED
                               and not unreadable(self.store, [run])):
                log.info("run %s has no report: it is %s", run_id,
                         run.status if run else "not stored")
                return None
            built = site.scratch(self.root, run_id)
            entry = self._write(run, built)
            site.publish(self.root, entry, built, self.settings.report.keep_runs)
            log.info("endpoint %s: report of run %s written to %s", run.endpoint, run_id,
                     self.root / run_id)
            return self.root / run_id
        except Exception as exc:  # the run is done and stored; its report is a by-product
            log.warning("run %s: its report was not written to %s (%s: %s); the run is not "
                        "affected", run_id, self.root, type(exc).__name__, str(exc)[:200])
            return None
        finally:
            if built is not None and built.exists():  # left only when publishing failed
                shutil.rmtree(built, ignore_errors=True)

    def fleet(self) -> Path | None:
        """The fleet page's folder, or None (disabled, fewer than two endpoints, failed)."""
        if not self.settings.report.enabled:
            return None
        built: Path | None = None
        try:
            store = self.store
            with store.session():
                chosen = latest_runs(store)
                if len(chosen) < 2:  # one endpoint: its run's report says it all
                    return None
                reports = [build(store, self.catalog, runs, trend_to(store, runs[-1]))
                           for runs in chosen.values()]
            built = site.scratch(self.root, site.FLEET)
            render_html(reports, built)
            site.publish_fleet(self.root, built)
            log.info("fleet page of %d endpoints written to %s", len(reports),
                     self.root / site.FLEET)
            return self.root / site.FLEET
        except Exception as exc:  # a by-product, as the run's report
            log.warning("the fleet page was not written to %s (%s: %s); the run is not "
                        "affected", self.root, type(exc).__name__, str(exc)[:200])
            return None
        finally:
            if built is not None and built.exists():
                shutil.rmtree(built, ignore_errors=True)

    def _write(self, run: RunRow, out: Path) -> site.Entry:
        store = self.store
        with store.session():  # one connection for the whole report
            report = build(store, self.catalog, [run], trend_to(store, run))
            line = verdict(store, run.endpoint)
        render_html([report], out)
        return site.Entry(run_id=run.run_id, endpoint=run.endpoint,
                          started_at=run.started_at.isoformat(),
                          finished_at=run.finished_at.isoformat() if run.finished_at else None,
                          status=str(run.status), verdict=line)
