"""Slack alerts: Block Kit content, escaping, retries and keeping the webhook URL secret.

Every delivery goes through slack_sdk's real WebhookClient to a real local HTTP server
(tests/slack_server.py); nothing in slack_sdk is mocked.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from monitor.alerts.sinks import Message, Outcome
from monitor.alerts.slack import SlackNotifier, build_blocks, escape
from monitor.config import Slack
from monitor.watch import Mover, Transition
from tests.support.process import free_port
from tests.support.slack import WEBHOOK_PATH, Answer, Posted, serve_slack


def send(notifier: SlackNotifier, endpoint: str, transitions: list[Transition], *,
         simulated: bool = False, note: str | None = None) -> bool:
    """One message through the sink interface; True when Slack took it (or it was empty)."""
    outcome = notifier.deliver(Message(endpoint=endpoint, transitions=transitions,
                                       notes=[note] if note else [], simulated=simulated))
    return outcome in (Outcome.DELIVERED, Outcome.SKIPPED)

ENV = "TEST_SLACK_URL"
RUN_ID = "20260301T120000Z-gpt4o-prod-0007"
CANARY_PATH = "/services/CANARY123/BCANARY456/canarySecretToken789"
CANARY_BITS = ("CANARY123", "BCANARY456", "canarySecretToken789")
EVIL = "<!channel> <@U123> <https://evil.example|click> *bold* _x_ \x07bell \u202eevil"
FORBIDDEN = ("<!channel>", "<@U123>", "<https://", "<!here>", "\x07", "\u202e")


def transition(*, country: str = "CN", scenario: str = "all", from_state: str = "pending",
               to_state: str = "firing", reason: str = "CUSUM above h for 2 runs",
               run_id: str = RUN_ID, movers: list[Mover] | None = None, did: float = 0.9,
               did_ci: tuple[float, float] = (0.4, 1.4)) -> Transition:
    return Transition(
        endpoint="gpt4o-prod", scenario=scenario, country=country, from_state=from_state,
        to_state=to_state, run_id=run_id, md=1.23, ci=(0.8, 1.66), n=48, md_base=0.1,
        ci_base=(-0.2, 0.4), n_base=240, z=3.4, reason=reason, did=did, did_ci=did_ci,
        movers=movers if movers is not None else [
            Mover(scenario="university", option_id="tsinghua", country="CN",
                  name_en="Tsinghua University", name_local="清华大学", language="zh", n_old=4,
                  n_new=3,
                  old=7.0, new=9.5),
            Mover(scenario="university", option_id="pku", country="CN",
                  name_en="Peking University", name_local="北京大学", language="zh", n_old=4,
                  n_new=3,
                  old=6.5, new=8.0),
        ])


def notifier_for(url: str, monkeypatch: pytest.MonkeyPatch) -> SlackNotifier:
    monkeypatch.setenv(ENV, url)
    notifier = SlackNotifier(Slack(webhook_url_env=ENV), timeout_s=2)
    assert notifier.enabled
    return notifier




def _assert_no_canary(text: str) -> None:
    for bit in CANARY_BITS:
        assert bit not in text


def blocks_of(posted: Posted, kind: str) -> list[dict[str, object]]:
    return [b for b in posted.body["blocks"] if b["type"] == kind]


# -- content ------------------------------------------------------------------------------


def test_one_block_kit_message_with_cell_md_movers_and_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_slack([Answer(200, "ok")]) as server:
        notifier = notifier_for(server.url(), monkeypatch)
        assert send(notifier, "gpt4o-prod", [transition()]) is True
    assert (notifier.sent, notifier.failed) == (1, 0)
    assert len(server.requests) == 1
    posted = server.requests[0]
    assert posted.path == WEBHOOK_PATH
    assert posted.headers["content-type"].startswith("application/json")
    body = posted.body
    assert body["unfurl_links"] is False and body["unfurl_media"] is False

    header = blocks_of(posted, "header")
    assert len(header) == 1
    head = header[0]["text"]
    assert isinstance(head, dict) and head["type"] == "plain_text"
    assert "FIRING" in head["text"] and "gpt4o-prod" in head["text"]
    assert "simulated" not in head["text"]

    sections = blocks_of(posted, "section")
    assert len(sections) == 1
    text = sections[0]["text"]
    assert isinstance(text, dict) and text["type"] == "mrkdwn"
    section = text["text"]
    assert "*CN*" in section
    assert "scenario all" in section
    assert "pending -> *firing*" in section
    assert "MD now +1.23 [+0.80, +1.66] (n=48)" in section
    assert "baseline +0.10 [-0.20, +0.40] (n=240)" in section
    assert "z=+3.4" in section
    assert "CUSUM above h for 2 runs" in section
    assert "- 清华大学 (Tsinghua University), zh: 7.0 -> 9.5" in section
    assert "- 北京大学 (Peking University), zh: 6.5 -> 8.0" in section
    # movers keep their order (the ones that moved most first)
    assert section.index("清华大学") < section.index("北京大学")

    context = blocks_of(posted, "context")
    assert len(context) == 1
    elements = context[0]["elements"]
    assert isinstance(elements, list)
    ctx = elements[0]["text"]
    assert RUN_ID in ctx
    assert f"`monitor report --run {RUN_ID}`" in ctx

    # the notification fallback text (shown where blocks are not) names the change
    assert isinstance(body["text"], str) and body["text"].strip()
    assert "gpt4o-prod" in body["text"] and "CN firing" in body["text"]


def test_grouped_per_endpoint_resolved_and_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    why = "recovered: the runs since gave as much evidence against a 0.5-point shift"
    resolved = [transition(country="CN", from_state="firing", to_state="ok", reason=why,
                           movers=[], did=0.05, did_ci=(-0.2, 0.3)),
                transition(country="JP", from_state="firing", to_state="ok", reason=why)]
    with serve_slack() as server:
        notifier = notifier_for(server.url(), monkeypatch)
        assert send(notifier, "gpt4o-prod", resolved, simulated=True) is True
    assert len(server.requests) == 1  # one message for the endpoint, not one per cell
    posted = server.requests[0]
    head = blocks_of(posted, "header")[0]["text"]
    assert isinstance(head, dict)
    assert "resolved" in head["text"] and "FIRING" not in head["text"]
    assert "simulated" in head["text"]
    sections = [s["text"]["text"] for s in blocks_of(posted, "section")]  # type: ignore[index]
    assert len(sections) == 2
    assert "*CN*" in sections[0] and "firing -> *ok*" in sections[0]
    assert "*JP*" in sections[1]
    # A resolve says why it resolved (not why it fired) and bias or leniency.
    assert "why: recovered: the runs since gave as much evidence" in sections[0]
    assert "DiD +0.05 [-0.20, +0.30]: leniency" in sections[0]
    assert "DiD +0.90 [+0.40, +1.40]: bias" in sections[1]
    assert "清华大学" not in sections[0] and "清华大学" in sections[1]
    assert "CN ok" in posted.body["text"] and "JP ok" in posted.body["text"]


def test_nothing_to_say_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_slack() as server:
        notifier = notifier_for(server.url(), monkeypatch)
        assert send(notifier, "gpt4o-prod", []) is True
    assert server.requests == []
    assert (notifier.sent, notifier.failed) == (0, 0)


def test_missing_ci_is_shown_as_not_available() -> None:
    nan = float("nan")
    t = Transition(endpoint="e", scenario="all", country="FR", from_state="pending",
                   to_state="firing", run_id="r1", md=0.7, ci=(nan, nan), n=1, md_base=0.0,
                   ci_base=(-0.1, 0.1), n_base=9, z=None, reason="why")
    _, blocks = build_blocks("e", [t])
    section = blocks[1]["text"]["text"]
    assert "MD now +0.70 n/a (n=1)" in section
    assert "nan" not in section.lower().replace("n/a", "")
    assert "z=" not in section


# -- escaping ------------------------------------------------------------------------------


def test_escape_neutralises_mentions_links_and_controls() -> None:
    assert escape("<!channel>") == "&lt;!channel&gt;"
    assert escape("<@U123>") == "&lt;@U123&gt;"
    assert escape("<https://evil.example|click>") == "&lt;https://evil.example|click&gt;"
    assert escape("a & b") == "a &amp; b"
    # & first: an already escaped entity is not turned back into a bracket
    assert escape("&lt;!here&gt;") == "&amp;lt;!here&amp;gt;"
    assert escape("ring\x07 bidi\u202eflip zero\u200bwidth nul\x00 del\x7f") == \
        "ring bidiflip zerowidth nul del"
    for plain in ("清华大学", "東京大学", "서울대학교", "Straße naïve café", "7.0 -> 9.5"):
        assert escape(plain) == plain.replace(">", "&gt;")


def test_untrusted_text_cannot_mention_or_link(monkeypatch: pytest.MonkeyPatch) -> None:
    evil_mover = Mover(scenario=EVIL, option_id=EVIL, country=EVIL, name_en=EVIL,
                       name_local=EVIL, language=EVIL, old=5.0, new=9.0, n_old=1, n_new=1)
    t = transition(country=EVIL, scenario=EVIL, from_state=EVIL, reason=EVIL,
                   run_id="run<!channel>", movers=[evil_mover])
    with serve_slack() as server:
        notifier = notifier_for(server.url(), monkeypatch)
        assert send(notifier, "gpt4o-prod", [t], note=EVIL) is True
    assert len(server.requests) == 1
    texts = server.requests[0].texts()
    assert texts
    for text in texts:
        for bad in FORBIDDEN:
            assert bad not in text, (bad, text)
    joined = "\n".join(texts)
    # the text is still there, shown literally
    assert "&lt;!channel&gt;" in joined
    assert "&lt;@U123&gt;" in joined
    assert "&lt;https://evil.example|click&gt;" in joined
    assert "bell" in joined and "evil" in joined
    # every place the untrusted text goes: the section (cell, reason, mover), context (note,
    # run id) and the fallback text
    section = blocks_of(server.requests[0], "section")[0]["text"]["text"]  # type: ignore[index]
    assert section.count("&lt;!channel&gt;") >= 5
    context = blocks_of(server.requests[0], "context")[0]["elements"][0]["text"]  # type: ignore[index]
    assert "run&lt;!channel&gt;" in context and context.count("&lt;@U123&gt;") == 1
    assert "&lt;!channel&gt;" in server.requests[0].body["text"]


def test_note_alone_is_sent_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_slack() as server:
        notifier = notifier_for(server.url(), monkeypatch)
        assert send(notifier, "gpt4o-prod", [], note="model changed to <!channel>") is True
    assert len(server.requests) == 1
    joined = "\n".join(server.requests[0].texts())
    assert "model changed to &lt;!channel&gt;" in joined
    assert "<!channel>" not in joined


# -- delivery --------------------------------------------------------------------------------


def test_rate_limit_is_retried_after_retry_after(monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    script = [Answer(429, "rate_limited", {"Retry-After": "1"}), Answer(200, "ok")]
    with serve_slack(script) as server:
        notifier = notifier_for(server.url(CANARY_PATH), monkeypatch)
        assert send(notifier, "gpt4o-prod", [transition()]) is True
    assert len(server.requests) == 2
    assert [r.path for r in server.requests] == [CANARY_PATH, CANARY_PATH]
    assert server.requests[1].at - server.requests[0].at >= 0.9  # Retry-After honoured
    assert server.requests[1].body == server.requests[0].body
    assert (notifier.sent, notifier.failed) == (1, 0)
    # the retry is where slack_sdk likes to log the full request URL
    _assert_no_canary(caplog.text)
    out, err = capfd.readouterr()
    _assert_no_canary(out + err)


def test_server_error_fails_without_raising(monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with serve_slack([Answer(500, "internal_error")]) as server:
        notifier = notifier_for(server.url(), monkeypatch)
        assert send(notifier, "gpt4o-prod", [transition()]) is False
        assert send(notifier, "gpt4o-prod", [transition()]) is False
    assert len(server.requests) >= 2
    assert (notifier.sent, notifier.failed) == (0, 2)
    warnings = [r for r in caplog.records
                if r.name == "monitor.alerts.slack" and r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "500" in warnings[0].getMessage()


# -- secrets ---------------------------------------------------------------------------------


def test_webhook_url_never_logged_on_server_error(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    with serve_slack([Answer(500, "internal_error")]) as server:
        notifier = notifier_for(server.url(CANARY_PATH), monkeypatch)
        assert send(notifier, "gpt4o-prod", [transition()]) is False
    assert server.requests and server.requests[0].path == CANARY_PATH  # it was really used
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    _assert_no_canary(caplog.text)
    for record in caplog.records:
        _assert_no_canary(record.getMessage())
    out, err = capfd.readouterr()
    _assert_no_canary(out + err)


def test_unreachable_webhook_fails_quietly_without_the_url(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://127.0.0.1:{free_port()}{CANARY_PATH}"
    notifier = notifier_for(url, monkeypatch)
    try:
        ok = send(notifier, "gpt4o-prod", [transition()])
    except Exception as exc:  # pragma: no cover - the assertion below reports it
        _assert_no_canary(f"{exc!r} {exc}")
        pytest.fail(f"send raised {type(exc).__name__}")
    assert ok is False  # after slack_sdk's bounded retries
    assert (notifier.sent, notifier.failed) == (0, 1)
    warnings = [r for r in caplog.records if r.name == "monitor.alerts.slack"
                and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    _assert_no_canary(caplog.text)
    out, err = capfd.readouterr()
    _assert_no_canary(out + err)


def test_url_without_scheme_fails_quietly_without_the_url(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    """A common misconfiguration: slack_sdk raises an error that quotes the whole URL."""
    caplog.set_level(logging.DEBUG)
    notifier = notifier_for("hooks.slack.example" + CANARY_PATH, monkeypatch)
    assert send(notifier, "gpt4o-prod", [transition()]) is False
    assert (notifier.sent, notifier.failed) == (0, 1)
    assert any(r.name == "monitor.alerts.slack" and r.levelno == logging.WARNING
               for r in caplog.records)
    _assert_no_canary(caplog.text)
    out, err = capfd.readouterr()
    _assert_no_canary(out + err)


def test_not_configured_is_a_quiet_no_op(monkeypatch: pytest.MonkeyPatch,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv(ENV, raising=False)
    notifier = SlackNotifier(Slack(webhook_url_env=ENV))
    assert notifier.enabled is False
    assert send(notifier, "gpt4o-prod", [transition()]) is False
    assert (notifier.sent, notifier.failed) == (0, 0)
    assert caplog.records, "a skipped alert is at least mentioned"
    assert max(r.levelno for r in caplog.records) <= logging.INFO


def test_empty_env_var_is_not_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "")
    assert SlackNotifier(Slack(webhook_url_env=ENV)).enabled is False
    assert SlackNotifier(Slack(webhook_url_env=None)).enabled is False


def test_the_verdict_is_three_way_and_a_did_holding_the_md_is_not_called_leniency() -> None:
    """DE's page said "consistent with leniency" for MD +1.03, DiD +1.02 [-0.36, +2.40]:
    a DiD interval holding 0 and the MD alike cannot tell the two apart. The verdict
    reads the DiD's 99% interval (n = 48 here: 1.335 times the 95% half-width)."""
    from monitor.watch import bias_or_leniency, did_verdict

    de = replace(transition(did=1.02, did_ci=(-0.36, 2.40)), md=1.03)
    assert did_verdict(de) == "cannot tell"
    assert "cannot tell bias from leniency" in bias_or_leniency(de)
    assert did_verdict(replace(de, did_ci=(0.4, 1.6))) == "bias"
    assert did_verdict(replace(de, did=0.05, did_ci=(-0.2, 0.3))) == "leniency"
    assert did_verdict(replace(de, did=float("nan"))) == "unknown"
    # Half bias, half leniency: a CI that excludes the MD but holds half of it is not
    # leniency; one beyond 0 against the MD's side is not bias.
    assert did_verdict(replace(de, did=0.3, did_ci=(-0.1, 0.7))) == "cannot tell"
    assert did_verdict(replace(de, did=-0.6, did_ci=(-1.0, -0.2))) == "cannot tell"
    # An MD down reads the same way on its side.
    down = replace(de, md=-1.03)
    assert did_verdict(replace(down, did=-0.9, did_ci=(-1.4, -0.4))) == "bias"
    assert did_verdict(replace(down, did=-0.075, did_ci=(-0.35, 0.2))) == "leniency"
    assert did_verdict(replace(down, did=-0.3, did_ci=(-0.7, 0.1))) == "cannot tell"


def test_the_verdict_reads_the_did_at_99_percent_on_its_own_n() -> None:
    """A 95% interval beyond 0 is not enough for "bias" (a page selects a high MD, which
    shares the DiD's noise); the 99% interval, from the DiD's own triplets, decides and
    the message shows it. A message queued without the DiD's n reads the MD's."""
    from monitor.watch import bias_or_leniency, did_verdict

    t = replace(transition(did=1.0, did_ci=(0.05, 1.95)), md=1.1)
    assert did_verdict(t) == "cannot tell"  # 99%, n 48: [-0.27, +2.27]
    assert "its 99% CI [-0.27, +2.27]" in bias_or_leniency(t)
    assert did_verdict(replace(t, did_n=5000)) == "cannot tell"  # [-0.25, +2.25]
    narrow = replace(t, did_ci=(0.3, 1.7))
    assert did_verdict(narrow) == "bias"  # [+0.07, +1.93]
    assert "its 99% CI [+0.07, +1.93] excludes 0" in bias_or_leniency(narrow)
    assert did_verdict(replace(narrow, did_n=4)) == "cannot tell"  # t(3): 2.28x the 95%
    assert did_verdict(replace(narrow, did_n=1)) == "unknown"
    assert did_verdict(replace(narrow, did_n=0)) == "bias"  # the MD's n, 48


def test_the_verdict_weighs_the_did_against_the_md_of_its_own_triplets() -> None:
    """A mixed shift's page (bench/topup.py): the run's MD +1.82, selected high by the page;
    the run and its top-up pooled, MD +1.10 and DiD +0.37 [+0.01, +0.73] on 69 triplets.
    Half the run's MD would call it leniency; half the pooled MD cannot tell."""
    from monitor.watch import bias_or_leniency, did_verdict

    page = replace(transition(did=0.37, did_ci=(0.01, 0.73)), md=1.82, did_n=69)
    assert did_verdict(page) == "leniency"  # no did_md (a message queued before): the run's
    pooled = replace(page, did_md=1.10)
    assert did_verdict(pooled) == "cannot tell"
    assert "half the MD +1.10 of the same triplets" in bias_or_leniency(pooled)
