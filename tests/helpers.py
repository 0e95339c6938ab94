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
