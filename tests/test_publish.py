"""The run's report after each run (monitor.serve.publish), in-process on a real DuckDB
file: the page `monitor report --run` writes, published (pruning and the index:
tests/test_site.py); a report that cannot be written costs the run nothing. The fleet
page on a shared PostgreSQL store (tests/support/postgres.py), served over real HTTP:
every endpoint in the store, another configuration's included."""

from __future__ import annotations

import asyncio
import http.client
import logging
import re
from pathlib import Path

import pytest

from monitor.catalog import Catalog
from monitor.cli import main
from monitor.serve import site
from monitor.serve.exporter import MetricsServer, make_registry
from monitor.serve.metrics import MetricsState
from monitor.serve.publish import Reporter
from tests.support.helpers import sim_daemon, write_config
from tests.support.postgres import PASSWORD, cluster

SIM = {"name": "sim", "model": "simulated/demo", "max_concurrency": 32, "rpm": 100000,
       "params": {"bias_points": {"CN": 0.5}, "seed": 3}}


def test_a_run_is_published_as_monitor_report_writes_it(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    cfg = write_config(tmp_path, [SIM])
    daemon, settings, store = sim_daemon(cfg, shipped_catalog)
    daemon.reporter = Reporter(settings, shipped_catalog, store)
    asyncio.run(daemon.run("sim"))
    [last] = store.runs("sim")
    root = tmp_path / "reports"  # beside monitor.duckdb by default
    [entry] = site.entries(root)
    assert (entry.run_id, entry.endpoint, entry.status) == (last.run_id, "sim", "complete")
    assert entry.verdict == "no baseline yet: nothing compared"
    assert main(["report", "--run", last.run_id, "--config", str(cfg), "--out",
                 str(tmp_path / "cli")]) == 0
    served = root / last.run_id
    assert (served / "sim.json").read_text() == (tmp_path / "cli" / "sim.json").read_text()
    assert {p.name for p in served.iterdir()} == {p.name for p in (tmp_path / "cli").iterdir()}
    assert last.run_id in (served / "index.html").read_text(encoding="utf-8")


def test_a_report_that_cannot_be_written_is_one_warning_and_the_run_goes_on(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cfg = write_config(tmp_path, [SIM], report={"dir": str(blocker / "reports")})
    daemon, settings, store = sim_daemon(cfg, shipped_catalog)
    daemon.reporter = Reporter(settings, shipped_catalog, store)
    with caplog.at_level(logging.WARNING, logger="monitor.serve.publish"):
        asyncio.run(daemon.run("sim"))
    [run] = store.runs("sim")
    assert run.status == "complete" and daemon.failures == {}
    [line] = [r.getMessage() for r in caplog.records if r.name == "monitor.serve.publish"]
    assert f"run {run.run_id}: its report was not written to {blocker / 'reports'}" in line
    assert "the run is not affected" in line


def test_a_run_whose_answers_could_not_be_read_is_published_saying_so(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    garbled = {**SIM, "params": {"garble_rate": 1.0, "seed": 3}}
    cfg = write_config(tmp_path, [garbled])
    daemon, settings, store = sim_daemon(cfg, shipped_catalog)
    daemon.reporter = Reporter(settings, shipped_catalog, store)
    asyncio.run(daemon.run("sim"))
    [run] = store.runs("sim")
    assert run.status == "failed"  # nothing scored: still failed for alerts and baselines
    [entry] = site.entries(tmp_path / "reports")
    assert (entry.run_id, entry.status) == (run.run_id, "failed")
    page = (tmp_path / "reports" / run.run_id / "index.html").read_text(encoding="utf-8")
    assert "answers unreadable" in page and "answers could be read" in page
    assert "json_schema" in page


def _get(port: int, path: str) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location") or "", resp.read().decode()
    finally:
        conn.close()


def test_each_replica_serves_the_fleet_page_of_every_endpoint_in_the_shared_store(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two assistants' monitors, each its own configuration and report folder, on one
    PostgreSQL store: once the second has run, its /report opens the fleet page naming
    both, each linking to its section; the first (one endpoint in the store when it
    ran) led to its run's report."""
    with cluster() as pg:
        monkeypatch.setenv("BM_PG_URL", pg.database())
        servers, stores = [], []
        for name in ("alpha", "beta"):
            (tmp_path / name).mkdir()
            cfg = write_config(tmp_path / name, [{**SIM, "name": name}],
                               storage={"path": str(tmp_path / name / "monitor.duckdb"),
                                        "url_env": "BM_PG_URL"})
            daemon, settings, store = sim_daemon(cfg, shipped_catalog)
            daemon.reporter = Reporter(settings, shipped_catalog, store)
            asyncio.run(daemon.run(name))
            stores.append(store)
            servers.append(MetricsServer(make_registry(MetricsState()), "127.0.0.1", 0,
                                         lambda: (True, {}), tmp_path / name / "reports")
                           .start())
        try:
            alpha, beta = (s.port for s in servers)
            [first] = stores[0].runs("alpha")
            assert _get(alpha, "/report")[:2] == (302, f"report/{first.run_id}/")
            assert _get(alpha, "/report/fleet/")[0] == 404
            status, location, _ = _get(beta, "/report")
            assert (status, location) == (302, "report/fleet/")
            status, _, page = _get(beta, "/report/fleet/")
            assert status == 200
            rows = re.findall(r'<tr data-endpoint="([^"]+)"><td class="l"><a href="#([^"]+)"',
                              page)
            assert rows == [("alpha", "endpoint-alpha"), ("beta", "endpoint-beta")]
            for _, anchor in rows:  # each name opens its endpoint's section of the page
                assert f'id="{anchor}"' in page
            assert first.run_id in page and stores[1].runs("beta")[0].run_id in page
            assert PASSWORD not in page
            assert 'href="fleet/"' in _get(beta, "/report/")[2]  # the runs index links it
        finally:
            for srv in servers:
                srv.stop()
