"""`monitor compare`: a known bias in one country is a regression and the others are not;
identical endpoints pass; an interrupted comparison resumes to the verdicts an
uninterrupted one reaches; against a stored baseline the candidate is asked the
baseline's own triplets; missing answers, the cap and the budget.

One real process (the CLI against two local OpenAI-protocol servers, stopped by
SIGTERM and resumed); the rest in-process with the simulated model answering directly.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog, load_catalog
from monitor.cli import main
from monitor.commands.compare import exit_code
from monitor.compare import Budgets, CompareOptions, Result, prepare, run_comparison
from monitor.config import load_settings
from monitor.context import Context
from monitor.errors import EXIT_BREACH, EXIT_INCONCLUSIVE, EXIT_OK, UsageError
from monitor.measure.budget import Allowance
from monitor.measure.run import run_endpoint
from monitor.measure.start import RunOptions
from monitor.store import Store
from monitor.vocab import Arm, Change, Outcome, RunStatus
from tests.support.biased import BiasedModel
from tests.support.helpers import DirectSimClient, openai_endpoint, write_config
from tests.support.openai import serve
from tests.support.process import Gate, wait_until

LANGS = ["en", "zh", "fr"]  # six countries (US GB CA AU CN FR): small, quick comparisons
BIAS = {"US": 0.3, "GB": 0.3, "CA": 0.3, "AU": 0.3, "CN": 0.3, "FR": 0.3}


def _sim(name: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "model": "simulated/demo", "rpm": 100000, "max_concurrency": 16,
            "params": {"noise_sd": 0.8, "bias_points": BIAS, **params}}


def _ctx(tmp_path: Path, endpoints: list[dict[str, Any]], **sections: Any
         ) -> Context[Store]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings, _ = load_settings(write_config(tmp_path, endpoints, **sections))
    return Context(settings, load_catalog(), Store(settings.storage.path))


def _budgets(ctx: Context[Store], p: Any, clients: dict[Arm, Any] | None = None) -> Budgets:
    clients = clients or {s.arm: DirectSimClient(dict(s.endpoint.params), ctx.catalog.root)
                          for s in p.sides}
    return Budgets(clients=clients, allowances={
        s.arm: Allowance.today(ctx.settings.budget, ctx.store, s.endpoint.name,
                               datetime.now(UTC)) for s in p.sides})


def _compare(ctx: Context[Store], **opts: Any) -> Result:
    p = prepare(ctx, CompareOptions(**{"languages": LANGS, **opts}))
    return asyncio.run(run_comparison(ctx, p, _budgets(ctx, p)))


def _verdicts(res: Result) -> dict[str, Change]:
    return {r.country: r.test.change for r in res.countries}


@pytest.mark.slow
def test_a_known_bias_is_a_regression_and_an_interrupted_comparison_resumes(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    """The real CLI between two local endpoints (OpenAI protocol) that differ by 2 points
    of bias for CN in Chinese: SIGTERM mid-way keeps the answers and says how to resume;
    the resumed comparison finds CN a regression (exit 1 with --fail-on-regression), no
    other country, and no call was asked twice."""
    prod, cand = BiasedModel(shipped_catalog), BiasedModel(shipped_catalog)
    cand.bias = {"CN": 2.0}
    gate = Gate(open_for=60, answer=prod)  # two batches of 10 triplets in 3 languages
    with serve(gate) as s_prod, serve(cand) as s_cand:
        # A held call must not time out (and be asked again) however slow the machine.
        cfg = write_config(tmp_path, [
            openai_endpoint(s_prod.api_base, name="prod", timeout_s=120),
            openai_endpoint(s_cand.api_base, name="staging")])
        args = [sys.executable, "-m", "monitor.cli", "compare", "--config", str(cfg),
                "--baseline", "prod", "--candidate", "staging", "--languages",
                ",".join(LANGS), "--fail-on-regression", "--json"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            wait_until(lambda: gate.seen > gate.open_for or proc.poll() is not None, 120)
            proc.send_signal(signal.SIGTERM)
            gate.released.set()
            _, err = proc.communicate(timeout=60)
        finally:
            gate.released.set()
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 143, err
        found = re.search(r"Resume with: (monitor compare --resume (\S+) --config \S+)", err)
        assert found, err
        done = subprocess.run([sys.executable, "-m", "monitor.cli", *found.group(1).split()[1:],
                               "--fail-on-regression", "--json"], capture_output=True,
                              text=True, timeout=300)
        asked = len(s_prod.requests) + len(s_cand.requests)
    assert done.returncode == EXIT_BREACH, done.stderr
    doc = json.loads(done.stdout)
    verdicts = {c["country"]: c["verdict"] for c in doc["countries"]}
    assert verdicts["CN"] == Change.REGRESSION
    assert all(v != Change.REGRESSION for c, v in verdicts.items() if c != "CN"), verdicts
    cn = next(c for c in doc["countries"] if c["country"] == "CN")
    assert cn["ci_lower"] > 0 and cn["n"] >= 10 and cn["did_verdict"] == "bias"
    assert (doc["outcome"], doc["exit_code"], doc["mode"]) == (Outcome.REGRESSION, 1, "live")
    # every call stored once: the servers saw exactly the calls the store holds, and
    # those the stop said it abandoned (still unanswered after DRAIN_S: asked again)
    late = re.search(r"abandoned after \S+ s: (\d+) calls still in flight", err)
    assert doc["calls"] == doc["triplets"] * len(LANGS) * 2
    assert asked == doc["calls"] + (int(late.group(1)) if late else 0), err


def test_identical_endpoints_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [_sim("prod"), _sim("twin")])
    out = tmp_path / "page"
    code = main(["compare", "--config", str(cfg), "--baseline", "prod", "--candidate", "twin",
                 "--languages", ",".join(LANGS), "--fail-on-regression", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == EXIT_OK, text
    assert "outcome: no regression" in text
    assert text.count("no change") == 6
    # the outputs for review: the page with its two figures, the PR comment, the JSON
    page = (out / "index.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64") == 2 and "data-verdict='no_change'" in page
    assert "**No regression**" in (out / "summary.md").read_text(encoding="utf-8")
    doc = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert doc["exit_code"] == 0 and len(doc["countries"]) == 6 and len(doc["jsd"]) == 4
    # read back, the same verdicts
    assert main(["compare", "--config", str(cfg), "--show", doc["compare_id"]]) == EXIT_OK
    assert capsys.readouterr().out.count("no change") == 6


def test_an_interrupted_comparison_resumes_to_the_same_verdicts(tmp_path: Path) -> None:
    eps = [_sim("prod", seed=1), _sim("staging", seed=2, bias_points={**BIAS, "FR": 1.5})]
    whole = _compare(_ctx(tmp_path / "a", eps), baseline="prod", candidate="staging")
    ctx = _ctx(tmp_path / "b", eps)
    p = prepare(ctx, CompareOptions(baseline="prod", candidate="staging", languages=LANGS))

    class Stopping(DirectSimClient):
        calls = 0

        async def complete(self, messages: list[dict[str, str]], **kw: Any) -> Any:
            Stopping.calls += 1
            if Stopping.calls == 100:  # mid-batch: as SIGTERM would cancel the comparison
                task.cancel()
            return await super().complete(messages, **kw)

    async def stopped() -> None:
        global task
        task = asyncio.ensure_future(run_comparison(ctx, p, _budgets(ctx, p, {
            s.arm: Stopping(dict(s.endpoint.params), ctx.catalog.root) for s in p.sides})))
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(stopped())
    c = ctx.store.get_comparison(p.comparison.compare_id)
    assert c is not None and c.status == RunStatus.INTERRUPTED
    # the rule recovery resumes runs by (monitor.watch.scope): not with another setup
    eps2 = [eps[0], {**eps[1], "system_prompt": "You are a brief assistant."}]
    (tmp_path / "c").mkdir()
    changed = Context(load_settings(write_config(tmp_path / "c", eps2))[0], ctx.catalog,
                      ctx.store)
    with pytest.raises(UsageError, match=r"endpoint staging: assistant setup changed .* since "
                                         r"it started; start a new comparison"):
        prepare(changed, CompareOptions(candidate="", resume=c.compare_id))
    again = prepare(ctx, CompareOptions(candidate="", resume=c.compare_id))
    res = asyncio.run(run_comparison(ctx, again, _budgets(ctx, again)))
    assert _verdicts(res) == _verdicts(whole) and _verdicts(res)["FR"] == Change.REGRESSION
    assert [r.test.calls for r in res.countries] == [r.test.calls for r in whole.countries]
    assert (res.triplets, res.pairs, res.calls) == (whole.triplets, whole.pairs, whole.calls)
    with pytest.raises(UsageError, match="is complete"):
        prepare(ctx, CompareOptions(candidate="", resume=c.compare_id))


task: asyncio.Future[Any]


def test_against_the_stored_baseline_the_candidate_is_asked_its_triplets(
        tmp_path: Path) -> None:
    eps = [_sim("prod", seed=1), _sim("staging", seed=2, bias_points={**BIAS, "CN": 2.5})]
    ctx = _ctx(tmp_path, eps)
    prod = ctx.settings.endpoint("prod")
    client = DirectSimClient(dict(prod.params), ctx.catalog.root)
    run = asyncio.run(run_endpoint(ctx, prod, RunOptions(triplets=120, languages=LANGS),
                                   client=client)).run
    ctx.store.set_baseline("prod", [run], auto=False)
    res = _compare(ctx, candidate="staging", baseline="prod", against_baseline=True)
    assert res.baseline_run is None and res.comparison.reference_run_ids == [run.run_id]
    assert _verdicts(res)["CN"] == Change.REGRESSION
    assert res.calls == res.triplets * len(LANGS)  # the candidate only: production not called
    asked = {(c.triplet_id, c.variant, c.option_order) for c in ctx.store.asked_specs(
        [res.candidate_run.run_id])}
    base = {(c.triplet_id, c.variant, c.option_order) for c in ctx.store.asked_specs(
        [run.run_id])}
    assert asked <= base and len(asked) == res.triplets
    # the one comparability rule (monitor.watch.scope): a language the baseline lacks
    with pytest.raises(UsageError, match=r"stored baseline of prod: .*not asked in de; "
                                         r"choose --languages among en,fr,zh"):
        prepare(ctx, CompareOptions(candidate="staging", baseline="prod",
                                    against_baseline=True, languages=[*LANGS, "de"]))


def test_missing_answers_leave_their_triplets_out_of_the_pairs(tmp_path: Path) -> None:
    """A candidate that refuses some calls: a triplet is a pair only where both sides
    answered every language, and coverage says what was lost."""
    eps = [_sim("prod", seed=1), _sim("staging", seed=2, refusal_rate=0.15)]
    res = _compare(_ctx(tmp_path, eps), baseline="prod", candidate="staging")
    assert 0 < res.pairs < res.triplets
    assert all(x.ratio < 1 for x in res.coverage[Arm.CANDIDATE])
    assert all(x.ratio == 1 for x in res.coverage[Arm.BASELINE])
    assert Change.REGRESSION not in _verdicts(res).values()


def test_the_cap_and_the_budget_leave_countries_inconclusive(tmp_path: Path) -> None:
    eps = [_sim("prod", seed=1, noise_sd=2.5), _sim("staging", seed=2, noise_sd=2.5)]
    res = _compare(_ctx(tmp_path / "cap", eps), baseline="prod", candidate="staging",
                   max_calls=120)
    assert res.comparison.reason == "--max-calls 120 reached" and res.calls == 120
    assert res.outcome == Outcome.INCONCLUSIVE
    assert exit_code(res, True) == EXIT_INCONCLUSIVE
    ctx = _ctx(tmp_path / "budget", eps, budget={"max_probes_per_day": 200})
    res = _compare(ctx, baseline="prod", candidate="staging")
    assert res.comparison.reason.startswith("today's budget is spent")
    assert res.calls <= 400 and Change.INCONCLUSIVE in _verdicts(res).values()


@pytest.mark.parametrize(("opts", "error"), [
    ({"candidate": "staging"}, "--baseline ENDPOINT"),
    ({"candidate": "staging", "against_baseline": True}, "has no stored baseline"),
    ({"candidate": "staging", "baseline": "prod", "margin": 0.0}, "--margin"),
    ({"candidate": "staging", "baseline": "prod", "max_calls": 50}, "less than one batch"),
    ({"candidate": "nobody", "baseline": "prod"}, "no endpoint named 'nobody'"),
    ({"candidate": "", "resume": "cmp-x"}, "no such comparison"),
])
def test_usage_errors_say_what_to_do(tmp_path: Path, opts: dict[str, Any], error: str) -> None:
    ctx = _ctx(tmp_path, [_sim("prod"), _sim("staging")])
    with pytest.raises(Exception, match=re.escape(error)):
        prepare(ctx, CompareOptions(**{"languages": LANGS, **opts}))


def test_the_documented_examples_load() -> None:
    """docs/compare.md's simulated setups and CI jobs: valid, and they run the gate."""
    from monitor.yamlfile import load_yaml

    root = Path(__file__).resolve().parents[1] / "docs" / "examples" / "compare"
    settings, _ = load_settings(root / "monitor.yaml")
    staging = settings.endpoint("staging")
    assert staging.params["bias_points"]["FR"] - settings.endpoint("prod").params[
        "bias_points"] == pytest.approx(0.62)
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        text = json.dumps(load_yaml(root / name))
        assert "monitor compare" in text and "--fail-on-regression" in text
