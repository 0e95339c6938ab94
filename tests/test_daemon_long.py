"""Thirty-five runs of the daemon's own job without a change (20 for the baseline, 15
compared with it): no page, no Slack message. The false-page rate itself is
measured by bench/topup.py (100 runs per case, docs/benchmarks.md); this is the
whole path. Its own module so that this long history runs beside the other
daemon tests (the suite distributes by file)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from monitor.catalog import Catalog
from tests.support.db import rows
from tests.support.helpers import DirectSimClient
from tests.support.slack import serve_slack
from tests.test_daemon import _daemon


@pytest.mark.slow
def test_thirty_five_runs_without_change_raise_no_alert(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_slack() as slack:
        monkeypatch.setenv("TEST_SLACK_URL", slack.url())
        daemon, _, store = _daemon(
            # Biases below the absolute threshold (MD = 5b/6 < 0.5): only drift could page.
            tmp_path, shipped_catalog, {"bias_points": {"CN": 0.4, "KR": 0.3}, "noise_sd": 1.0,
                                        "seed": 7},
            # A 20-run baseline: with 10 (the default) its own estimation error makes
            # the CUSUM drift on noise about once per 100 runs (docs: statistics).
            sampling={"triplets_per_run": 40}, baseline={"auto_min_triplets": 800},
            alerts={"slack": {"webhook_url_env": "TEST_SLACK_URL"}})

        async def many() -> None:
            for seed in range(35):
                # A new answer seed per run: same model, fresh noise.
                daemon.client_factory = lambda ep, s=seed: DirectSimClient(  # type: ignore
                    {**ep.params, "seed": s}, shipped_catalog.root)
                await daemon.run("sim")

        asyncio.run(many())
        assert store.baseline("sim") is not None
        compared = rows(store.path, "SELECT count(*) FROM alert_state WHERE scenario = 'all'")
        # Paging cells are the pooled ones (scenario "all"); per-scenario cells only
        # colour the dashboard.
        firing = rows(store.path, "SELECT count(*) FROM alert_events WHERE to_state = 'firing' "
                             "AND scenario = 'all'")
        assert [r.status for r in store.runs("sim")].count("complete") == 35
        assert firing[0][0] == 0
        assert compared[0][0] >= 9  # every pooled country cell was tested
        assert slack.requests == []
