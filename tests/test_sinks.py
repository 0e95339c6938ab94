"""The webhook and PagerDuty sinks beside Slack, through the real outbox (a DuckDB file in
tmp_path) and real local HTTP receivers that record every request: the bodies and
headers sent, PagerDuty's trigger and resolve under one dedup_key, exactly once per
sink with one sink down and then back after a restart, retries on 500 / 429 / no
answer, no retry on 400, secrets nowhere, and `monitor config check`."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from monitor.alerts import outbox
from monitor.alerts.sinks import Sink
from monitor.cli import main
from monitor.config import Alerts, Report
from monitor.httpio import NoReply, post_json
from monitor.store import Store
from monitor.watch import Mover, Transition
from tests.support.db import rows
from tests.support.process import free_port
from tests.support.slack import Answer, Posted, SlackServer
from tests.support.slack import serve_slack as serve  # a scripted JSON receiver, any path

FAST = {"retries": 1, "backoff_s": 0, "timeout_s": 2}
ACCEPTED = Answer(202, '{"status": "success", "message": "Event processed"}')


def _transition(run_id: str, was: str, now: str, *, reason: str = "drift up",
                country: str = "CN") -> str:
    mover = Mover(scenario="all", option_id="tsinghua", country=country,
                  name_en="Tsinghua University", name_local="清华大学", language="zh", old=7.0,
                  new=9.5, n_old=40, n_new=12)
    t = Transition(endpoint="prod", scenario="all", country=country, from_state=was, to_state=now,
                   run_id=run_id, md=1.0, ci=(0.6, 1.4), n=40, md_base=0.1,
                   ci_base=(0.0, 0.2), n_base=400, z=3.0, reason=reason, movers=[mover], did=0.8,
                   did_ci=(0.3, 1.3), did_n=55)
    return json.dumps({"kind": "transition", **asdict(t)})


def _sinks(monkeypatch: pytest.MonkeyPatch, *, slack: SlackServer | None = None,
           webhook: SlackServer | None = None, pagerduty: SlackServer | None = None,
           report: Report | None = None, **over: Any) -> list[Sink]:
    """The sinks of a config naming these receivers; environment variables hold the
    secrets, as in production."""
    monkeypatch.delenv("T_SLACK", raising=False)
    cfg: dict[str, Any] = {"slack": {"webhook_url_env": "T_SLACK"}}
    if slack is not None:
        monkeypatch.setenv("T_SLACK", slack.url())
    if webhook is not None:
        monkeypatch.setenv("T_HOOK", webhook.url("/hooks/bias"))
        monkeypatch.setenv("T_HOOK_AUTH", "Bearer hook-token")
        cfg["webhook"] = {"url_env": "T_HOOK", "headers_env": {"Authorization": "T_HOOK_AUTH"},
                          **FAST, **over}
    if pagerduty is not None:
        monkeypatch.setenv("T_PD_KEY", "R0UT1NGKEY")
        cfg["pagerduty"] = {"routing_key_env": "T_PD_KEY", "url": pagerduty.url("/v2/enqueue"),
                            **FAST, **over}
    return outbox.build_sinks(Alerts.model_validate(cfg), report)


def _deliver(store: Store, sinks: list[Sink]) -> bool:
    return outbox.deliver(store, sinks, "prod", simulated=False)


def test_the_webhook_posts_the_documented_body_with_headers_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as hook:
        sinks = _sinks(monkeypatch, webhook=hook)
        store = Store(tmp_path / "m.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing"),
                                            outbox.note("model id changed (a -> b)")])
        assert _deliver(store, sinks) is True
    [req] = hook.requests
    assert req.path == "/hooks/bias"
    assert req.headers["authorization"] == "Bearer hook-token"
    assert req.headers["content-type"] == "application/json"
    body = req.body
    assert req.headers["idempotency-key"] == body["dedup_key"]
    assert body["dedup_key"].startswith("bm-")
    assert (body["schema"], body["endpoint"], body["run_id"], body["simulated"]) == (
        "bias-monitor.alert/1", "prod", "r1", False)
    assert body["summary"] == "Local-language bias FIRING on prod"
    assert body["report_command"] == "monitor report --run r1"
    assert body["note"] == "model id changed (a -> b)"  # one message: the run's changes + notice
    [t] = body["transitions"]
    assert t["cell"] == {"scenario": "all", "country": "CN"}
    assert (t["condition"], t["from_state"], t["to_state"]) == ("drift", "pending", "firing")
    assert t["md"] == {"value": 1.0, "ci_lower": 0.6, "ci_upper": 1.4, "n": 40}
    assert t["baseline"] == {"value": 0.1, "ci_lower": 0.0, "ci_upper": 0.2, "n": 400}
    assert t["did"]["verdict"] == "bias" and t["did"]["ci_lower"] == 0.3
    assert t["did"]["n"] == 55 and "its 99% CI [+0.13, +1.47] excludes 0" in t["did"]["text"]
    assert t["did"]["md"] == 1.0  # no top-up: the run's own MD
    assert t["why"] == "drift up" and t["cell_key"] == "bias-monitor/prod/all/CN/drift"
    assert t["movers"][0]["name_local"] == "清华大学"


def test_a_number_without_a_value_is_null_not_nan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = Transition(endpoint="prod", scenario="all", country="CN", from_state="pending",
                   to_state="firing", run_id="r1", md=1.0, ci=(float("nan"),) * 2, n=1,
                   md_base=0.1, ci_base=(0.0, 0.2), n_base=400, z=None, reason="drift up")
    with serve() as hook:
        sinks = _sinks(monkeypatch, webhook=hook)
        store = Store(tmp_path / "m.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [json.dumps({"kind": "transition",
                                                                     **asdict(t)})])
        assert _deliver(store, sinks) is True
    [item] = hook.requests[0].body["transitions"]
    assert item["md"]["ci_lower"] is None and item["z"] is None
    assert item["did"]["verdict"] == "unknown"


def test_pagerduty_triggers_then_resolves_under_one_dedup_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve([ACCEPTED]) as pd:
        sinks = _sinks(monkeypatch, pagerduty=pd, severity="critical")
        store = Store(tmp_path / "m.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing"),
                                            outbox.note("budget reached")])
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r2", "firing", "ok",
                                                        reason="recovered")])
        assert _deliver(store, sinks) is True
        assert store.outbox_pending("prod") == []
    trigger, resolve = (r.body for r in pd.requests)  # the notice is no incident: not sent
    assert trigger["event_action"] == "trigger" and resolve["event_action"] == "resolve"
    assert trigger["dedup_key"] == resolve["dedup_key"] == "bias-monitor/prod/all/CN/drift"
    assert trigger["routing_key"] == resolve["routing_key"] == "R0UT1NGKEY"
    payload = trigger["payload"]
    assert (payload["source"], payload["severity"], payload["component"]) == (
        "prod", "critical", "all")
    assert len(payload["summary"]) <= 1024
    assert payload["summary"].startswith("Local-language bias FIRING on prod: CN")
    assert "MD +1.00 [+0.60, +1.40] n=40 vs baseline +0.10" in payload["summary"]
    details = payload["custom_details"]
    assert details["md"]["n"] == 40 and details["did"]["verdict"] == "bias"
    assert details["report_command"] == "monitor report --run r1"
    assert set(resolve) == {"routing_key", "event_action", "dedup_key"}
    assert rows(store.path, "SELECT outcome FROM outbox_delivery ORDER BY id") == [
        ("delivered",), ("skipped",), ("delivered",)]


def test_each_sink_gets_each_message_once_in_order_across_an_outage_and_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    down = [Answer(500)] * 4  # two deliveries of two tries each, then back
    with serve() as slack, serve([*down, ACCEPTED]) as pd:
        db = tmp_path / "m.duckdb"
        sinks = _sinks(monkeypatch, slack=slack, pagerduty=pd)
        store = Store(db)
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing")])
        assert _deliver(store, sinks) is False  # Slack took it; PagerDuty is down
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r2", "firing", "ok",
                                                        reason="recovered")])
        assert _deliver(store, sinks) is False  # Slack took r2; PagerDuty still owes r1 first
        assert len(slack.requests) == 2 and len(pd.requests) == 4
        assert {r.body["event_action"] for r in pd.requests} == {"trigger"}  # r1 only
        assert [i.id for i in store.outbox_pending("prod", "slack")] == []
        assert [i.id for i in store.outbox_pending("prod", "pagerduty")] == [1, 2]

        # A restart: the file reopened and the sinks built anew, as each run's process does.
        store, sinks = Store(db), _sinks(monkeypatch, slack=slack, pagerduty=pd)
        assert _deliver(store, sinks) is True
        assert _deliver(store, sinks) is True  # nothing left: nothing sent
    assert len(slack.requests) == 2  # never re-sent to Slack
    texts = [" ".join(r.texts()) for r in slack.requests]
    assert "run r1" in texts[0] and "run r2" in texts[1]
    after = [r.body for r in pd.requests[4:]]
    assert [b["event_action"] for b in after] == ["trigger", "resolve"]
    assert after[0]["dedup_key"] == after[1]["dedup_key"]
    assert store.outbox_pending("prod") == []


def test_with_report_base_url_every_sink_links_the_runs_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = Report(base_url="https://bias.internal:9464/monitor/")
    run = "prod-20261201T100000Z-ab12cd"
    with serve() as slack, serve() as hook, serve([ACCEPTED]) as pd:
        sinks = _sinks(monkeypatch, slack=slack, webhook=hook, pagerduty=pd, report=base)
        store = Store(tmp_path / "m.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition(run, "pending", "firing")])
        outbox.queue(store, outbox.owed(sinks), "prod", [outbox.note("budget reached")])
        assert _deliver(store, sinks) is True
        # Without a base URL (the default): no link anywhere.
        sinks = _sinks(monkeypatch, webhook=hook, pagerduty=pd)
        store = Store(tmp_path / "m2.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing")])
        assert _deliver(store, sinks) is True
    url = f"https://bias.internal:9464/monitor/report/{run}/"
    context = slack.requests[0].body["blocks"][-1]["elements"][0]["text"]
    assert f"<{url}|the run's report>" in context and "monitor report --run" in context
    assert "<http" not in " ".join(slack.requests[1].texts())  # a notice alone: no run, no link
    assert [r.body["report_url"] for r in hook.requests] == [url, None, None]
    first, plain = (r.body for r in pd.requests)
    assert first["links"] == [{"href": url, "text": f"bias-monitor report of run {run}"}]
    assert first["payload"]["custom_details"]["report_url"] == url
    assert "links" not in plain and plain["payload"]["custom_details"]["report_url"] is None


@pytest.mark.parametrize("kind", ["webhook", "pagerduty"])
def test_500_and_429_are_retried_with_the_same_key(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok = ACCEPTED if kind == "pagerduty" else Answer(200)
    with serve([Answer(500), Answer(429, headers={"Retry-After": "0"}), ok]) as server:
        sinks = _sinks(monkeypatch, **{kind: server}, retries=2)
        store = Store(tmp_path / "m.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing")])
        assert _deliver(store, sinks) is True
    assert len(server.requests) == 3
    assert len({r.body["dedup_key"] for r in server.requests}) == 1
    assert store.outbox_pending("prod") == []


@pytest.mark.parametrize("kind", ["webhook", "pagerduty"])
def test_a_400_is_logged_not_retried_and_blocks_nothing(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    ok = ACCEPTED if kind == "pagerduty" else Answer(200)
    bad = Answer(400, '{"status": "invalid event", "errors": ["summary is missing"]}')
    with serve([bad, ok]) as server:
        sinks = _sinks(monkeypatch, **{kind: server}, retries=3)
        store = Store(tmp_path / "m.duckdb")
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing")])
        outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r2", "firing", "ok")])
        with caplog.at_level(logging.WARNING):
            assert _deliver(store, sinks) is True
            assert _deliver(store, sinks) is True
    assert len(server.requests) == 2  # the refused one once, the next one once
    assert rows(store.path, "SELECT id, outcome FROM outbox_delivery ORDER BY id") == [
        (1, "rejected"), (2, "delivered")]
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1 and "HTTP 400" in refused[0] and "summary is missing" in refused[0]


def test_no_answer_is_retried_then_kept_for_the_next_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # nobody listens there
    monkeypatch.setenv("T_HOOK", f"http://127.0.0.1:{port}/hook")
    sinks = outbox.build_sinks(Alerts.model_validate({"slack": {"webhook_url_env": None},
                                                      "webhook": {"url_env": "T_HOOK", **FAST}}))
    store = Store(tmp_path / "m.duckdb")
    outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending", "firing")])
    assert _deliver(store, sinks) is False
    assert [i.id for i in store.outbox_pending("prod", "webhook")] == [1]


def test_a_page_with_no_sink_to_take_it_waits_and_goes_to_the_first_that_can(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No sink can deliver (Slack's variable unset, no other sink): the page is held in
    the outbox, not dropped, and counted as undelivered; once a sink is configured it
    is owed to it and delivered, once, with the pages queued since, in order."""
    store = Store(tmp_path / "m.duckdb")
    nothing = _sinks(monkeypatch)
    assert outbox.owed(nothing) == []
    outbox.queue(store, outbox.owed(nothing), "prod", [_transition("r1", "pending", "firing")])
    assert _deliver(store, nothing) is True  # nothing could be tried
    assert store.outbox_backlog("prod") == {"": 1}  # held, not lost
    with serve([ACCEPTED, ACCEPTED]) as pd:
        only_pd = _sinks(monkeypatch, pagerduty=pd)
        outbox.queue(store, outbox.owed(only_pd), "prod", [_transition("r2", "firing", "ok")])
        assert _deliver(store, only_pd) is True
        assert _deliver(store, only_pd) is True  # nothing left: nothing sent twice
    # The held page (r1 FIRING) first, then its resolve (r2): in the order queued.
    assert [r.body["event_action"] for r in pd.requests] == ["trigger", "resolve"]
    assert rows(store.path, "SELECT sink, outcome FROM outbox_delivery ORDER BY id") == [
        ("pagerduty", "delivered"), ("pagerduty", "delivered")]
    assert store.outbox_backlog("prod") == {}


def test_secrets_are_in_no_log_database_or_exception(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    secrets = ["HOOKPATHSECRET", "AUTHHEADERSECRET", "ROUTINGKEYSECRET"]
    # Receivers that quote what they got in their errors: the webhook its URL and
    # Authorization header, PagerDuty the routing key of the body.
    hook_leak = "bad request to HOOKPATHSECRET with AUTHHEADERSECRET"
    pd_leak = '{"status": "invalid event", "errors": ["routing key ROUTINGKEYSECRET"]}'
    with serve([Answer(500, hook_leak), Answer(400, hook_leak)]) as hook, \
            serve([Answer(500, pd_leak), Answer(400, pd_leak)]) as pd:
        monkeypatch.setenv("T_HOOK", hook.url("/hooks/HOOKPATHSECRET"))
        monkeypatch.setenv("T_HOOK_AUTH", "Bearer AUTHHEADERSECRET")
        monkeypatch.setenv("T_PD_KEY", "ROUTINGKEYSECRET")
        cfg = {"slack": {"webhook_url_env": None},
               "webhook": {"url_env": "T_HOOK", "headers_env": {"Authorization": "T_HOOK_AUTH"},
                           **FAST},
               "pagerduty": {"routing_key_env": "T_PD_KEY", "url": pd.url(), **FAST}}
        store = Store(tmp_path / "m.duckdb")
        with caplog.at_level(logging.DEBUG):
            sinks = outbox.build_sinks(Alerts.model_validate(cfg))
            outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r1", "pending",
                                                                         "firing")])
            _deliver(store, sinks)
            # ... and a webhook that is not there at all, under its secret URL
            monkeypatch.setenv("T_HOOK", f"http://127.0.0.1:{free_port()}/hooks/HOOKPATHSECRET")
            sinks = outbox.build_sinks(Alerts.model_validate(cfg))
            outbox.queue(store, outbox.owed(sinks), "prod", [_transition("r2", "firing", "ok")])
            assert _deliver(store, sinks) is False
    with pytest.raises(NoReply) as no_reply:
        post_json(f"http://127.0.0.1:{free_port()}/HOOKPATHSECRET", {}, headers={},
                  timeout_s=1)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert logged.count("refused") == 3  # webhook r1, PagerDuty r1 and r2
    assert "try 2 of 2" in logged and "no answer (ConnectError" in logged
    assert "to *** with ***" in logged and "routing key ***" in logged  # quoted, masked
    db_bytes = Path(store.path).read_bytes()
    for s in secrets:
        assert s not in logged, s
        assert s.encode() not in db_bytes, s
        assert s not in str(no_reply.value) and s not in repr(no_reply.value), s


def test_config_check_says_which_sink_variable_is_unset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("T_HOOK", "https://hooks.example/HOOKPATHSECRET")
    monkeypatch.delenv("T_UNSET_AUTH", raising=False)
    monkeypatch.delenv("T_UNSET_PD", raising=False)
    monkeypatch.delenv("SLACK_WEBHOOK_URL", raising=False)
    cfg = {"endpoints": [{"name": "main", "model": "simulated/demo"}],
           "alerts": {"webhook": {"url_env": "T_HOOK",
                                  "headers_env": {"Authorization": "T_UNSET_AUTH"}},
                      "pagerduty": {"routing_key_env": "T_UNSET_PD"}}}
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert main(["config", "check", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert lines == [
        f"monitor: warning: {path}: alerts.slack.webhook_url_env: environment variable "
        "SLACK_WEBHOOK_URL is not set, so Slack gets no alerts; export it or remove "
        "alerts.slack",
        f"monitor: warning: {path}: alerts.webhook.headers_env.Authorization: environment "
        "variable T_UNSET_AUTH is not set, so the webhook gets no alerts; export it or remove "
        "alerts.webhook",
        f"monitor: warning: {path}: alerts.pagerduty.routing_key_env: environment variable "
        "T_UNSET_PD is not set, so PagerDuty gets no alerts; export it or remove "
        "alerts.pagerduty",
        f"monitor: warning: {path}: alerts: no sink can deliver - messages wait in the outbox "
        "(`monitor runs` shows them) and go out once a sink is configured"]
    assert "HOOKPATHSECRET" not in out + err
    data = json.loads(out.partition("\n")[2])
    assert data["alerts"]["webhook"]["url_env"] == "T_HOOK (set; value never shown)"
    assert data["alerts"]["pagerduty"]["url"] == "https://events.pagerduty.com/v2/enqueue"


def test_posted_requests_are_recorded_as_sent(tmp_path: Path) -> None:
    """The receiver itself: what the other tests read is what went over the wire."""
    with serve([Answer(202)]) as server:
        reply = post_json(server.url("/x"), {"a": "清"}, headers={"X-T": "1"}, timeout_s=2)
    assert reply.status == 202
    [req] = server.requests
    assert isinstance(req, Posted) and req.body == {"a": "清"} and req.headers["x-t"] == "1"


@pytest.mark.parametrize(("alerts", "key"), [
    ({"pagerduty": {"routing_key_env": "K", "severity": "urgent"}}, "alerts.pagerduty.severity"),
    ({"webhook": {"url_env": "https://hooks.example/PASTEDSECRET"}}, "alerts.webhook.url_env"),
    ({"webhook": {"url_env": "H", "headers_env": {"Authorization": "Bearer PASTEDSECRET"}}},
     "alerts.webhook.headers_env"),
    ({"pagerduty": {}}, "alerts.pagerduty.routing_key_env"),
])
def test_a_bad_sink_key_is_one_line_naming_it(alerts: dict[str, Any], key: str,
                                              tmp_path: Path) -> None:
    from monitor.config import load_settings
    from monitor.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({"endpoints": [{"name": "m", "model": "simulated/demo"}],
                                "alerts": alerts}), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: {key}"), text
    assert "PASTEDSECRET" not in text
