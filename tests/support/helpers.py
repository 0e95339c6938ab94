"""Small builders shared by the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_config(tmp_path: Path, endpoints: list[dict[str, Any]], **sections: Any) -> Path:
    """A real YAML (JSON is YAML) config file with storage in tmp_path."""
    cfg = {"storage": {"path": str(tmp_path / "monitor.duckdb")}, "endpoints": endpoints,
           "sampling": {"triplets_per_run": 4}, **sections}
    path = tmp_path / "monitor.yaml"
    path.write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    return path


def openai_endpoint(api_base: str, **over: Any) -> dict[str, Any]:
    return {"name": "local", "model": "openai/test-model", "api_base": api_base,
            "api_key_env": None, "max_concurrency": 8, "rpm": 100000,
            "timeout_s": 5, "max_retries": 0, **over}


class DirectSimClient:
    """Answers like the simulated endpoint without HTTP or LiteLLM, for tests
    that need many runs (the LiteLLM path is tested on its own); the model id is the
    one the simulated provider reports for the demo profile."""

    def __init__(self, params: dict[str, Any], catalog_root: Path,
                 model: str = "simulated/demo",
                 fingerprint: str = "fp-sim"):
        from monitor.measure.simulated import SimParams

        self.params = SimParams.from_params({**params, "catalog_path": str(catalog_root)})
        self.model = model
        self.fingerprint = fingerprint

    async def complete(self, messages: list[dict[str, str]], **_: Any) -> Any:
        from monitor.measure.calls import CallResult
        from monitor.measure.simulated import answer

        reply = answer(messages, self.params)
        return CallResult(text=reply.text, error=None, latency_s=0.001,
                          input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                          cost_usd=0.0001, model_id=self.model, fingerprint=self.fingerprint,
                          attempts=1)


def sim_daemon(cfg: Path, catalog: Any, client: Any = None) -> tuple[Any, Any, Any]:
    """(ScheduledRun, Settings, Store) of `cfg`, the daemon's job in-process; each run's client
    is `client(endpoint)`, by default a DirectSimClient of the endpoint's params."""
    from monitor.alerts.outbox import build_sinks
    from monitor.config import load_settings
    from monitor.daemon.scheduled import ScheduledRun
    from monitor.store import open_store

    settings, _ = load_settings(cfg)
    store = open_store(settings.storage)
    factory = client or (lambda ep: DirectSimClient({**ep.params}, catalog.root))
    daemon = ScheduledRun(settings, catalog, store, build_sinks(settings.alerts),
                          client_factory=factory)
    return daemon, settings, store


def store_scores(store: Any, rows: list[dict[str, Any]]) -> None:
    """Write synthetic answered calls and their scores, as a run would. A row:
    run_id, triplet_id, language, label, option_id, country, score (and optionally
    strengths, weaknesses, scenario, variant); the scenario defaults to the triplet
    id's first part, as in a catalog triplet id."""
    from datetime import UTC, datetime

    from monitor.store import CALL_COLUMNS, SCORE_COLUMNS

    calls: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["run_id"], r["triplet_id"], r["language"])
        calls.setdefault(key, {
            **{c: None for c, _ in CALL_COLUMNS}, "run_id": key[0], "triplet_id": key[1],
            "language": key[2], "endpoint": r.get("endpoint", "ep"), "status": "ok",
            "scenario": r.get("scenario", key[1].split("/")[0]),
            "variant": r.get("variant", "plain"), "created_at": datetime.now(UTC)})
    full = [{**{c: None for c, _ in SCORE_COLUMNS}, "is_target": False, **{
        k: v for k, v in r.items() if k in dict(SCORE_COLUMNS)}} for r in rows]
    store.write_batch({c: [x[c] for x in calls.values()] for c, _ in CALL_COLUMNS},
                      {c: [x[c] for x in full] for c, _ in SCORE_COLUMNS})


def metrics_of(store: Any, endpoint: str) -> Any:
    """The metrics snapshot the scheduler reads from the store after a run."""
    from monitor.serve.metrics import MetricsState

    state = MetricsState()
    state.refresh(store, endpoint)
    return state.snapshot()


def recovers(row: Any, expected: float, sds: float = 3.0) -> bool:
    """An MD row's estimate lies within `sds` standard errors of the injected value.

    Recovery tests check many cells at once: asking every 95% CI to cover at once fails
    one draw in two at 14 countries, so any catalogue change (which redraws the sample)
    broke them by chance. Three standard errors per cell (about 4% for 14 cells at once)
    still fails a biased or mis-centred estimator: each cell's error is a handful of
    standard errors when the estimate is off by the bias itself."""
    return bool(abs(row.md - expected) <= sds * row.se)
