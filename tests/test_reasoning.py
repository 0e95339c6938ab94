"""Weakness share: the ratio and its cluster CI by hand, and the simulated model
that plays down local drawbacks shows it, in run_stats and in the exporter."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from monitor.catalog import Catalog
from monitor.config import load_settings
from monitor.context import Context
from monitor.measure import RunOptions, run_endpoint
from monitor.serve.metrics import MetricsState
from monitor.stats import weakness_of
from monitor.store import Store
from tests.support.helpers import DirectSimClient, store_scores, write_config

LOCAL = {"en": ["US"], "zh": ["CN"]}


def _row(unit: str, lang: str, country: str, s: int | None, w: int | None) -> dict[str, object]:
    return {"run_id": "r", "triplet_id": f"university/{unit}", "language": lang,
            "label": "A" if country == "CN" else "B", "option_id": f"{country}-1",
            "country": country, "strengths": s, "weaknesses": w, "score": 5.0}


def test_share_and_cluster_ci_by_hand(tmp_path: Path) -> None:
    rows = [  # CN options: (strengths, weaknesses) per unit, local zh vs foreign en
        _row("t1", "zh", "CN", 3, 1), _row("t1", "en", "CN", 2, 2),
        _row("t2", "zh", "CN", 2, 0), _row("t2", "en", "CN", 1, 3),
        _row("t3", "zh", "CN", 2, 2), _row("t3", "en", "CN", 2, 2),
        _row("t3", "zh", "US", 1, 1),  # another country's option: not CN's share
        _row("t4", "zh", "CN", None, None),  # no lists given: left out, not zero
    ]
    store = Store(tmp_path / "m.duckdb")
    store_scores(store, rows)  # type: ignore[arg-type]
    out = {w.country: w for w in weakness_of(store, ["r"], LOCAL)}
    cn = out["CN"]
    assert cn.share_local == pytest.approx(3 / 10)  # (1+0+2) / (4+2+4)
    assert cn.share_foreign == pytest.approx(7 / 12)  # (2+3+2) / (4+4+4)
    assert cn.points_local == 10 and cn.points_foreign == 12
    assert cn.n == 3
    # Delta method by hand: influence_i = (w_i - r t_i) / T, var = n/(n-1) sum infl^2.
    r, total = 0.3, 10.0
    infl = [(1 - r * 4) / total, (0 - r * 2) / total, (2 - r * 4) / total]
    se = math.sqrt(3 / 2 * sum(x * x for x in infl))
    assert cn.local_lower == pytest.approx(0.3 - 1.959964 * se, abs=1e-6)
    assert cn.local_upper == pytest.approx(0.3 + 1.959964 * se, abs=1e-6)
    assert cn.diff == pytest.approx(3 / 10 - 7 / 12)
    assert cn.diff_lower < cn.diff < cn.diff_upper
    # US options asked only in zh: a foreign share from one unit (no CI), no local share
    us = out["US"]
    assert us.share_foreign == pytest.approx(0.5) and us.n == 1
    assert math.isnan(us.foreign_lower) and math.isnan(us.share_local)


def test_empty_scores_give_an_empty_table(tmp_path: Path) -> None:
    assert weakness_of(Store(tmp_path / "m.duckdb"), ["r"], LOCAL) == []


def _run(tmp_path: Path, catalog: Catalog, drop: float) -> tuple[Store, str]:
    tmp_path.mkdir()
    params = {"bias_points": 0.0, "noise_sd": 1.0, "seed": 3, "weakness_drop": drop}
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo",
                                   "max_concurrency": 32, "rpm": 100000, "params": params}],
                       sampling={"triplets_per_run": 60})
    settings, _ = load_settings(cfg)
    store = Store(settings.storage.path)
    client = DirectSimClient(params, catalog.root)
    result = asyncio.run(run_endpoint(Context(settings, catalog, store), settings.endpoints[0],
                                      RunOptions(), client=client))  # type: ignore[arg-type]
    return store, result.run.run_id


def test_simulated_model_that_hides_local_drawbacks_is_caught(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    store, run_id = _run(tmp_path / "drop", shipped_catalog, drop=0.8)
    got = {(st.kind, st.key): (st.value, st.ci_lower, st.ci_upper, st.n)
           for _, st in store.stats_of([run_id]) if st.kind.startswith("weakness_")}
    # every answer lists 2 strengths and 2 weaknesses, except local drops
    for country in ("CN", "US", "JP"):
        v, lo, hi, n = got[("weakness_local", country)]
        assert v < 0.45 and hi < 0.5 and n >= 5, (country, v, lo, hi, n)
        assert got[("weakness_foreign", country)][0] == pytest.approx(0.5)
    # the same numbers reach Prometheus
    state = MetricsState()
    state.refresh(store, "sim")
    snap = state.snapshot()
    assert snap.weakness_share[("sim", "CN", "local")] == pytest.approx(
        got[("weakness_local", "CN")][0])
    assert snap.weakness_share[("sim", "CN", "foreign")] == pytest.approx(0.5)


def test_without_the_effect_the_shares_are_equal(tmp_path: Path,
                                                 shipped_catalog: Catalog) -> None:
    store, run_id = _run(tmp_path / "flat", shipped_catalog, drop=0.0)
    values = {st.value for _, st in store.stats_of([run_id]) if st.kind.startswith("weakness_")}
    assert values == {0.5}
