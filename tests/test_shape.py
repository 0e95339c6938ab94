"""The JSD shape check against the baseline, once per rotation cycle: the change with
its MOVER interval, the flag at thresholds.jsd_excess_bits, and the daemon doing it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import VARIANTS, Catalog
from monitor.measure.sampling import Sampler
from monitor.stats import JSDRow
from monitor.watch.shape import compare, due
from tests.support.helpers import DirectSimClient, metrics_of, sim_daemon, write_config

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
SCEN = ["relocation", "travel", "university"]


def _row(lang: str, value: float, lo: float, hi: float, n: int = 100,
         scenario: str = "all") -> JSDRow:
    return JSDRow(scenario=scenario, language=lang, jsd_bits=value, ci_lower=lo, ci_upper=hi,
                  p_value=0.01, n=n, plugin_bits=value, js_distance_bits=value ** 0.5,
                  js_distance_nat=0.0)


def test_the_change_lies_inside_its_interval_and_is_flagged_only_beyond_the_threshold(
        ) -> None:
    base = [_row("ja", 0.010, 0.002, 0.020), _row("zh", 0.010, 0.002, 0.020),
            _row("ko", 0.010, 0.002, 0.020, n=4), _row("overall", 0.010, 0.005, 0.015),
            _row("ja", 0.5, 0.4, 0.6, scenario="travel")]
    cycle = [_row("ja", 0.080, 0.060, 0.100), _row("zh", 0.030, 0.015, 0.045),
             _row("ko", 0.200, 0.150, 0.250), _row("overall", 0.100, 0.090, 0.110),
             _row("fr", 0.3, 0.2, 0.4)]
    out = {r.language: r for r in compare(cycle, base, 0.02)}
    assert set(out) == {"ja", "zh", "ko", "overall"}  # fr has no baseline; travel not pooled
    for r in out.values():
        assert r.ci_lower <= r.change_bits <= r.ci_upper
    ja = out["ja"]
    assert ja.change_bits == pytest.approx(0.07)
    # MOVER: 0.07 - hypot(0.080 - 0.060, 0.020 - 0.010), 0.07 + hypot(0.020, 0.008)
    assert ja.ci_lower == pytest.approx(0.07 - (0.02**2 + 0.01**2) ** 0.5)
    assert ja.ci_upper == pytest.approx(0.07 + (0.02**2 + 0.008**2) ** 0.5)
    assert ja.changed  # the whole interval above +0.02
    assert not out["zh"].changed  # a change of 0.02 whose interval reaches below it
    assert not out["ko"].changed  # the baseline holds 4 units: too thin to say
    assert not out["overall"].changed  # the mean over languages is shown, never flagged
    down = compare([_row("ja", 0.0, 0.0, 0.004)], [_row("ja", 0.1, 0.08, 0.12)], 0.02)
    assert down[0].changed and down[0].ci_upper < -0.02


def test_a_cycle_is_every_monitored_triplet_once(shipped_catalog: Catalog) -> None:
    def cycle(n: int) -> int:
        return Sampler(shipped_catalog, scenarios=SCEN, variants=list(VARIANTS), seed=0,
                       triplets_per_run=n, languages=LANGS).runs_per_cycle

    assert cycle(40) == 47 and cycle(2000) == 1  # 1,870 monitored triplets
    assert [k for k in range(1, 10) if due(k, 3)] == [3, 6, 9] and not due(0, 3)


SIM = {"name": "sim", "model": "simulated/demo", "max_concurrency": 64, "rpm": 100000}


async def _runs(daemon: Any, catalog: Catalog, shifts: list[dict[str, float]]) -> None:
    for i, shift in enumerate(shifts):
        daemon.client_factory = lambda ep, s=shift, i=i: DirectSimClient(  # type: ignore
            {"bias_points": 0.0, "noise_sd": 1.0, "language_shift": s, "seed": 200 + i},
            catalog.root)
        await daemon.run("sim")


@pytest.mark.parametrize("shift", [{}, {"ja": 1.0}])
def test_the_daemon_compares_each_cycle_with_the_baseline(
        tmp_path: Path, shipped_catalog: Catalog, shift: dict[str, float]) -> None:
    langs = ["en", "ja", "zh", "fr"]
    cfg = write_config(tmp_path, [{**SIM, "params": {"bias_points": 0.0}}],
                       sampling={"triplets_per_run": 150, "languages": langs,
                                 "scenarios": ["university"]},
                       baseline={"auto_min_triplets": 300},
                       # The shape check alone: ja's shift would top up its cells to the
                       # run's limit each run (twice the test's CPU; tests/test_topup.py).
                       topup={"enabled": False})
    daemon, _, store = sim_daemon(cfg, shipped_catalog)
    cycle = Sampler(shipped_catalog, scenarios=["university"], variants=list(VARIANTS),
                    seed=0, triplets_per_run=150, languages=langs).runs_per_cycle
    assert 2 <= cycle <= 4, cycle  # the test's size: a few runs per cycle
    asyncio.run(_runs(daemon, shipped_catalog, [{}, {}] + [shift] * cycle))
    # (a top-up's fresh triplets are a run row of their own, status "topup")
    runs = [r for r in store.runs("sim") if r.status != "topup"]
    base = store.baseline("sim")
    assert base is not None and len(base.run_ids) == 2
    # Only the run that closes the cycle holds the comparison.
    held = {rid for rid, _ in store.stats_of([r.run_id for r in runs], "jsd_shift")}
    assert held == {runs[-1].run_id}
    rows = {st.key: st for _, st in store.stats_of([runs[-1].run_id], "jsd_shift")}
    assert set(rows) == {*langs, "overall"}
    for st in rows.values():
        assert st.ci_lower <= st.value <= st.ci_upper
        extra = json.loads(st.extra)
        assert extra["cycle_runs"] == cycle and extra["threshold_bits"] == 0.02
    flagged = {k for k, st in rows.items() if json.loads(st.extra)["changed"]}
    if not shift:
        assert flagged == set()
    else:
        # JSD_l is measured against all languages pooled, which a lenient ja moves too:
        # ja is flagged and its change dwarfs every other language's.
        assert "ja" in flagged
        assert all(rows["ja"].value > 3 * abs(st.value) for k, st in rows.items()
                   if k not in ("ja", "overall"))
    snap = metrics_of(store, "sim")
    assert snap.jsd_shift[("sim", "ja")] == pytest.approx(
        (rows["ja"].value, rows["ja"].ci_lower, rows["ja"].ci_upper))
    assert snap.jsd_changed[("sim", "ja")] == int(bool(shift))
