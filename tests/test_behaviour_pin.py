"""`monitor probe --once --json` on the built-in demo with --seed 0, pinned.

The pinned document was written before the layout change of issue 13: a
refactoring that changes a number here changed behaviour. Everything must be
equal - keys, order, strings, counts - and every float to 1e-9 relative: the
one statistics engine sums the differences exactly in integers, where the
old pandas path rounded at each float addition, so the last bits of a mean
moved (by 1e-16), and nothing else may. Regenerate it only for a deliberate
change of the statistics, the sampling or the catalog (and say so in the
CHANGELOG): `python -m tests.test_behaviour_pin`.
"""

from __future__ import annotations

import io
import json
import math
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


def same(got: Any, want: Any, where: str = "") -> list[str]:
    """Where `got` differs from `want` (floats to 1e-9 relative, all else exactly)."""
    if isinstance(want, float) and isinstance(got, float | int) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12) else [
            f"{where}: {got!r} != {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if list(got) != list(want):
            return [f"{where}: keys {list(got)} != {list(want)}"]
        return [d for k in want for d in same(got[k], want[k], f"{where}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True))
                for d in same(g, w, f"{where}[{i}]")]
    return [] if got == want and type(got) is type(want) else [f"{where}: {got!r} != {want!r}"]


def test_the_demo_json_is_what_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo writes ./monitor.duckdb
    monkeypatch.delenv("MONITOR_CONFIG", raising=False)
    assert same(demo_document(tmp_path), json.loads(GOLDEN.read_text(encoding="utf-8"))) == []


def test_the_comparison_finds_a_changed_number() -> None:
    want = {"md": [{"n": 5, "md": 0.5, "country": "CN"}]}
    assert same({"md": [{"n": 5, "md": 0.5 + 1e-15, "country": "CN"}]}, want) == []
    assert same({"md": [{"n": 5, "md": 0.5001, "country": "CN"}]}, want) != []
    assert same({"md": [{"n": 6, "md": 0.5, "country": "CN"}]}, want) != []
    assert same({"md": [{"md": 0.5, "n": 5, "country": "CN"}]}, want) != []  # key order


if __name__ == "__main__":
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ.pop("MONITOR_CONFIG", None)
        GOLDEN.write_text(json.dumps(demo_document(Path(tmp)), ensure_ascii=False, indent=1)
                          + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}", file=sys.stderr)
