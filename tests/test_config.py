"""Configuration: path resolution, env overrides, strict validation, `monitor config check`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main
from monitor.config import (
    Endpoint,
    demo_config_path,
    load_settings,
    parse_every,
    resolve_config_path,
)
from monitor.errors import ConfigError

CANARY = "sk-canary-XYZ"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No MONITOR_* variable of the host leaks in; the cwd is an empty tmp_path."""
    for name in list(os.environ):
        if name.upper().startswith("MONITOR_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def _config(**over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "storage": {"path": "store.duckdb"},
        "endpoints": [{"name": "main", "model": "openai/gpt-4o-mini"}],
        "sampling": {"triplets_per_run": 4, "seed": 3, "languages": ["en", "zh"]},
    }
    cfg.update(over)
    return cfg


def _write(path: Path, cfg: dict[str, Any] | str) -> Path:
    text = cfg if isinstance(cfg, str) else json.dumps(cfg, ensure_ascii=False)
    path.write_text(text, encoding="utf-8")
    return path


def _named(path: Path, name: str) -> Path:
    return _write(path, _config(endpoints=[{"name": name, "model": "openai/x"}]))


def _config_error(path: Path | None) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# -- path resolution ----------------------------------------------------------------------


def test_resolution_order_flag_env_cwd_demo(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    flag = _named(tmp_path / "flag.yaml", "from-flag")
    env = _named(tmp_path / "env.yaml", "from-env")
    cwd = _named(tmp_path / "monitor.yaml", "from-cwd")
    clean_env.setenv("MONITOR_CONFIG", str(env))

    settings, path = load_settings(flag)
    assert (settings.endpoints[0].name, path) == ("from-flag", flag)

    settings, path = load_settings(None)
    assert (settings.endpoints[0].name, path) == ("from-env", env)

    clean_env.delenv("MONITOR_CONFIG")
    settings, path = load_settings(None)
    assert settings.endpoints[0].name == "from-cwd"
    assert path.resolve() == cwd.resolve()

    cwd.unlink()
    settings, path = load_settings(None)
    assert path == demo_config_path() == resolve_config_path(None)
    assert path.name == "demo.yaml" and path.is_file()
    assert [e.simulated for e in settings.endpoints] == [True]
    assert settings.endpoints[0].model.startswith("simulated/")
    assert settings.storage.path == Path("monitor.duckdb")


def test_missing_config_named_by_env_is_an_error_not_the_demo(
        tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    _named(tmp_path / "monitor.yaml", "from-cwd")
    missing = tmp_path / "nowhere" / "gone.yaml"
    clean_env.setenv("MONITOR_CONFIG", str(missing))
    msg = _config_error(None)
    assert str(missing) in msg and "not found" in msg


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "typo.yaml"
    msg = _config_error(missing)
    assert msg.startswith(str(missing)) and "not found" in msg


def test_a_folder_is_not_a_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "conf.d"
    folder.mkdir()
    assert str(folder) in _config_error(folder)


# -- environment overrides ----------------------------------------------------------------


def test_env_overrides_win_and_keep_the_rest_of_the_section(
        tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "c.yaml", _config(metrics={"port": 9000}))
    other = tmp_path / "elsewhere.duckdb"
    clean_env.setenv("MONITOR_SAMPLING__TRIPLETS_PER_RUN", "7")
    clean_env.setenv("MONITOR_STORAGE__PATH", str(other))
    clean_env.setenv("MONITOR_METRICS__HOST", "0.0.0.0")

    settings, _ = load_settings(path)
    assert settings.sampling.triplets_per_run == 7
    assert settings.sampling.seed == 3  # same section, from the YAML
    assert settings.sampling.languages == ["en", "zh"]
    assert settings.storage.path == other
    assert (settings.metrics.host, settings.metrics.port) == ("0.0.0.0", 9000)
    assert [e.name for e in settings.endpoints] == ["main"]


def test_without_env_the_yaml_values_apply(tmp_path: Path) -> None:
    settings, _ = load_settings(_write(tmp_path / "c.yaml", _config()))
    assert settings.sampling.triplets_per_run == 4
    assert settings.storage.path == Path("store.duckdb")


def test_env_override_adds_a_key_the_yaml_left_out(
        tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "c.yaml", _config())
    clean_env.setenv("MONITOR_BUDGET__MAX_PROBES_PER_DAY", "5000")
    settings, _ = load_settings(path)
    assert settings.budget.max_probes_per_day == 5000
    assert settings.budget.max_usd_per_day is None


@pytest.mark.parametrize(("var", "value", "key"), [
    ("MONITOR_SAMPLING__TRIPLETS_PER_RUN", "seven", "sampling.triplets_per_run"),
    ("MONITOR_SAMPLING__TRIPLETS_PER_RUN", "-1", "sampling.triplets_per_run"),
    ("MONITOR_SAMPLING__BOGUS", "1", "sampling.bogus"),
    ("MONITOR_METRICS__PORT", "99999", "metrics.port"),
    ("MONITOR_SCHEDULE__EVERY", "5 minutes", "schedule.every"),
    ("MONITOR_ALERTS__SLACK__BOGUS", "1", "alerts.slack.bogus"),
    ("MONITOR_ENDPOINTS", '[{"name": "x", "model": "openai/x", "rpm": -5}]', "endpoints.0.rpm"),
])
def test_env_caused_error_names_the_variable(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                             var: str, value: str, key: str) -> None:
    path = _write(tmp_path / "c.yaml", _config())
    clean_env.setenv(var, value)
    msg = _config_error(path)
    assert str(path) in msg
    assert key in msg
    assert f"environment {var}" in msg


def test_yaml_caused_error_does_not_blame_the_environment(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.yaml", _config(sampling={"triplets_per_run": -1}))
    msg = _config_error(path)
    assert "sampling.triplets_per_run" in msg
    assert "environment" not in msg


# -- validation ---------------------------------------------------------------------------

EP = {"name": "main", "model": "openai/x"}


@pytest.mark.parametrize(("over", "key", "hint"), [
    ({"bogus": 1}, "bogus", "unknown key"),
    ({"endpoints": [{**EP, "foo": 1}]}, "endpoints.0.foo", "unknown key"),
    ({"sampling": {"bogus": 1}}, "sampling.bogus", "unknown key"),
    ({"alerts": {"slack": {"webhook": "x"}}}, "alerts.slack.webhook", "unknown key"),
    ({"endpoints": [{**EP, "cost_per_1k_tokens": {"in": 1}}]},
     "endpoints.0.cost_per_1k_tokens.in", "unknown key"),
    ({"endpoints": [{**EP, "rpm": "fast"}]}, "endpoints.0.rpm", "integer"),
    ({"endpoints": [{**EP, "rpm": -5}]}, "endpoints.0.rpm", "-5"),
    ({"endpoints": [{**EP, "max_concurrency": 0}]}, "endpoints.0.max_concurrency", "0"),
    ({"endpoints": [{**EP, "max_retries": -1}]}, "endpoints.0.max_retries", "-1"),
    ({"endpoints": [{**EP, "rpm": 10**30}]}, "endpoints.0.rpm", "less than"),
    ({"endpoints": [{**EP, "timeout_s": 1e308}]}, "endpoints.0.timeout_s", "less than"),
    ({"endpoints": [{**EP, "name": "has space"}]}, "endpoints.0.name", "pattern"),
    ({"endpoints": [{**EP, "api_key_env": "1BAD"}]}, "endpoints.0.api_key_env", "pattern"),
    ({"endpoints": [{**EP, "model": ""}]}, "endpoints.0.model", "at least 1"),
    ({"endpoints": [{"name": "main"}]}, "endpoints.0.model", "missing"),
    ({"sampling": {"seed": 2**31}}, "sampling.seed", "less than"),
    ({"sampling": {"seed": -1}}, "sampling.seed", "greater than"),
    ({"sampling": {"triplets_per_run": 10**12}}, "sampling.triplets_per_run", "less than"),
    ({"sampling": {"variants": ["plain", "sarcastic"]}}, "sampling.variants.1", "sarcastic"),
    ({"sampling": {"languages": ["en"]}}, "sampling.languages", "at least 2"),
    ({"metrics": {"port": 70000}}, "metrics.port", "less than"),
    ({"thresholds": {"md_points": 0}}, "thresholds.md_points", "greater than"),
    ({"budget": {"max_usd_per_day": -1}}, "budget.max_usd_per_day", "greater than"),
    ({"schedule": {"every": "5 minutes"}}, "schedule.every", "5 minutes"),
    ({"schedule": {"every": "0s"}}, "schedule.every", "0s"),
    ({"endpoints": [EP, {**EP, "model": "openai/y"}]}, "endpoints", "unique"),
    ({"endpoints": []}, "endpoints", "at least 1"),
    ({"endpoints": None}, "endpoints", "list"),
    ({"storage": "monitor.duckdb"}, "storage", "storage"),
])
def test_invalid_config_is_one_line_naming_file_and_key(tmp_path: Path, over: dict[str, Any],
                                                        key: str, hint: str) -> None:
    path = _write(tmp_path / "bad.yaml", _config(**over))
    msg = _config_error(path)
    assert msg.startswith(f"{path}: {key}: "), msg
    assert hint in msg


def test_missing_endpoints_key_is_named(tmp_path: Path) -> None:
    cfg = _config()
    del cfg["endpoints"]
    path = _write(tmp_path / "c.yaml", cfg)
    msg = _config_error(path)
    assert msg.startswith(f"{path}: endpoints: ") and "missing" in msg


@pytest.mark.parametrize("text", [
    "endpoints: [\n  - name: a\n  bad: : :\n",        # YAML syntax error
    "endpoints:\n\t- name: a\n",                       # tab indentation
    "- just\n- a list\n",                              # not a mapping
    "",                                                # empty file
])
def test_unreadable_yaml_is_a_one_line_config_error(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path / "broken.yaml", text)
    assert str(path) in _config_error(path)


def test_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"endpoints: \xff\xfe\x00\x81\n")
    assert str(path) in _config_error(path)


def test_the_contract_example_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path / "full.yaml", """\
storage:    {path: monitor.duckdb}
catalog:    {path: null}
endpoints:
  - name: gpt4o-prod
    model: openai/gpt-4o
    api_base: null
    api_key_env: OPENAI_API_KEY
    max_concurrency: 8
    rpm: 300
    timeout_s: 60
    max_retries: 3
    params: {temperature: 0.7, max_tokens: 900}
    cost_per_1k_tokens: {input: null, output: null}
sampling:   {triplets_per_run: 40, scenarios: [university, relocation,
             travel], languages: [en, ja, zh, fr, de, ko],
             variants: [plain, cot, female, male], seed: 0}
schedule:   {every: 6h}
thresholds: {md_points: 0.5, jsd_excess_bits: 0.02, drift_md_points: 0.3}
alerts:     {slack: {webhook_url_env: SLACK_WEBHOOK_URL}, cooldown_minutes:
             360, min_runs_firing: 2}
metrics:    {host: 127.0.0.1, port: 9464}
budget:     {max_usd_per_day: null, max_probes_per_day: null}
""")
    s, _ = load_settings(path)
    ep = s.endpoints[0]
    assert (ep.name, ep.model, ep.api_key_env, ep.rpm) == ("gpt4o-prod", "openai/gpt-4o",
                                                           "OPENAI_API_KEY", 300)
    assert ep.params == {"temperature": 0.7, "max_tokens": 900}
    assert not ep.simulated
    assert s.sampling.languages == ["en", "ja", "zh", "fr", "de", "ko"]
    assert s.schedule.every == "6h"
    assert parse_every(s.schedule.every) == 6 * 3600
    assert s.alerts.min_runs_firing == 2


def test_unicode_values_survive(tmp_path: Path) -> None:
    path = _write(tmp_path / "u.yaml", _config(endpoints=[
        {"name": "zh", "model": "openai/x", "params": {"system_hint": "请用中文回答"}}]))
    s, _ = load_settings(path)
    assert s.endpoints[0].params == {"system_hint": "请用中文回答"}


# -- parse_every --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("15m", 900), ("6h", 21600), ("1d", 86400), ("90m", 5400),
])
def test_parse_every(text: str, seconds: int) -> None:
    assert parse_every(text) == seconds


@pytest.mark.parametrize("text", ["0s", "0m", "10", "1w", "", "s", "-5m", "1.5h", "5 minutes",
                                  "6H", "6 h"])
def test_parse_every_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="interval"):
        parse_every(text)


# -- Endpoint.api_key ---------------------------------------------------------------------


def test_api_key_is_read_from_the_named_variable(clean_env: pytest.MonkeyPatch) -> None:
    ep = Endpoint(name="main", model="openai/x", api_key_env="SOME_VAR")
    clean_env.delenv("SOME_VAR", raising=False)
    assert ep.api_key() is None
    clean_env.setenv("SOME_VAR", CANARY)
    assert ep.api_key() == CANARY
    assert CANARY not in repr(ep) and CANARY not in ep.model_dump_json()


def test_api_key_is_none_without_api_key_env() -> None:
    assert Endpoint(name="main", model="openai/x").api_key() is None


# -- `monitor config check` ---------------------------------------------------------------


def _check(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str, str]:
    code = main(["config", "check", "--config", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def _json_after_comment(out: str) -> dict[str, Any]:
    first, _, rest = out.partition("\n")
    assert first.startswith("#"), first
    data: dict[str, Any] = json.loads(rest)
    return data


def test_config_check_prints_the_effective_configuration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        clean_env: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "c.yaml", _config())
    clean_env.setenv("MONITOR_SAMPLING__TRIPLETS_PER_RUN", "9")
    clean_env.setenv("SLACK_WEBHOOK_URL", "https://hooks.example/T/B/x")  # a sink that can send
    code, out, err = _check(capsys, path)
    assert code == 0, err
    assert err == ""
    assert str(path) in out.splitlines()[0]
    data = _json_after_comment(out)
    assert data["sampling"]["triplets_per_run"] == 9
    assert data["sampling"]["seed"] == 3
    assert data["storage"]["path"] == "store.duckdb"
    assert [e["name"] for e in data["endpoints"]] == ["main"]
    assert data["endpoints"][0]["rpm"] == 300  # defaults are shown too
    assert data["metrics"] == {"host": "127.0.0.1", "port": 9464}


def test_config_check_of_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check"]) == 0
    data = _json_after_comment(capsys.readouterr().out)
    assert data["endpoints"][0]["model"].startswith("simulated/")
    assert data["storage"]["path"] == "monitor.duckdb"


def test_config_check_never_prints_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           clean_env: pytest.MonkeyPatch) -> None:
    hook = "https://hooks.slack.com/services/T000/B000/canaryHOOK"
    clean_env.setenv("SOME_VAR", CANARY)
    clean_env.setenv("SLACK_WEBHOOK_URL", hook)
    path = _write(tmp_path / "c.yaml", _config(endpoints=[
        {"name": "main", "model": "openai/x", "api_key_env": "SOME_VAR",
         "api_base": "https://user:pass@host/v1"},
        {"name": "unset", "model": "openai/x", "api_key_env": "UNSET_VAR_FOR_TEST"}]))
    clean_env.delenv("UNSET_VAR_FOR_TEST", raising=False)
    code, out, err = _check(capsys, path)
    assert code == 0, err
    for secret in (CANARY, "pass", "canaryHOOK"):
        assert secret not in out and secret not in err, secret
    data = _json_after_comment(out)
    main_ep, unset_ep = data["endpoints"]
    assert "SOME_VAR" in main_ep["api_key_env"]
    assert "set" in main_ep["api_key_env"] and "NOT SET" not in main_ep["api_key_env"]
    assert "UNSET_VAR_FOR_TEST" in unset_ep["api_key_env"]
    assert "NOT SET" in unset_ep["api_key_env"]
    assert main_ep["api_base"].startswith("https://") and main_ep["api_base"].endswith("@host/v1")
    assert "SLACK_WEBHOOK_URL" in data["alerts"]["slack"]["webhook_url_env"]


def test_config_check_keeps_an_api_base_without_credentials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = "http://127.0.0.1:8000/v1"
    path = _write(tmp_path / "c.yaml", _config(endpoints=[{**EP, "api_base": base}]))
    code, out, _ = _check(capsys, path)
    assert code == 0
    assert _json_after_comment(out)["endpoints"][0]["api_base"] == base


@pytest.mark.parametrize(("content", "key"), [
    (_config(bogus=1), "bogus"),
    (_config(endpoints=[{**EP, "rpm": -5}]), "endpoints.0.rpm"),
    (_config(schedule={"every": "5 minutes"}), "schedule.every"),
    ("endpoints: [\n  - name: a\n  bad: : :\n", None),
    (None, None),  # no such file
])
def test_config_check_of_a_bad_config_exits_2_with_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        content: dict[str, Any] | str | None, key: str | None) -> None:
    path = tmp_path / "bad.yaml"
    if content is not None:
        _write(path, content)
    code, out, err = _check(capsys, path)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    assert lines[0].startswith("monitor: error: ")
    assert str(path) in lines[0]
    if key is not None:
        assert f" {key}: " in lines[0]


def test_config_check_names_the_env_variable_of_a_bad_override(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        clean_env: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "c.yaml", _config())
    clean_env.setenv("MONITOR_ENDPOINTS", '[{"name": "x", "model": "m", "max_concurrency": 0}]')
    code, out, err = _check(capsys, path)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert "endpoints.0.max_concurrency" in err and "MONITOR_ENDPOINTS" in err


# -- report: the served report folder and the alerts' link --------------------------------


def test_report_defaults_beside_the_database_and_links_under_the_base_url(
        tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    s, _ = load_settings(_write(tmp_path / "c.yaml", _config(storage={"path": "/data/m.duckdb"})))
    assert s.report.enabled and s.report.keep_runs == 50 and s.report.link("r1") is None
    assert s.report.folder(s.storage.path) == Path("/data/reports")
    clean_env.setenv("MONITOR_REPORT__BASE_URL", "https://bias.internal:9464/")
    clean_env.setenv("MONITOR_REPORT__DIR", "/srv/reports")
    s, _ = load_settings(tmp_path / "c.yaml")
    assert s.report.folder(s.storage.path) == Path("/srv/reports")
    assert s.report.link("prod-1 x") == "https://bias.internal:9464/report/prod-1%20x/"
    assert s.report.link(None) is None


@pytest.mark.parametrize("url, hint", [
    ("https://user:hunter2pass@bias.internal", "credentials"),
    ("ftp://bias.internal", "http(s)"),
    ("bias.internal:9464", "http(s)"),
    ("https://bias.internal/?token=abc", "query"),
    ("https://bias.internal/a|b", "<>|"),
])
def test_a_bad_report_base_url_is_one_line_that_does_not_echo_it(
        tmp_path: Path, url: str, hint: str) -> None:
    path = _write(tmp_path / "c.yaml", _config(report={"base_url": url}))
    msg = _config_error(path)
    assert msg.startswith(f"{path}: report.base_url: ") and hint in msg, msg
    assert url not in msg and "hunter2pass" not in msg


# -- issue 34: misspellings, every problem at once, before any heavy import ----------------


def test_an_unknown_environment_section_is_an_error_naming_the_section_meant(
        tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "c.yaml", _config())
    # Another program's variables without `__` are left alone (Kubernetes sets these for a
    # Service named `monitor`), as is the config path.
    clean_env.setenv("MONITOR_PORT", "tcp://10.0.0.1:9464")
    clean_env.setenv("MONITOR_SERVICE_HOST", "10.0.0.1")
    clean_env.setenv("MONITOR_CONFIG", str(path))
    assert load_settings(path)[0].sampling.triplets_per_run == 4
    clean_env.setenv("MONITOR_SAMPLNG__TRIPLETS_PER_RUN", "5")
    msg = _config_error(path)
    assert msg == (f"{path}: environment MONITOR_SAMPLNG__TRIPLETS_PER_RUN: no configuration "
                   "section 'samplng'; did you mean MONITOR_SAMPLING__TRIPLETS_PER_RUN?")
    clean_env.delenv("MONITOR_SAMPLNG__TRIPLETS_PER_RUN")
    clean_env.setenv("MONITOR_ENDPOINT", '[{"name": "x", "model": "openai/x"}]')  # JSON: meant
    assert "did you mean MONITOR_ENDPOINTS?" in _config_error(path)


@pytest.mark.parametrize(("cfg", "var", "wanted"), [
    (_config(sampling={"triplets_pr_run": 5}), None,
     "sampling.triplets_pr_run: unknown key; did you mean triplets_per_run?"),
    (_config(endpoints=[{"name": "main", "modle": "openai/x", "model": "openai/x"}]), None,
     "endpoints.0.modle: unknown key; did you mean model?"),
    (_config(alerts={"slack": {"webhook_url_evn": "X"}}), None,
     "alerts.slack.webhook_url_evn: unknown key; did you mean webhook_url_env?"),
    (_config(), ("MONITOR_SAMPLING__TRIPLETS_PR_RUN", "5"),
     "unknown key; did you mean MONITOR_SAMPLING__TRIPLETS_PER_RUN? (from environment "
     "MONITOR_SAMPLING__TRIPLETS_PR_RUN)"),
    (_config(sampling={"zzzz": 5}), None,
     "sampling.zzzz: unknown key; remove it or check its spelling"),
])
def test_a_misspelled_key_names_the_key_meant(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                              cfg: dict[str, Any], var: tuple[str, str] | None,
                                              wanted: str) -> None:
    path = _write(tmp_path / "c.yaml", cfg)
    if var:
        clean_env.setenv(*var)
    assert wanted in _config_error(path)


def test_every_problem_is_listed_on_one_line(tmp_path: Path,
                                            clean_env: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "c.yaml", _config(endpoints=[{"name": "main"}],
                                               sampling={"triplets_pr_run": 5}))
    clean_env.setenv("MONITOR_SAMPLNG__SEED", "1")
    msg = _config_error(path)
    assert msg.startswith(f"{path}: 3 problems: (1) environment MONITOR_SAMPLNG__SEED: ")
    assert "(2) endpoints.0.model: required key is missing" in msg
    assert "(3) sampling.triplets_pr_run: unknown key; did you mean triplets_per_run?" in msg
    assert "more]" not in msg


@pytest.mark.parametrize(("schedule", "env", "cron", "every", "warned"), [
    ({"every": "15m"}, None, None, "15m", False),
    ({}, "6h", None, "6h", False),
    ({"cron": "0 * * * *"}, "6h", None, "6h", True),
    ({}, None, "0 */6 * * *", None, False),
])
def test_config_check_shows_the_schedule_that_applies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clean_env: pytest.MonkeyPatch,
        schedule: dict[str, str], env: str | None, cron: str | None, every: str | None,
        warned: bool) -> None:
    path = _write(tmp_path / "c.yaml", _config(schedule=schedule))
    if env:
        clean_env.setenv("MONITOR_SCHEDULE__EVERY", env)
    code, out, err = _check(capsys, path)
    assert code == 0, err
    assert _json_after_comment(out)["schedule"] == {"cron": cron, "every": every,
                                                    "max_concurrent_runs": 2}
    assert ("schedule.cron '0 * * * *' is ignored: schedule.every (6h) applies" in err) == warned


def test_a_config_error_comes_before_any_heavy_import(tmp_path: Path) -> None:
    """Every command validates its configuration before it imports LiteLLM, DuckDB,
    pandas, matplotlib or APScheduler: a config error in well under a second."""
    import subprocess
    import sys

    path = _write(tmp_path / "c.yaml", _config(sampling={"triplets_pr_run": 5}))
    c = ["--config", str(path)]
    argvs = [["probe", "--once", *c], ["baseline", "calibrate", *c], ["baseline", "set",
             "--latest", *c], ["baseline", "show", *c], ["report", *c], ["runs", *c],
             ["export", "--parquet", str(tmp_path / "x"), *c], ["plan", *c],
             ["config", "check", *c], ["run", *c]]
    code = ("import io, json, sys, time\n"
            "from contextlib import redirect_stderr\n"
            "from monitor.cli import main\n"
            "out = []\n"
            f"for argv in {argvs!r}:\n"
            "    t = time.monotonic()\n"
            "    with redirect_stderr(io.StringIO()) as err:\n"
            "        rc = main(argv)\n"
            "    out.append([argv[0], rc, time.monotonic() - t, err.getvalue()])\n"
            "heavy = ['litellm', 'duckdb', 'pandas', 'scipy', 'matplotlib', 'apscheduler']\n"
            "print(json.dumps([out, [m for m in heavy if m in sys.modules]]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results, imported = json.loads(proc.stdout)
    assert imported == []
    for name, rc, seconds, err in results:
        assert rc == 2 and "did you mean triplets_per_run?" in err, (name, err)
        assert seconds < 1.0, (name, seconds)


def test_a_dead_key_is_accepted_with_a_warning_naming_what_replaced_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        clean_env: pytest.MonkeyPatch) -> None:
    cfg = _config()
    cfg["alerts"] = {"cooldown_minutes": 360}
    code, _, err = _check(capsys, _write(tmp_path / "old.yaml", cfg))
    assert code == 0
    [line] = [x for x in err.splitlines() if "cooldown_minutes" in x]
    assert "deprecated" in line and "thresholds.cusum_h" in line and "remove" in line
    code, _, err = _check(capsys, _write(tmp_path / "new.yaml", _config()))
    assert code == 0 and "deprecated" not in err


def test_config_check_warns_when_no_sink_can_deliver(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        clean_env: pytest.MonkeyPatch) -> None:
    """Slack's variable unset is said (one line naming it), and so is the consequence:
    no sink can deliver, so pages wait in the outbox (they are not dropped)."""
    clean_env.delenv("SLACK_WEBHOOK_URL", raising=False)
    code, _, err = _check(capsys, _write(tmp_path / "c.yaml", _config()))
    assert code == 0
    lines = [x for x in err.splitlines() if x.startswith("monitor: warning:")]
    assert any("alerts.slack.webhook_url_env: environment variable SLACK_WEBHOOK_URL is "
               "not set, so Slack gets no alerts" in x for x in lines)
    assert any("no sink can deliver - messages wait in the outbox" in x for x in lines)
