"""`monitor probe --once --json` on the built-in demo with --seed 0, pinned.

The pinned document was written before the layout change of issue 13: a
refactoring that changes a number here changed behaviour. Regenerate it only
for a deliberate change of the statistics, the sampling or the catalog (and
say so in the CHANGELOG): `python -m tests.test_behaviour_pin`.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main

GOLDEN = Path(__file__).parent / "golden" / "probe_demo_seed0.json"


def demo_document(cwd: Path) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main(["probe", "--once", "--json", "--seed", "0"])
    assert code == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return json.loads(json.dumps(doc).replace(doc["run_id"], "RUN_ID"))


def test_the_demo_json_is_what_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo writes ./monitor.duckdb
    monkeypatch.delenv("MONITOR_CONFIG", raising=False)
    assert demo_document(tmp_path) == json.loads(GOLDEN.read_text(encoding="utf-8"))


if __name__ == "__main__":
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ.pop("MONITOR_CONFIG", None)
        GOLDEN.write_text(json.dumps(demo_document(Path(tmp)), ensure_ascii=False, indent=1)
                          + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}", file=sys.stderr)
