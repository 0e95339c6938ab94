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
    that need many runs (the LiteLLM path is tested on its own)."""

    def __init__(self, params: dict[str, Any], catalog_root: Path, model: str = "simulated/x",
                 fingerprint: str = "fp-sim"):
        from monitor.measure.simulated import SimParams

        self.params = SimParams.from_params({**params, "catalog_path": str(catalog_root)})
        self.model = model
        self.fingerprint = fingerprint

    async def complete(self, messages: list[dict[str, str]]) -> Any:
        from monitor.measure.llm import CallResult
        from monitor.measure.simulated import answer

        reply = answer(messages, self.params)
        return CallResult(reply.text, None, 0.001, reply.input_tokens, reply.output_tokens,
                          0.0001, self.model, self.fingerprint, 1)
