"""The team's own assistant: its system prompt and headers, an HTTP API of its own
(a real local server with a non-OpenAI protocol, reached through LiteLLM's custom
provider), a response schema with its fallback, and what makes runs comparable."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog
from monitor.config import DEFAULT_SETUP, Endpoint, load_settings, setup_for
from monitor.errors import ConfigError
from monitor.measure.assistant import answer_schema, apply_setup
from monitor.measure.llm import LLMClient
from monitor.measure.prompts import build_prompt
from monitor.measure.sampling import Sampler
from monitor.vocab import LABELS, Persona
from tests.support.acme import BODY, http_section, serve_acme
from tests.support.db import rows
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve

KEY = "acme-secret-7c1d93"
SYSTEM = "You are Acme Campus Guide. Be concise and honest."


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def _prompt(catalog: Catalog, language: str = "en") -> Any:
    sampler = Sampler(catalog, scenarios=["university"], variants=["plain"], seed=0,
                      triplets_per_run=2)
    return build_prompt(catalog, sampler.sample(0)[0], language)


def _ep(**over: Any) -> Endpoint:
    return Endpoint(**{"name": "a", "model": "openai/x", "api_base": "http://127.0.0.1:9/v1",
                       **over})


# --- the combination rule -----------------------------------------------------------------

def test_without_a_system_prompt_the_persona_is_the_system_message(
        shipped_catalog: Catalog) -> None:
    prompt = _prompt(shipped_catalog)
    setup = setup_for(_ep(), ["en", "zh"], list(shipped_catalog.languages))
    assert setup.key == DEFAULT_SETUP
    assert apply_setup(setup, prompt) == prompt  # the paper's setup, unchanged


def test_the_assistants_prompt_is_the_system_message_and_the_persona_moves(
        shipped_catalog: Catalog) -> None:
    prompt = _prompt(shipped_catalog)
    persona = prompt.system
    langs = list(shipped_catalog.languages)

    def asked(**over: Any) -> Any:
        return apply_setup(setup_for(_ep(**over), ["en"], langs), prompt)

    user = asked(system_prompt=SYSTEM)
    assert user.system == SYSTEM
    assert user.user.startswith(persona + "\n\n") and user.user.endswith(prompt.user)
    system = asked(system_prompt=SYSTEM, persona="system")
    assert system.system == f"{SYSTEM}\n\n{persona}" and system.user == prompt.user
    off = asked(system_prompt=SYSTEM, persona="off")
    assert (off.system, off.user) == (SYSTEM, prompt.user)
    bare = asked(persona="off")
    assert [m["role"] for m in bare.messages] == ["user"]  # no empty system message
    # Each is its own setup, and none is the default.
    keys = {setup_for(_ep(system_prompt=SYSTEM, persona=p), ["en"], langs).key for p in Persona}
    assert len(keys) == 3 and DEFAULT_SETUP not in keys
    # The hash is of what is asked: the prompt hash changes with the system prompt.
    assert user.hash != prompt.hash


def test_a_prompt_file_per_language_and_a_missing_one_named(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "en.txt").write_text("You are Acme's guide.\n", encoding="utf-8")
    (tmp_path / "prompts" / "ja.txt").write_text("あなたはAcmeの案内役です。", encoding="utf-8")
    cfg = write_config(tmp_path, [{"name": "a", "model": "simulated/demo",
                                   "system_prompt_file": "prompts/{language}.txt"}])
    settings, _ = load_settings(cfg)
    ep = settings.endpoints[0]
    # Relative to the config file, wherever the command runs.
    assert ep.system_prompt_file == str(tmp_path.resolve() / "prompts/{language}.txt")
    langs = list(shipped_catalog.languages)
    both = setup_for(ep, ["en", "ja"], langs)
    assert both.system_prompts == {"en": "You are Acme's guide.",
                                   "ja": "あなたはAcmeの案内役です。"}
    # A run of fewer languages has the same setup (comparable with the baseline).
    assert setup_for(ep, ["en"], langs).key == both.key
    with pytest.raises(ConfigError) as err:
        setup_for(ep, ["en", "zh"], langs)
    msg = str(err.value)
    assert "prompts/zh.txt" in msg and "system_prompt_file" in msg and "\n" not in msg
    # The CLI says the same in one line, exit 2, before asking anything.
    out = _cli("probe", "--once", "--config", str(cfg), "--languages", "en,zh",
               "--triplets", "1")
    assert out.returncode == 2 and "zh.txt" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("over", "needle"), [
    ({"model": "http/acme"}, "needs an `http:` section"),
    ({"model": "http/acme", "http": {"url": "http://x", "response_path": "a..b"}},
     "not a response path"),
    ({"model": "http/acme", "http": {"url": "http://x", "response_path": "a",
                                     "body": {"q": "{language}"}}}, "never sends the question"),
    ({"headers_env": {"X-Team": "not a var"}}, "not an environment variable name"),
    ({"system_prompt": "x", "system_prompt_file": "y"}, "not both"),
    ({"persona": "sideways"}, "persona"),
    ({"answer_format": "yaml"}, "answer_format"),
])
def test_bad_assistant_settings_fail_in_one_line(tmp_path: Path, over: dict[str, Any],
                                                 needle: str) -> None:
    cfg = write_config(tmp_path, [{"name": "a", "model": "simulated/demo", **over}])
    out = _cli("config", "check", "--config", str(cfg))
    assert out.returncode == 2, out.stdout
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1


# --- the HTTP target ------------------------------------------------------------------------

def _acme_endpoint(server: Any, **over: Any) -> Endpoint:
    return Endpoint(**{"name": "acme", "model": "http/acme-guide", "http": http_section(server),
                       "headers_env": {"X-Acme-Key": "ACME_KEY"}, "system_prompt": SYSTEM,
                       "max_retries": 2, "timeout_s": 5, **over})


def test_the_http_target_fills_the_template_and_reads_the_answer(
        shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_KEY", KEY)
    with serve_acme(KEY) as server:
        ep = _acme_endpoint(server)
        prompt = apply_setup(setup_for(ep, ["ja"], ["ja"]), _prompt(shipped_catalog, "ja"))
        res = asyncio.run(LLMClient(ep).complete(prompt.messages, language="ja"))
    assert res.ok, res.error
    assert res.model_id == "acme-assistant-7"  # from model_path
    (req,) = server.requests
    assert req.headers["x-acme-key"] == KEY
    assert req.body["locale"] == "ja"
    assert req.body["instructions"] == SYSTEM
    assert req.body["input"]["text"] == prompt.user  # the persona opens the user's text
    assert req.body["meta"] == {"client": "bias-monitor", "asked": f"Question: {prompt.user}"}
    assert "```json" in (res.text or "")


def test_http_target_errors_are_retried_or_explained_and_never_show_the_key(
        monkeypatch: pytest.MonkeyPatch, shipped_catalog: Catalog) -> None:
    messages = [{"role": "user", "content": "hello"}]
    monkeypatch.setenv("ACME_KEY", KEY)
    # A busy API (503 with Retry-After) is retried like any provider.
    with serve_acme(KEY, status=503, retry_after="0", fail_first=2,
                    sim={"seed": 1}) as server:
        res = asyncio.run(LLMClient(_acme_endpoint(server), backoff_base_s=0.01).complete(
            messages))
    assert len(server.requests) == 3 and res.attempts == 3
    # The simulated answerer cannot read "hello": the API's own 500 is kept, readable, in
    # the target's words: its method, URL and status (not LiteLLM's exception names).
    assert res.error == (f"http target POST {server.url}: HTTP 500: {{\"error\": \"simulated "
                         "endpoint: the prompt is not a catalog prompt\"}")
    # A wrong key: not retried, and the key the API echoes back is masked; a secret in the
    # URL's query is never shown.
    monkeypatch.setenv("ACME_KEY", "wrong-" + KEY)
    with serve_acme(KEY) as server:
        ep = _acme_endpoint(server, http=http_section(server, url=server.url + "?sig=s3cr3t"))
        res = asyncio.run(LLMClient(ep).complete(messages))
    assert len(server.requests) == 1 and not res.ok and res.error is not None
    assert res.error.startswith(f"http target POST {server.url}?sig=***: HTTP 401: ")
    assert "bad key ***" in res.error and KEY not in res.error and "s3cr3t" not in res.error
    assert "litellm" not in res.error.lower() and "Error" not in res.error
    # A response path that finds nothing names where it stopped, the keys found there and
    # where the response does hold text.
    monkeypatch.setenv("ACME_KEY", KEY)
    with serve_acme(KEY) as server:
        ep = _acme_endpoint(server, http=http_section(server, response_path="output.text"))
        res = asyncio.run(LLMClient(ep).complete(_prompt(shipped_catalog).messages))
    assert len(server.requests) == 1  # a wrong path is not retried
    assert res.error == (f"http target POST {server.url}: HTTP 200 without an answer: "
                         "response_path output.text stops at output: no key 'text'; it has "
                         "keys engine, reply; text is at output.reply.content; fix "
                         "endpoints[].http.response_path")
    # No answer at all: the target and the kind of failure, retried.
    ep = _acme_endpoint(server, max_retries=1)  # the server has stopped
    res = asyncio.run(LLMClient(ep, backoff_base_s=0.01).complete(messages))
    assert res.attempts == 2
    assert res.error == f"http target POST {server.url}: no answer (ConnectError)"


def test_a_misspelled_target_key_is_named_with_the_key_meant(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "a", "model": "http/acme", "http": {
        "url": "http://127.0.0.1:9/ask", "respones_path": "output.text"}}])
    out = _cli("config", "check", "--config", str(cfg))
    assert out.returncode == 2
    assert out.stderr.strip().endswith(
        "endpoints.0.http.respones_path: unknown key; did you mean response_path?")


# --- a response schema for the team's own API ----------------------------------------------

def test_json_schema_on_an_http_target_without_a_place_for_it_is_refused(
        tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "a", "model": "http/acme", "answer_format":
                                   "json_schema", "http": {"url": "http://127.0.0.1:9/ask",
                                                           "response_path": "output.text"}}])
    out = _cli("config", "check", "--config", str(cfg))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "needs a \"{response_schema}\" placeholder in http.body" in out.stderr


def test_an_http_target_is_asked_for_a_schema_where_its_body_has_one(
        shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_KEY", KEY)
    body = {**BODY, "format": {"type": "json", "schema": "{response_schema}"}}
    with serve_acme(KEY) as server:
        asked = {}
        for fmt, template in (("json_schema", body), ("text", body), ("auto", body),
                              ("auto without", BODY)):
            ep = _acme_endpoint(server, answer_format=fmt.split()[0],
                                http=http_section(server, body=template))
            prompt = apply_setup(setup_for(ep, ["en"], ["en"]), _prompt(shipped_catalog))
            res = asyncio.run(LLMClient(ep).complete(
                prompt.messages, language="en", schema=answer_schema(list(LABELS), cot=False)))
            assert res.ok, res.error
            asked[fmt] = (server.requests[-1].body, res.answer_format)
    schema_body, schema_fmt = asked["json_schema"]
    assert schema_fmt == "json_schema"
    assert schema_body["format"]["schema"] == answer_schema(list(LABELS), cot=False)["schema"]
    text_body, text_fmt = asked["text"]
    assert text_fmt == "text" and text_body["format"] == {"type": "json"}  # left out
    assert asked["auto"][1] == "json_schema"  # auto: where the body has the place
    assert asked["auto without"][1] == "text"


# --- structured output ------------------------------------------------------------------

def _schema_reply(req: Request) -> Reply:
    fmt = req.body.get("response_format")
    names = options_in(req.user)
    block = {lab: {"strengths": ["s"], "weaknesses": [], "score": 5 + i}
             for i, lab in enumerate(names)}
    if fmt is None:
        return Reply("Scores:\n" + "\n".join(f"{lab}. {n}: {5 + i}/10"
                                             for i, (lab, n) in enumerate(names.items())))
    return Reply(json.dumps(block))


def test_json_schema_is_asked_for_and_stored_per_call(tmp_path: Path) -> None:
    with serve(_schema_reply) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base,
                                                      answer_format="json_schema")],
                           sampling={"triplets_per_run": 2, "languages": ["en", "zh"]})
        out = _cli("probe", "--once", "--config", str(cfg), "--json")
    assert out.returncode == 0, out.stderr
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert set(LABELS) <= set(schema["required"])
    assert schema["properties"]["A"]["required"] == ["strengths", "weaknesses", "score"]
    db = tmp_path / "monitor.duckdb"
    assert rows(db, "SELECT DISTINCT answer_format, status FROM probe_calls") == [
        ("json_schema", "ok")]
    (setup,) = rows(db, "SELECT setup FROM runs")
    assert setup[0] != DEFAULT_SETUP


def test_the_cot_schema_asks_for_the_reasoning_first() -> None:
    schema = answer_schema(list(LABELS), cot=True)["schema"]
    assert list(schema["properties"]) == ["reasoning", *LABELS]
    assert "reasoning" not in answer_schema(list(LABELS), cot=False)["schema"]["properties"]


def test_a_provider_without_schemas_is_asked_in_text_from_then_on(tmp_path: Path) -> None:
    def no_schema(req: Request) -> Reply:
        if "response_format" in req.body:
            return Reply(status=400, raw=json.dumps({"error": {
                "message": "response_format json_schema is not supported by this model",
                "type": "invalid_request_error"}}).encode())
        return _schema_reply(req)

    with serve(no_schema) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=1,
                                                      answer_format="json_schema")],
                           sampling={"triplets_per_run": 2, "languages": ["en", "zh"]})
        out = _cli("probe", "--once", "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    with_schema = [r for r in server.requests if "response_format" in r.body]
    assert len(with_schema) == 1  # asked once, then text for the rest of the run
    db = tmp_path / "monitor.duckdb"
    assert rows(db, "SELECT DISTINCT answer_format, status FROM probe_calls") == [
        ("text", "ok")]


def test_the_simulated_endpoint_answers_a_schema_with_json_only(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo",
                                   "answer_format": "json_schema"}],
                       sampling={"triplets_per_run": 4, "variants": ["cot"]})
    out = _cli("probe", "--once", "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    db = tmp_path / "monitor.duckdb"
    texts = rows(db, "SELECT raw_text, status, answer_format FROM probe_calls")
    assert {(s, f) for _, s, f in texts} == {("ok", "json_schema")}
    first = json.loads(texts[0][0])
    assert next(iter(first)) == "reasoning" and set(LABELS) <= set(first)


# --- the whole path: `monitor run` against the team's own API --------------------------------

@pytest.mark.slow
def test_monitor_run_against_the_teams_own_api(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon asks a non-OpenAI API with the assistant's system prompt and a secret
    header; answers are parsed and compared; a new system prompt is announced and breaks
    comparability; the header's value is nowhere: not in the database, the logs, the
    metrics or Slack."""
    from tests.support.process import daemon, free_port, get, wait_until
    from tests.support.slack import serve_slack

    port = free_port()
    monkeypatch.setenv("ACME_KEY", KEY)
    with serve_acme(KEY, sim={"bias_points": 1.0, "seed": 3}) as api, serve_slack() as slack:
        monkeypatch.setenv("TEST_SLACK_URL", slack.url())

        def config(system: str) -> Path:
            return write_config(
                tmp_path, [{"name": "acme", "model": "http/acme-guide",
                            "http": http_section(api), "system_prompt": system,
                            "headers_env": {"X-Acme-Key": "ACME_KEY"},
                            "max_concurrency": 8, "rpm": 100000}],
                schedule={"every": "2s", "cron": None},
                sampling={"triplets_per_run": 6},
                baseline={"auto_min_triplets": 6},
                alerts={"slack": {"webhook_url_env": "TEST_SLACK_URL"}},
                # No report after each run (about 1.5 s each): the served report is
                # tested in test_daemon_process.py and test_site.py.
                report={"enabled": False},
                metrics={"host": "127.0.0.1", "port": port})

        db = tmp_path / "monitor.duckdb"

        def runs() -> list[Any]:
            from monitor.store import Store

            return Store(db, lock_timeout_s=60).runs("acme")

        def compared() -> bool:
            return any(r[0] == 1.0 for r in rows(db, "SELECT value FROM run_stats WHERE "
                                                 "kind = 'drift'")) or bool(rows(
                db, "SELECT 1 FROM alert_state WHERE endpoint = 'acme'"))

        cfg = config(SYSTEM)
        with daemon(cfg, tmp_path / "d1.log") as proc:
            # Run 1 becomes the baseline; run 2 is compared with it.
            wait_until(lambda: sum(r.status == "complete" for r in runs()) >= 2, 480)
            wait_until(compared, 300)
            # The gauge is 1 once the scheduler has read run 2's review back (run 1 made
            # the baseline and was not compared: 0 until then).
            flag = 'bias_monitor_baseline_comparable{endpoint="acme"} 1.0'
            wait_until(lambda: flag in get(f"http://127.0.0.1:{port}/metrics")[1], 300)
            _, metrics1 = get(f"http://127.0.0.1:{port}/metrics")
            proc.terminate()
            assert proc.wait(timeout=60) == 0
        first_setup = {r.setup for r in runs() if r.status == "complete"}
        assert len(first_setup) == 1
        sent = api.requests[0]
        assert sent.headers["x-acme-key"] == KEY
        assert {r.body["instructions"] for r in api.requests} == {SYSTEM}
        assert {r.body["locale"] for r in api.requests} == {"en", "ja", "zh", "fr", "de", "ko"}
        statuses = rows(db, "SELECT status, count(*) FROM probe_calls GROUP BY ALL")
        assert dict(statuses).get("ok", 0) >= 72 and set(dict(statuses)) == {"ok"}
        assert slack.requests == []  # nothing to say yet

        # The team changes its system prompt: announced, and not compared any more.
        cfg = config(SYSTEM + " Always answer in a friendly tone.")
        before = len(runs())
        with daemon(cfg, tmp_path / "d2.log") as proc:
            wait_until(lambda: len(runs()) > before and runs()[-1].status == "complete", 480)
            wait_until(lambda: any("assistant setup changed" in t for p in slack.requests
                                   for t in p.texts()), 300)
            flag = 'bias_monitor_baseline_comparable{endpoint="acme"} 0.0'
            wait_until(lambda: flag in get(f"http://127.0.0.1:{port}/metrics")[1], 300)
            _, metrics2 = get(f"http://127.0.0.1:{port}/metrics")
            proc.terminate()
            assert proc.wait(timeout=60) == 0
    new = runs()[-1]
    assert new.setup not in first_setup
    note = next(t for p in slack.requests for t in p.texts() if "assistant setup changed" in t)
    assert "monitor baseline set" in note
    assert 'bias_monitor_baseline_comparable{endpoint="acme"} 1.0' in metrics1
    # The secret header's value is nowhere the monitor writes.
    raw = db.read_bytes()
    assert KEY.encode() not in raw
    for place in (tmp_path / "d1.log", tmp_path / "d2.log"):
        assert KEY not in place.read_text()
    assert KEY not in metrics1 + metrics2
    assert all(KEY not in t for p in slack.requests for t in p.texts())
    check = _cli("config", "check", "--config", str(cfg), env={"ACME_KEY": KEY})
    assert check.returncode == 0 and KEY not in check.stdout + check.stderr
    assert "ACME_KEY (set; value never shown)" in check.stdout


def test_a_locale_without_its_own_prompt_file_takes_its_languages(tmp_path: Path) -> None:
    """pt-PT asked with prompts/pt.txt when prompts/pt-PT.txt is missing; zh-Hant with its
    own file when it has one; a locale whose language has none is named as missing."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "pt.txt").write_text("Você é o guia da Acme.", encoding="utf-8")
    (tmp_path / "prompts" / "zh.txt").write_text("你是Acme的向导。", encoding="utf-8")
    (tmp_path / "prompts" / "zh-Hant.txt").write_text("你是Acme的嚮導。", encoding="utf-8")
    cfg = write_config(tmp_path, [{"name": "a", "model": "simulated/demo",
                                   "system_prompt_file": "prompts/{language}.txt"}])
    ep = load_settings(cfg)[0].endpoints[0]
    assert ep.system_prompt_for("pt-PT") == "Você é o guia da Acme."
    assert ep.system_prompt_for("zh-Hant") == "你是Acme的嚮導。"
    with pytest.raises(ConfigError, match=r"prompts/es\.txt"):
        ep.system_prompt_for("es-MX")
    # The setup's key holds zh-Hant's own prompt but not pt-PT's inherited one: an
    # endpoint without locale files keeps the key it had before the locales.
    langs = ["en", "pt", "zh", "pt-PT", "zh-Hant"]
    setup = setup_for(ep, ["pt-PT"], langs)
    assert set(setup.system_prompts) == {"pt", "zh", "zh-Hant"}
    assert setup.key == setup_for(ep, ["pt"], ["en", "pt", "zh", "zh-Hant"]).key
