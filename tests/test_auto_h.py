"""`thresholds.cusum_h: auto`: the CUSUM's h sized by the planner against each
baseline for `thresholds.false_alarms_per_100` (issue 14, item 4), through the
planner's API and through the daemon's own job."""

from __future__ import annotations

import asyncio
import logging
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.catalog import Catalog
from monitor.config import CUSUM_H
from monitor.daemon.scheduled import ScheduledRun
from monitor.store import Store
from monitor.watch.plan import H_GRID, assess, cell_shares
from monitor.watch.reference import baseline_h
from tests.support.db import rows
from tests.support.helpers import DirectSimClient, sim_daemon, write_config

SCENARIOS = ["university", "relocation", "travel"]
LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
KW: dict[str, Any] = {"drift_points": 0.5, "min_runs_firing": 2}


def test_auto_h_is_the_smallest_meeting_the_target_and_a_smaller_baseline_needs_more(
        shipped_catalog: Catalog) -> None:
    cells = cell_shares(shipped_catalog, SCENARIOS, LANGS)
    sizes = [200, 800, 2000]
    got = [baseline_h(cells, 0.95, 40, b, fa_target=1.0, **KW) for b in sizes]
    for b, d in zip(sizes, got, strict=True):
        assert d.false_alarms_per_100 is not None and d.false_alarms_per_100 <= 1.0
        # The smallest such h: one grid step lower misses the target.
        _, fa_below, _ = assess(40, cells, 0.95, 0.5, math.inf, 3, 0.5, 2, None,
                                  hs=np.array([d.h - 0.5]), baseline_triplets=b)
        assert fa_below is not None and fa_below > 1.0, (b, d)
    # A small baseline's error is shared by every later run: it needs a higher h.
    assert got[0].h > got[1].h > got[2].h
    strict = baseline_h(cells, 0.95, 40, 2000, fa_target=0.1, **KW)
    assert strict.h > got[2].h and strict.false_alarms_per_100 is not None
    assert strict.false_alarms_per_100 <= 0.1
    assert "from the baseline (sd 0.95, 2000 triplets)" in got[2].describe()


def test_with_the_top_up_on_the_auto_h_is_never_below_the_default(
        shipped_catalog: Catalog) -> None:
    # The top-up's alpha sets the false pages then, and h the evidence a resolve
    # needs: a lower h bought no page and cost false "resolved" (bench/auto_h.py).
    cells = cell_shares(shipped_catalog, SCENARIOS, LANGS)
    plain = baseline_h(cells, 0.95, 40, 2000, fa_target=1.0, **KW)
    up = baseline_h(cells, 0.95, 40, 2000, fa_target=1.0, floor=CUSUM_H, **KW)
    assert plain.h < CUSUM_H == up.h and up.planned == plain.h
    assert f"the planner's h {plain.h:g} for the CUSUM alone (" in up.describe()
    assert f"raised to {CUSUM_H:g}: with the top-up on" in up.describe()
    # A small baseline still raises h above the default.
    small = baseline_h(cells, 0.95, 40, 150, fa_target=1.0, floor=CUSUM_H, **KW)
    assert small.h > CUSUM_H and small.planned is None


def test_an_unreachable_target_or_no_sd_is_said_not_hidden(shipped_catalog: Catalog) -> None:
    cells = cell_shares(shipped_catalog, SCENARIOS, LANGS)
    tiny = baseline_h(cells, 0.95, 40, 120, fa_target=0.0001, **KW)
    assert tiny.h == float(H_GRID[-1]) and tiny.false_alarms_per_100 is None
    assert "out of reach" in tiny.describe()
    none = baseline_h(cells, math.nan, 40, 120, fa_target=1.0, **KW)
    assert none.h == CUSUM_H and "no sd" in none.describe()


def _daemon(tmp: Path, catalog: Catalog, h: float | str) -> tuple[ScheduledRun, Store]:
    tmp.mkdir()
    cfg = write_config(tmp, [{"name": "sim", "model": "simulated/demo",
                              "max_concurrency": 64, "rpm": 100000}],
                       sampling={"triplets_per_run": 40, "languages": ["en", "zh"]},
                       baseline={"auto_min_triplets": 200, "covariate": False},
                       thresholds={"cusum_h": h}, topup={"enabled": False})
    daemon, _, store = sim_daemon(cfg, catalog)
    return daemon, store


def _history(daemon: ScheduledRun, catalog: Catalog, params: list[dict[str, Any]]) -> None:
    async def go() -> None:
        for i, p in enumerate(params):
            daemon.client_factory = lambda ep, p=p, i=i: DirectSimClient(  # type: ignore
                {"noise_sd": 1.0, **p, "seed": 300 + i}, catalog.root)
            await daemon.run("sim")
    asyncio.run(go())


def _states(store: Store) -> list[tuple[Any, ...]]:
    return rows(store.path, "SELECT scenario, country, state, round(s_plus, 9), "
                            "round(s_minus, 9) FROM alert_state ORDER BY scenario, country")


def _cn_fired(store: Store) -> list[int]:
    """The run indexes at which CN's pooled cell went FIRING."""
    return [i for (i,) in rows(store.path, "SELECT r.run_index FROM alert_events e JOIN runs r "
                                           "USING (run_id) WHERE e.scenario = 'all' AND "
                                           "e.country = 'CN' AND e.to_state = 'firing' "
                                           "ORDER BY r.run_index")]


@pytest.mark.slow
def test_the_daemon_sizes_h_against_its_baseline_and_uses_it(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    calm, shifted = {"bias_points": 0.0}, {"bias_points": {"CN": 1.0}}
    history = [calm] * 6 + [shifted] * 3  # 5 runs make the 200-triplet baseline
    auto, auto_store = _daemon(tmp_path / "auto", shipped_catalog, "auto")
    with caplog.at_level(logging.INFO, logger="monitor"):
        _history(auto, shipped_catalog, history)
    said = [m for m in caplog.messages if "from the baseline (sd" in m]
    assert len(said) == 4, said  # once per compared run, the same h each time
    m = re.search(r"h ([0-9.]+) from the baseline \(sd ([0-9.]+), (\d+) triplets\): "
                  r"([0-9.]+) false pages per 100 runs expected", said[0])
    assert m is not None and len(set(said)) == 1, said
    h, sd, size = float(m[1]), float(m[2]), int(m[3])
    assert size == 200 and 0.3 < sd < 3 and float(m[4]) <= 1.0
    assert h != CUSUM_H  # else this test could not tell auto from the default
    # The same runs with that h written out: the same sums and states, the same page.
    fixed, fixed_store = _daemon(tmp_path / "fixed", shipped_catalog, h)
    _history(fixed, shipped_catalog, history)
    assert _states(auto_store) == _states(fixed_store)
    assert len(_cn_fired(auto_store)) == 1 == len(_cn_fired(fixed_store))
    # And h is what decides: at the grid's highest h the same shift pages later, if at
    # all within these runs.
    high, high_store = _daemon(tmp_path / "high", shipped_catalog, float(H_GRID[-1]))
    _history(high, shipped_catalog, history)
    assert all(i > _cn_fired(auto_store)[0] for i in _cn_fired(high_store)), (
        _cn_fired(auto_store), _cn_fired(high_store))


def test_an_h_that_is_neither_a_number_nor_auto_is_one_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    from monitor.cli import main

    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}],
                       thresholds={"cusum_h": "often"})
    assert main(["config", "check", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "thresholds.cusum_h:" in err and "'auto'" in err and "often" in err
    assert "constrained" not in err and "more]" not in err


def test_monitor_plan_reports_the_h_an_auto_config_will_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], shipped_catalog: Catalog) -> None:
    import json

    from monitor.cli import main

    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}],
                       sampling={"triplets_per_run": 40}, topup={"enabled": False},
                       thresholds={"cusum_h": "auto", "false_alarms_per_100": 0.5})
    argv = ["plan", "--config", str(cfg), "--sd", "0.95", "--baseline-triplets", "2000"]
    assert main([*argv, "--json"]) == 0
    (p,) = json.loads(capsys.readouterr().out)["plans"]
    cells = cell_shares(shipped_catalog, SCENARIOS, LANGS)
    want = baseline_h(cells, 0.95, 40, 2000, fa_target=0.5, **KW)
    now = p["current"]
    assert now["h"] == want.h and now["h_from"].startswith("thresholds.cusum_h auto: h ")
    # The plan's target defaults to the config's, and the h in use meets it.
    assert p["false_alarms_per_100_target"] == 0.5
    assert now["false_alarms_per_100"] <= 0.5
    assert main(argv) == 0
    assert f"now: 40 triplets/run, h = {want.h:g}" in capsys.readouterr().out


def test_a_union_keys_tags_go_but_a_dict_keys_name_stays(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    # Only a union's member tags leave the path: a header name is a key the user wrote.
    from monitor.cli import main

    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo",
                                   "headers_env": {"X-Team-Key": [1, 2]}}])
    assert main(["config", "check", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert "endpoints.0.headers_env.X-Team-Key: Input should be a valid string" in err
