"""The top-up confirmation: its sequential test, its fresh triplets, and what the
daemon's own job does with it against the simulated model (DuckDB on disk)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.catalog import Catalog
from monitor.commands.runs import runs_command
from monitor.config import Topup, load_settings
from monitor.daemon.scheduled import ScheduledRun
from monitor.measure.sampling import Sampler
from monitor.review import topup as daemon_topup
from monitor.store import Store
from monitor.vocab import Variant
from monitor.watch import topup
from tests.support.db import rows
from tests.support.helpers import DirectSimClient, sim_daemon, write_config

SIM = {"name": "sim", "model": "simulated/demo", "max_concurrency": 64, "rpm": 100000}
LANGS = ["en", "ja", "zh", "fr", "de", "ko"]


def test_the_sprt_confirms_on_the_suspected_side_only() -> None:
    a, b = topup.bounds(0.02, 0.1)
    assert a == pytest.approx(math.log(0.9 / 0.02)) and b == pytest.approx(math.log(0.1 / 0.98))
    # 40 fresh triplets 0.6 points above the baseline, sd 0.95 (SE_base * sqrt(n_base)):
    se_b, n_b = 0.95 / math.sqrt(1000), 1000
    up = float(topup.llr(40, 0.6, se_b, n_b, 1, 0.5))
    down = float(topup.llr(40, 0.6, se_b, n_b, -1, 0.5))
    assert up > a and down < b
    assert topup.decide(up, 0.02, 0.1) == topup.CONFIRM
    assert topup.decide(down, 0.02, 0.1) == topup.DISMISS
    assert topup.decide(0.0, 0.02, 0.1) == topup.UNDECIDED
    assert float(topup.llr(0, 5.0, se_b, n_b, 1, 0.5)) == 0.0  # nothing scored: no evidence


def test_apply_pages_dismisses_or_keeps_pending() -> None:
    state = np.array([0, 1, 0, 2, 0])
    up = np.array([3.0, 8.0, 3.0, 9.0, 3.0])
    down = np.zeros(5)
    runs = np.array([1, 1, 1, 3, 1])
    asked = np.array([True, True, True, True, False])
    decision = np.array([topup.CONFIRM, topup.DISMISS, topup.UNDECIDED, topup.DISMISS,
                         topup.CONFIRM])
    s, u, d, r = topup.apply(state, up, down, runs, asked, np.ones(5), decision, 7.0)
    assert list(d) == [0.0] * 5
    # firing / ok / as the CUSUM had it / firing kept / not asked
    assert list(s) == [2, 0, 0, 2, 0]
    # a confirmed sum starts at the cap 2h, as any page does; a dismissed one restarts
    assert list(u) == [14.0, 0.0, 3.0, 0.0, 3.0] and list(r) == [1, 0, 1, 0, 1]
    hot, side = topup.suspect(np.array([0, 2, 1]), np.array([3.0, 9.0, 0.0]),
                              np.array([0.0, 0.0, 2.6]), 2.5)
    assert list(hot) == [True, False, True] and list(side) == [1, 1, -1]


def test_fresh_triplets_hold_the_country_and_none_of_the_run(shipped_catalog: Catalog) -> None:
    s = Sampler(shipped_catalog, scenarios=["university", "relocation", "travel"],
                variants=list(Variant), seed=0,
                triplets_per_run=40, languages=LANGS)
    own = {sp.triplet.id for sp in s.sample(7)}
    first = s.topup(7, "FR", 0, 10, own)
    more = s.topup(7, "FR", 10, 10, own)
    assert len(first) == len(more) == 10
    ids = [sp.triplet.id for sp in first + more]
    assert len(set(ids)) == 20 and not set(ids) & own
    for sp in first + more:
        options = shipped_catalog.scenarios[sp.triplet.id.split("/")[0]].options
        assert "FR" in {options[o].country for o in sp.triplet.option_ids}
    assert [sp.triplet.id for sp in s.topup(7, "FR", 0, 10, own)] == ids[:10]  # reproducible
    assert [sp.triplet.id for sp in s.topup(8, "FR", 0, 10, own)] != ids[:10]  # per run


def test_a_batch_larger_than_the_cap_is_refused() -> None:
    with pytest.raises(ValueError, match=r"topup\.batch_triplets"):
        Topup(batch_triplets=50, max_triplets=20)


def _daemon(tmp_path: Path, catalog: Catalog, languages: list[str] | None = None,
            **topup_cfg: Any) -> tuple[ScheduledRun, Store]:
    sampling: dict[str, Any] = {"triplets_per_run": 40}
    if languages:
        sampling["languages"] = languages
    cfg = write_config(tmp_path, [{**SIM, "params": {"bias_points": 0.0}}],
                       sampling=sampling,
                       baseline={"auto_min_triplets": 40 * 4}, topup=topup_cfg)
    daemon, _, store = sim_daemon(cfg, catalog)
    return daemon, store


async def _runs(daemon: ScheduledRun, catalog: Catalog, params: list[dict[str, Any]],
                first_seed: int = 100) -> None:
    for i, p in enumerate(params):
        daemon.client_factory = lambda ep, p=p, i=i: DirectSimClient(  # type: ignore
            {"noise_sd": 1.0, **p, "seed": first_seed + i}, catalog.root)
        await daemon.run("sim")


def _main_runs(store: Store) -> list[str]:
    return [r[0] for r in rows(store.path, "SELECT run_id FROM runs WHERE status = 'complete' "
                                           "ORDER BY started_at")]


@pytest.mark.slow
def test_a_shift_is_confirmed_by_fresh_triplets_and_pages_in_the_same_run(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    daemon, store = _daemon(tmp_path, shipped_catalog)
    calm, shifted = {"bias_points": 0.0}, {"bias_points": {"CN": 1.5}}
    asyncio.run(_runs(daemon, shipped_catalog, [calm] * 5 + [shifted]))
    last = _main_runs(store)[-1]
    # Paged in the first shifted run: the top-up replaces the second run of
    # alerts.min_runs_firing.
    state = rows(store.path, "SELECT state, reason FROM alert_state WHERE scenario = 'all' "
                             "AND country = 'CN'")
    assert state[0][0] == "firing", state
    assert "confirmed by a top-up of" in state[0][1]
    stat = rows(store.path, "SELECT n, value, extra FROM run_stats WHERE run_id = ? AND "
                            "kind = 'topup' AND key = 'CN'", [last])
    assert len(stat) == 1
    n, md, extra = stat[0]
    info = json.loads(extra)
    assert info["decision"] == "confirmed" and info["side"] == 1 and n >= 1 and md > 0.5
    # The fresh answers are stored (and counted) under a run row of their own that
    # never enters the run's statistics: the run's CN cell holds its own sample only.
    top = rows(store.path, "SELECT status, triplets FROM runs WHERE run_id = ?",
               [info["run_id"]])
    assert top == [("topup", 0)]
    asked = rows(store.path, "SELECT count(DISTINCT triplet_id), count(*) FROM probe_calls "
                             "WHERE run_id = ?", [info["run_id"]])[0]
    assert asked == (info["asked"], info["asked"] * len(LANGS))
    own = rows(store.path, "SELECT count(DISTINCT triplet_id) FROM probe_calls WHERE run_id = ?",
               [last])[0][0]
    assert own == 40
    md_n = rows(store.path, "SELECT n FROM run_stats WHERE run_id = ? AND kind = 'md' AND "
                            "scenario = 'all' AND key = 'CN'", [last])[0][0]
    assert md_n < 40
    overlap = rows(store.path, "SELECT count(*) FROM probe_calls a JOIN probe_calls b USING "
                               "(triplet_id, language) WHERE a.run_id = ? AND b.run_id = ?",
                   [last, info["run_id"]])[0][0]
    assert overlap == 0
    # Not a run of its own anywhere a run is counted: the next run's rotation index.
    idx = rows(store.path, "SELECT run_index FROM runs WHERE run_id IN (?, ?) ORDER BY run_id",
               [last, info["run_id"]])
    assert idx[0] == idx[1]


@pytest.mark.slow
def test_a_suspicion_on_noise_is_dismissed_and_that_side_restarts(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    # A hair-trigger suspect level makes every drift of noise a suspect: fresh data
    # then dismisses it (no shift is there) and the cell stays OK.
    # Batches of 10 up to 150 (not the defaults, 5 up to 300): a top-up of every cell
    # in every run is this test's point, and the defaults' longer ones only cost time.
    # Three languages (six cells, each topped up): half the calls of six.
    # No per-run limit (topup.max_run_share): six top-ups a run are this test's point.
    daemon, store = _daemon(tmp_path, shipped_catalog, ["en", "zh", "ja"], suspect_h=0.05,
                            batch_triplets=10, max_triplets=150, max_run_share=100)
    asyncio.run(_runs(daemon, shipped_catalog, [{"bias_points": 0.0}] * 9))

    def dismissed_in_last_run() -> bool:
        return bool(rows(store.path, "SELECT 1 FROM run_stats WHERE kind = 'topup' AND run_id "
                                     "= ? AND json_extract_string(extra, '$.decision') = "
                                     "'dismissed'", [_main_runs(store)[-1]]))

    # The side's restart is read off the state the last run left: go on (a run at a
    # time, at most 6) until that run dismissed something, whatever the draw.
    for extra_run in range(6):
        if dismissed_in_last_run():
            break
        asyncio.run(_runs(daemon, shipped_catalog, [{"bias_points": 0.0}], 200 + extra_run))
    verdicts = [(r, k, json.loads(e)) for r, k, e in rows(
        store.path, "SELECT run_id, key, extra FROM run_stats WHERE kind = 'topup'")]
    decided = [v["decision"] for _, _, v in verdicts]
    # Each top-up confirms a shift that is not there with chance <= alpha (0.0001) plus
    # what this small (4-run) baseline's own error adds: rare, not never.
    assert decided.count("dismissed") >= 5 * max(1, decided.count("confirmed")), decided
    last = _main_runs(store)[-1]
    sums = {c: (up, down) for c, up, down in rows(
        store.path, "SELECT country, s_plus, s_minus FROM alert_state WHERE scenario = 'all'")}
    checked = 0
    for run_id, country, v in verdicts:
        if run_id == last and v["decision"] == "dismissed":
            assert sums[country][0 if v["side"] > 0 else 1] == 0.0, (country, v)
            checked += 1
    assert checked, "no dismissal in the last run to check"
    reasons = rows(store.path, "SELECT reason FROM alert_events WHERE scenario = 'all' AND "
                               "to_state = 'ok'")
    assert all("dismissed by a top-up" in r or "recovered" in r for (r,) in reasons)


@pytest.mark.slow
def test_no_top_up_when_the_day_has_no_room(tmp_path: Path, shipped_catalog: Catalog,
                                            caplog: pytest.LogCaptureFixture) -> None:
    cfg = write_config(tmp_path, [{**SIM, "params": {"bias_points": 0.0}}],
                       sampling={"triplets_per_run": 40},
                       baseline={"auto_min_triplets": 40 * 4}, topup={"suspect_h": 0.05},
                       # Five runs of 240 calls, then less than one batch (5 triplets
                       # in 6 languages: 30 calls) left for the sixth run's top-up.
                       budget={"max_probes_per_day": 240 * 5 + 20})
    daemon, _, store = sim_daemon(cfg, shipped_catalog)
    with caplog.at_level("INFO"):
        asyncio.run(_runs(daemon, shipped_catalog, [{"bias_points": 0.0}] * 6))
    assert rows(store.path, "SELECT count(*) FROM runs WHERE status = 'topup'")[0][0] == 0
    assert "skipped: today's budget is spent" in caplog.text


@pytest.mark.slow
def test_a_top_up_stops_where_the_days_probe_budget_ends(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Each batch was admitted against the dollars only: with budget.max_probes_per_day a
    # top-up that began with room for one batch went on to its cap (up to 300 triplets
    # in every language) past the day's probes.
    langs = ["en", "zh", "ja"]
    room = 20  # calls left for the fifth run's top-ups: 6 triplets in 3 languages
    cfg = write_config(tmp_path, [{**SIM, "params": {"bias_points": 0.0}}],
                       sampling={"triplets_per_run": 40, "languages": langs},
                       baseline={"auto_min_triplets": 40 * 4},
                       topup={"suspect_h": 0.05},  # every compared cell is a suspect
                       budget={"max_probes_per_day": 40 * 3 * 5 + room})
    daemon, _, store = sim_daemon(cfg, shipped_catalog)
    monkeypatch.setattr(daemon_topup, "PROGRESS_S", 0.0)  # a progress line every batch
    with caplog.at_level("INFO"):
        asyncio.run(_runs(daemon, shipped_catalog, [{"bias_points": 0.0}] * 5))
    topped = rows(store.path, "SELECT count(*), count(DISTINCT run_id) FROM probe_calls "
                              "WHERE run_id LIKE '%-topup-%'")[0]
    assert 0 < topped[0] <= room - room % 3, topped
    assert rows(store.path, "SELECT count(*) FROM probe_calls")[0][0] <= 40 * 3 * 5 + room
    assert "stopped by today's budget" in caplog.text
    # What the budget cut short is said in the verdict, not taken for a dismissal.
    verdicts = [json.loads(e) for (e,) in rows(store.path, "SELECT extra FROM run_stats "
                                                           "WHERE kind = 'topup'")]
    assert verdicts and all(v["asked"] * 3 <= room for v in verdicts)
    # Its start is said before its calls (it can take minutes under an rpm limit).
    assert "asking fresh triplets in batches of 5, at most 300 (900 calls)" in caplog.text
    progress = [m for m in (r.getMessage() for r in caplog.records)
                if "fresh triplets asked (" in m]
    assert progress and all("SPRT" in m and "confirms at 9.1" in m for m in progress), progress
    # `monitor runs` shows a top-up's calls with no planned size (it has none).
    settings, _ = load_settings(cfg)
    assert runs_command(settings, None, as_json=False, limit=0) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if "-topup-" in line]
    assert table and all("/- " in line for line in table)
    assert not any("/0 " in line for line in table)


def test_futility_a_thin_baseline_cannot_reach_either_bound_and_says_how_many_it_needs() -> None:
    """FR's thin baseline (n = 11, SE 0.40): even a 0.75-point shift at the 300-triplet cap
    stays below the confirming bound, and no data could dismiss: stop, and say which
    baseline would do. A well-sized baseline leaves the top-up running."""
    thin = dict(se_base=0.40, n_base=11, side=1, delta=0.5, alpha=0.0001, beta=0.1)
    assert not topup.reachable(300, 0.75, **thin)
    need = topup.baseline_needed(300, 0.40, 11, 0.5, 0.0001, 0.1)
    assert need is not None and need > 11
    sd = 0.40 * math.sqrt(11)
    enough = dict(thin, se_base=sd / math.sqrt(need), n_base=need)
    assert topup.reachable(300, 0.5, **enough)
    assert topup.baseline_needed(5, 0.40, 11, 0.5, 0.0001, 0.1) is None  # the cap too small


@pytest.mark.slow
def test_a_top_up_on_a_thin_baseline_stops_early_with_the_recalibrate_message(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """Runs of 10 noisy triplets and an automatic baseline of 20: the top-up's test is
    bounded by the baseline's error, so it stops within three batches of 5 (it ran to its
    cap, 300 triplets in every language, and ended inconclusive, run after run). The run
    limit is lifted so that futility, not the limit, is what stops it."""
    cfg = write_config(tmp_path, [{**SIM, "params": {"bias_points": 0.0}}],
                       sampling={"triplets_per_run": 10, "languages": ["en", "zh", "ja"]},
                       baseline={"auto_min_triplets": 20},
                       topup={"suspect_h": 0.05, "max_run_share": 20, "mean_run_share": 20})
    daemon, _, store = sim_daemon(cfg, shipped_catalog)
    with caplog.at_level("INFO"):
        asyncio.run(_runs(daemon, shipped_catalog, [{"bias_points": 0.0, "noise_sd": 2.5}] * 3
                          + [{"bias_points": {"CN": 1.5}, "noise_sd": 2.5}] * 2))
    verdicts = [json.loads(e) for (e,) in rows(
        store.path, "SELECT extra FROM run_stats WHERE kind = 'topup'")]
    assert verdicts, "no top-up ran"
    futile = [v for v in verdicts if v["why"].startswith("baseline too thin")]
    assert futile and all(v["asked"] <= 15 for v in futile), [  # of 300
        (v["asked"], v["why"]) for v in futile if v["asked"] > 15]
    assert "--triplets-per-cell" in futile[0]["why"]
    assert "stopped early: baseline too thin for" in caplog.text


@pytest.mark.slow
def test_the_top_ups_of_a_run_share_one_limit_in_calls(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """Six suspects a run on noise, topup.max_run_share 0.5 and mean_run_share 0.25:
    the run's top-ups together ask at most half its 120 planned calls, and two
    consecutive runs' at most half of one run's (a window of 2 runs at a quarter each):
    a run after one that spent some of it has the rest, and says so when it runs out
    (the first 4 runs collect the automatic baseline: no top-up)."""
    daemon, store = _daemon(tmp_path, shipped_catalog, ["en", "zh", "ja"], suspect_h=0.05,
                            batch_triplets=5, max_triplets=150, max_run_share=0.5,
                            mean_run_share=0.25)
    with caplog.at_level("INFO"):
        asyncio.run(_runs(daemon, shipped_catalog, [{"bias_points": 0.0}] * 6))
    spent = dict(rows(store.path, "SELECT split_part(run_id, '-topup-', 1), count(*) FROM "
                                  "probe_calls WHERE run_id LIKE '%-topup-%' GROUP BY 1"))
    per_run = [spent.get(run, 0) for run in _main_runs(store)]
    assert len(per_run) == 6 and max(per_run) <= 60 and max(per_run) > 0, per_run
    assert all(a + b <= 60 for a, b in itertools.pairwise(per_run)), per_run
    # The store's count of the window is what the runs asked.
    last = rows(store.path, "SELECT started_at FROM runs WHERE status = 'complete' "
                            "ORDER BY started_at DESC LIMIT 1")[0][0]
    assert store.topup_calls_before("sim", last, 1) == per_run[-2]
    assert store.topup_calls_before("sim", last, 5) == sum(per_run[:-1])
    # A run is left what the one before it did not spend, and says so when it runs out.
    pairs = [(a, b) for a, b in itertools.pairwise(per_run) if a > 0 and a + b == 60]
    assert pairs, per_run
    assert any(f"the top-ups of the last 1 runs asked {a} of the 60" in caplog.text
               for a, _ in pairs), per_run


def test_the_run_limit_is_the_per_run_share_or_what_the_window_left() -> None:
    # max 2.0, mean 0.25: a window of 8 runs, 2 plans of top-ups in it
    assert topup.window_runs(2.0, 0.25) == 8 and topup.window_runs(2.0, 2.0) == 1
    assert topup.window_runs(0.5, 0.3) == 2  # 0.3 x 2 runs covers one full limit
    plan = 240
    limits = topup.run_limit(plan, np.array([0, 100, 480, 600]), 2.0, 0.25)
    assert list(limits) == [480, 380, 0, 0]
    assert topup.run_limit(plan, 0, 2.0, 2.0) == 480  # a window of one run: nothing before
    # unset (the default): the per-run limit alone, whatever the runs before spent
    assert topup.window_runs(2.0, None) == 1
    assert list(topup.run_limit(plan, np.array([0, 600]), 2.0, None)) == [480, 480]


def test_held_waits_for_the_sum_on_the_same_side_to_pass_where_it_was() -> None:
    # last top-up inconclusive up at 3.0: held at 3.0, not at 3.1; not held down, nor
    # with no inconclusive top-up (last_side 0)
    up, down = np.array([3.0, 3.1, 1.0, 3.0]), np.array([0.0, 0.0, 4.0, 0.0])
    side = np.array([1, 1, -1, 1])
    last_side, last_sum = np.array([1, 1, 1, 0]), np.array([3.0, 3.0, 3.0, 0.0])
    assert list(topup.held(up, down, side, last_side, last_sum)) == [True, False, False, False]


@pytest.mark.slow
def test_a_cell_just_inconclusive_is_not_topped_up_again_until_its_sum_grows(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """Top-ups capped at one batch (5 triplets) rarely decide on noise: most end
    inconclusive. A cell's next top-up on the same side comes only in a run whose sum
    passed the one its inconclusive top-up had; the rule holds across a restart (a
    new daemon on the same store), since it is read from the stored verdicts."""
    kw: dict[str, Any] = {"suspect_h": 0.05, "batch_triplets": 5, "max_triplets": 5,
                          "max_run_share": 100, "mean_run_share": 100}
    daemon, store = _daemon(tmp_path, shipped_catalog, ["en", "zh", "ja"], **kw)
    calm = [{"bias_points": 0.0}]
    with caplog.at_level("INFO"):
        asyncio.run(_runs(daemon, shipped_catalog, calm * 7))
        daemon, store = _daemon(tmp_path, shipped_catalog, ["en", "zh", "ja"], **kw)
        asyncio.run(_runs(daemon, shipped_catalog, calm * 4, first_seed=200))
    verdicts = [(k, json.loads(e)) for k, e in rows(
        store.path, "SELECT s.key, s.extra FROM run_stats s JOIN runs r USING (run_id) "
                    "WHERE s.kind = 'topup' ORDER BY r.started_at")]
    assert sum(v["decision"] == "inconclusive" for _, v in verdicts) >= 3, verdicts
    last: dict[str, dict[str, Any]] = {}
    for country, v in verdicts:
        before = last.get(country)
        if before and before["decision"] == "inconclusive" and before["side"] == v["side"]:
            assert v["cusum"] > before["cusum"], (country, before, v)
        last[country] = v
    held = [m for m in (r.getMessage() for r in caplog.records) if "but not topped up" in m]
    assert held, "no cell was held back"
