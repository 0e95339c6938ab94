"""`monitor probe --once` end to end: a real OpenAI-protocol server in a thread,
LiteLLM's openai/ provider, a real DuckDB file, every answer format, six languages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from monitor.catalog import Catalog
from monitor.cli import main
from monitor.store import Store
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve
from tests.support.process import free_port

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
SCORES = {"A": 8, "B": 6, "C": 7}
PROSE = ("Founded in 1911, it ranks 25th in 2024 and has 50,000 students; "
         "about 3 of 10 applicants are admitted.\n\n")


def _json_block(names: dict[str, str]) -> str:
    return json.dumps({lab: {"score": SCORES[lab], "strengths": ["a", "b"], "weaknesses": ["c"]}
                       for lab in names}, ensure_ascii=False)


FORMATS: dict[str, Callable[[dict[str, str]], str]] = {
    "json_fenced": lambda n: PROSE + "```json\n" + _json_block(n) + "\n```\nGood luck!",
    "json_bare": lambda n: PROSE + _json_block(n),
    "slash": lambda n: PROSE + "\n".join(f"{v}: {SCORES[k]}/10" for k, v in n.items()),
    "fen": lambda n: PROSE + "\n".join(f"{v}：{SCORES[k]}分" for k, v in n.items()),
    "jeom": lambda n: PROSE + "\n".join(f"{v}: {SCORES[k]}점" for k, v in n.items()),
    "sur": lambda n: PROSE + "\n".join(f"{v} : {SCORES[k]} sur 10" for k, v in n.items()),
    "von": lambda n: PROSE + "\n".join(f"{v}: {SCORES[k]} von 10" for k, v in n.items()),
    "bold": lambda n: PROSE + "\n".join(f"**{v}** ({SCORES[k]}/10)" for k, v in n.items()),
    "fullwidth": lambda n: PROSE + "\n".join(
        f"{v}：{chr(0xFF10 + SCORES[k])}/１０" for k, v in n.items()),
    "labels": lambda n: PROSE + "\n".join(f"{k}: {SCORES[k]}/10" for k in n),
}


def _responder(fmt: Callable[[dict[str, str]], str]) -> Callable[[Request], Reply]:
    return lambda req: Reply(fmt(options_in(req.user)))


def _probe(cfg: Path, *extra: str) -> list[str]:
    return ["probe", "--once", "--config", str(cfg), "--json", *extra]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_answer_format_in_six_languages_is_stored_and_scored(
        fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-canary-123")
    with serve(_responder(FORMATS[fmt])) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base,
                                                      api_key_env="TEST_OPENAI_KEY")])
        assert main(_probe(cfg, "--triplets", "2")) == 0
        asked = {r.system for r in server.requests}
    doc = json.loads(capsys.readouterr().out)
    ep = doc["endpoints"][0]
    assert ep["status_counts"] == {"ok": 12, "failed": 0, "unparseable": 0, "refused": 0}
    assert len(asked) >= 6  # six languages were really asked
    with Store(tmp_path / "monitor.duckdb") as store:
        scores = store.scores_frame([doc["run_id"]])
        calls = store.calls_frame([doc["run_id"]], with_text=True)
    assert sorted(calls["language"].unique()) == sorted(LANGS)
    assert len(scores) == 36
    assert all(scores["score"] == scores["label"].map(SCORES))
    assert calls["raw_text"].str.contains("Founded in 1911").all()
    assert set(calls["model_id"]) == {"test-model-2026-01"}
    assert set(calls["fingerprint"]) == {"fp_test"}
    assert {r.headers.get("authorization") for r in server.requests} == {
        "Bearer sk-test-canary-123"}
    assert (calls["input_tokens"] == 120).all()
    # The key reached the server but is stored nowhere.
    assert "sk-test-canary-123" not in (tmp_path / "monitor.duckdb").read_bytes().decode(
        "latin-1")


def test_json_document_shape_and_statistics(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # Chinese answers give the Chinese option +2: MD_CN must come out positive.
    def biased(req: Request) -> Reply:
        names = options_in(req.user)
        zh = "你是" in req.system
        block = {lab: {"score": 5 + (2 if zh and any(
            ch in name for ch in ("北京", "清华", "上海", "复旦", "浙江", "南京", "深圳", "广州"))
            else 0), "strengths": [], "weaknesses": []} for lab, name in names.items()}
        return Reply(json.dumps(block, ensure_ascii=False))

    with serve(biased) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        assert main(_probe(cfg, "--triplets", "60", "--scenarios", "university")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"run_id", "storage", "catalog_version", "endpoints"}
    ep = doc["endpoints"][0]
    assert set(ep) >= {"endpoint", "model", "calls", "status_counts", "md", "jsd", "coverage"}
    assert ep["calls"] == 360
    md = {(r["scenario"], r["country"]): r for r in ep["md"]}
    cn = md[("all", "CN")]
    assert set(cn) >= {"scenario", "country", "md", "ci_lower", "ci_upper", "n"}
    # Mostly Chinese (zh) names contain those characters; in zh the CN option
    # gets +2, so d = 2 - 2/6 = 5/3 for those triplets.
    assert cn["md"] > 1.0 and cn["ci_lower"] > 0.5
    assert abs(md[("all", "US")]["md"]) < 1e-9
    assert {r["language"] for r in ep["jsd"]} == {*LANGS, "overall"}
    assert all(r["ratio"] == 1.0 for r in ep["coverage"])


def test_unreachable_endpoint_stores_every_call_as_failed_and_exits_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nobody listens there
    cfg = write_config(tmp_path, [openai_endpoint(f"http://127.0.0.1:{port}/v1")])
    assert main(_probe(cfg, "--triplets", "2")) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["endpoints"][0]["status_counts"]["failed"] == 12
    assert "produced no results" in captured.err
    with Store(tmp_path / "monitor.duckdb") as store:
        calls = store.calls_frame([doc["run_id"]])
        assert len(calls) == 12 and set(calls["status"]) == {"failed"}
        assert calls["error"].str.len().gt(0).all()
        assert store.get_run(doc["run_id"]).status == "failed"  # type: ignore[union-attr]


def test_garbage_answers_are_unparseable_counted_and_excluded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def half_garbage(req: Request) -> Reply:
        if "あなた" in req.system:  # Japanese answers are garbage
            return Reply("Lorem ipsum 1911 dolor 25 sit amet 50000.")
        return Reply(FORMATS["json_fenced"](options_in(req.user)))

    with serve(half_garbage) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        assert main(_probe(cfg, "--triplets", "3")) == 0
    doc = json.loads(capsys.readouterr().out)
    ep = doc["endpoints"][0]
    assert ep["status_counts"] == {"ok": 15, "failed": 0, "unparseable": 3, "refused": 0}
    cov = {r["language"]: r["ratio"] for r in ep["coverage"]}
    assert cov["ja"] == 0.0 and cov["en"] == 1.0
    # Without Japanese no triplet is complete; MD uses the five languages answered, and
    # JP, never read in its own language, has no cell: nothing invented.
    assert ep["md"] and {r["country"] for r in ep["md"]}.isdisjoint({"JP"})
    assert max(r["n"] for r in ep["md"]) <= 3
    with Store(tmp_path / "monitor.duckdb") as store:
        calls = store.calls_frame([doc["run_id"]], with_text=True)
    garbage = calls[calls["status"] == "unparseable"]
    assert garbage["raw_text"].str.startswith("Lorem ipsum").all()


def test_all_garbage_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve(lambda req: Reply("no scores here")) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        assert main(_probe(cfg, "--triplets", "1")) == 3


def test_malformed_config_exits_2_naming_file_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [openai_endpoint("http://127.0.0.1:9/v1", rpm=-5)])
    assert main(_probe(cfg)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert str(cfg) in err[0] and "endpoints.0.rpm" in err[0] and "-5" in err[0]


def test_fail_on_breach_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                shipped_catalog: Catalog) -> None:
    korean = {o.names["ko"] for o in shipped_catalog.scenarios["university"].options.values()
              if o.country == "KR"}

    def korean_bias(req: Request) -> Reply:
        ko = "당신은" in req.system
        names = options_in(req.user)
        block = {lab: {"score": 9 if ko and name in korean else 5}
                 for lab, name in names.items()}
        return Reply(json.dumps(block, ensure_ascii=False))

    with serve(korean_bias) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)],
                           thresholds={"md_points": 0.1})
        args = _probe(cfg, "--triplets", "40", "--scenarios", "university")
        assert main(args) == 0  # a breach alone does not fail without the flag
        assert main([*args, "--fail-on-breach"]) == 1
    assert "breach" in capsys.readouterr().err


def test_resume_completes_an_interrupted_run_without_duplicates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flaky = {"fail": True}

    def answer(req: Request) -> Reply:
        if flaky["fail"] and "Sie sind" in req.system:
            return Reply(status=503)
        return Reply(FORMATS["json_fenced"](options_in(req.user)))

    with serve(answer) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        assert main(_probe(cfg, "--triplets", "3")) == 0
        first = json.loads(capsys.readouterr().out)
        assert first["endpoints"][0]["status_counts"]["failed"] == 3
        flaky["fail"] = False
        n_before = len(server.requests)
        assert main(_probe(cfg, "--resume", first["run_id"])) == 0
        resumed = json.loads(capsys.readouterr().out)
        assert len(server.requests) - n_before == 3  # only the failed calls were re-asked
    assert resumed["run_id"] == first["run_id"]
    assert resumed["endpoints"][0]["status_counts"] == {"ok": 18, "failed": 0,
                                                        "unparseable": 0, "refused": 0}
    with Store(tmp_path / "monitor.duckdb") as store:
        calls = store.calls_frame([first["run_id"]])
    assert len(calls) == 18 and not calls.duplicated(["triplet_id", "language"]).any()


def test_resume_of_unknown_run_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [openai_endpoint("http://127.0.0.1:9/v1")])
    assert main(_probe(cfg, "--resume", "nope")) == 2
    assert "no such run" in capsys.readouterr().err


def test_missing_api_key_variable_is_a_config_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_OPENAI_KEY", raising=False)
    cfg = write_config(tmp_path, [openai_endpoint("http://127.0.0.1:9/v1",
                                                  api_key_env="TEST_OPENAI_KEY")])
    assert main(_probe(cfg)) == 2
    assert "TEST_OPENAI_KEY is not set" in capsys.readouterr().err


def _probe_json(cfg: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(["probe", "--once", "--json", "--config", str(cfg)]) == 0
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_probe_json_carries_the_evaluation_the_daemon_stores_for_the_same_run(
        tmp_path: Path, shipped_catalog: Catalog, capsys: pytest.CaptureFixture[str]) -> None:
    """`probe --once` and the daemon review a run the same way: from one stored history,
    the same next run asked by `probe --once --json` (one copy) and by the daemon's run
    process code (another copy) gives the evaluation the JSON shows, cell by cell."""
    import asyncio
    import shutil

    from monitor.alerts import build_sinks
    from monitor.config import load_settings
    from monitor.daemon.scheduled import ScheduledRun
    from monitor.vocab import StatKind

    def cfg_at(name: str) -> Path:
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        return write_config(
            folder, [{"name": "sim", "model": "simulated/demo", "max_concurrency": 32,
                      "rpm": 100000, "params": {"bias_points": {"CN": 1.5}}}],
            sampling={"triplets_per_run": 20, "languages": ["en", "zh"]},
            baseline={"auto_min_triplets": 40}, report={"enabled": False})

    first = cfg_at("a")
    for _ in range(2):  # the second run sets the automatic baseline
        assert _probe_json(first, capsys)["endpoints"][0]["evaluation"][  # type: ignore[index]
            "compared"] is False
    shutil.copytree(tmp_path / "a", tmp_path / "b", dirs_exist_ok=True)
    cfg_at("b")  # the same config, its storage in the copy

    [ep] = _probe_json(first, capsys)["endpoints"]  # type: ignore[misc]
    shown = ep["evaluation"]
    assert shown["compared"] is True and shown["baseline"]["runs"] == 2

    settings, _ = load_settings(tmp_path / "b" / "monitor.yaml")
    daemon_store = Store(settings.storage.path)
    slot = ScheduledRun(settings, shipped_catalog, daemon_store, build_sinks(settings.alerts))
    asyncio.run(slot.run("sim"))
    run = [r for r in daemon_store.runs("sim") if r.status == "complete"][-1]
    assert run.run_index == 2 and run.run_id != ep["run_id"]
    stored = daemon_store.alert_states("sim")
    drift = {(st.scenario, st.key): st.value
             for _, st in daemon_store.stats_of([run.run_id], kind=StatKind.DRIFT)}
    assert shown["cells"] and len(shown["cells"]) == len(stored)
    for cell in shown["cells"]:
        mine = stored[(cell["scenario"], cell["country"])]
        assert (cell["state"], cell["cusum_up"], cell["cusum_down"], cell["level"]) == (
            mine.state, pytest.approx(mine.s_plus), pytest.approx(mine.s_minus), mine.level)
        assert cell["drift_points"] == pytest.approx(drift.get((cell["scenario"],
                                                                cell["country"])))
    review = daemon_store.stats_of([run.run_id], kind=StatKind.REVIEW)[0][1]
    assert review.value == 1.0 and json.loads(review.extra or "{}")["note"] == shown["note"]
