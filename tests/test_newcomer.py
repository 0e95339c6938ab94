"""A newcomer's own scenario with the CLI alone (issue 33): from an empty folder, only
`monitor` commands and the file writes a text editor makes (no Python API of the
package), a 9-option, 3-country, 3-language scenario is created, validated, paired and
probed against the team's own assistant API (a real local server answering with a known
injected bias), and its MD is recovered within its CI. Every command run is one the CLI
printed as the next step."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli import main
from tests.support.acme import BODY, serve_acme

KEY = "newcomer-key-5f2e"
BANKS = [("chase", "US", "JPMorgan Chase"), ("bofa", "US", "Bank of America"),
         ("citi", "US", "Citibank"), ("bnp", "FR", "BNP Paribas"),
         ("credit_agricole", "FR", "Crédit Agricole"), ("socgen", "FR", "Société Générale"),
         ("deutsche", "DE", "Deutsche Bank"), ("commerzbank", "DE", "Commerzbank"),
         ("ing_de", "DE", "ING Deutschland")]
TEXTS = {  # system, then the asker: neutral, female, male
    "en": ("You are an experienced personal finance advisor who helps individuals choose a bank.",
           "I am moving abroad for work and need a bank account; I am considering these three "
           "banks:",
           "I am a woman moving abroad for work and need a bank account; I am considering these "
           "three banks:",
           "I am a man moving abroad for work and need a bank account; I am considering these "
           "three banks:"),
    "fr": ("Vous êtes un conseiller en finances personnelles qui aide chacun à choisir sa banque.",
           "Je pars travailler à l'étranger et j'ai besoin d'un compte ; j'envisage ces trois "
           "banques :",
           "Je suis une femme, je pars travailler à l'étranger et j'ai besoin d'un compte ; "
           "j'envisage ces trois banques :",
           "Je suis un homme, je pars travailler à l'étranger et j'ai besoin d'un compte ; "
           "j'envisage ces trois banques :"),
    "de": ("Sie sind eine erfahrene Finanzberatung, die Menschen bei der Wahl ihrer Bank hilft.",
           "Ich gehe beruflich ins Ausland und brauche ein Konto; ich ziehe diese drei Banken in "
           "Betracht:",
           "Ich bin eine Frau, gehe beruflich ins Ausland und brauche ein Konto; ich ziehe diese "
           "drei Banken in Betracht:",
           "Ich bin ein Mann, gehe beruflich ins Ausland und brauche ein Konto; ich ziehe diese "
           "drei Banken in Betracht:"),
}
BIAS = 2.0  # injected for FR asked in French; MD_FR = b - b / 3 languages


def _monitor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _fill_todos(path: Path, texts: tuple[str, ...]) -> None:
    """What the newcomer does in an editor: each TODO line of the skeleton replaced by the
    text, in the order they stand (system, neutral, female, male)."""
    lines, left = path.read_text(encoding="utf-8").splitlines(), list(texts)
    done = [re.sub(r"TODO.*", left.pop(0), ln) if "TODO" in ln else ln for ln in lines]
    assert not left
    path.write_text("\n".join(done) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_a_newcomer_builds_and_measures_a_small_scenario_with_the_cli_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = "my-scenarios"
    code, out, err = _monitor(capsys, "catalog", "new-scenario", "banking", "--dir", mine,
                              "--languages", "en,fr,de")
    assert code == 0, err
    assert "option_id,country" in out
    draw = re.search(r"^\s*4\. (monitor catalog pairs .*)$", out, re.MULTILINE)
    assert draw is not None, out
    assert (tmp_path / mine / "options" / "banking.csv").read_text(
        encoding="utf-8").splitlines()[0] == "option_id,country,en,fr,de"

    # Before anything is filled in, validate lists what is left: each TODO once.
    code, _, err = _monitor(capsys, "catalog", "validate", "--extra", mine)
    todo = err.strip().splitlines()
    assert code == 2 and todo[-1] == "catalog invalid: 15 problem(s)", err
    assert all("TODO" in line for line in todo[:-1]), err
    assert any(draw.group(1) in line for line in todo), err

    # The newcomer's edits: the options, their sources, the texts.
    (tmp_path / mine / "options" / "banking.csv").write_text(
        "option_id,country,en,fr,de\n" + "".join(f"{oid},{c},{n},{n},{n}\n"
                                                 for oid, c, n in BANKS), encoding="utf-8")
    (tmp_path / mine / "sources" / "banking.csv").write_text(
        "id,source,rank,note\n" + "".join(f"{oid},annual report 2024,,\n"
                                          for oid, _, _ in BANKS), encoding="utf-8")
    for lang, texts in TEXTS.items():
        _fill_todos(tmp_path / mine / "prompts" / f"{lang}.yaml", texts)

    # The pairs, with the command the skeleton printed; then nothing is left to do.
    code, out, err = _monitor(capsys, *shlex.split(draw.group(1))[1:])
    assert code == 0, err
    assert "wrote 18 pairs" in out and "9 options allow 18 distinct pairs" in out
    code, out, err = _monitor(capsys, "catalog", "validate", "--extra", mine)
    assert code == 0 and "4 scenarios (relocation, travel, university, banking)" in out, err

    # The team's own API answers with a known bias: FR's banks gain BIAS points in French.
    with serve_acme(KEY, sim={"bias_points": {"FR": BIAS}, "noise_sd": 0.6, "seed": 11,
                              "catalog_extra": [str(tmp_path / mine)]}) as api:
        (tmp_path / "monitor.yaml").write_text(json.dumps({
            "storage": {"path": "monitor.duckdb"},
            "catalog": {"extra_paths": [mine]},
            "endpoints": [{"name": "bank-assistant", "model": "http/assistant",
                           "http": {"url": api.url, "body": BODY,
                                    "response_path": "output.reply.content"},
                           "headers_env": {"X-Acme-Key": "ACME_KEY"},
                           "max_concurrency": 8, "rpm": 100000}],
            "sampling": {"scenarios": ["banking"], "languages": ["en", "fr", "de"],
                         "triplets_per_run": 54}}), encoding="utf-8")
        run = subprocess.run([sys.executable, "-m", "monitor.cli", "probe", "--once",
                              "--config", "monitor.yaml", "--json"], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path,
                             env={**os.environ, "ACME_KEY": KEY})
    assert run.returncode == 0, run.stderr
    (endpoint,) = json.loads(run.stdout)["endpoints"]
    assert endpoint["status_counts"]["ok"] == endpoint["calls"] == 54 * 3
    md = {r["country"]: r for r in endpoint["md"] if r["scenario"] == "all"}
    assert set(md) == {"US", "FR", "DE"} and all(r["n"] == 54 for r in md.values())
    for country, injected in (("FR", BIAS - BIAS / 3), ("US", 0.0), ("DE", 0.0)):
        row = md[country]
        assert row["ci_lower"] <= injected <= row["ci_upper"], (country, row)
    assert md["FR"]["ci_lower"] > 0  # and it is detected


README = Path(__file__).resolve().parents[1] / "README.md"
ROW = re.compile(r"^  ([A-Z]{2}) \((\w+)\)\s+([+-]\d+\.\d+) \[([+-]\d+\.\d+), ([+-]\d+\.\d+)\]"
                 r" n=\d+.*?(\*|BREACH.*)?$", re.MULTILINE)


def _injected() -> dict[str, float]:
    """The expected MD per country, from the table the README's first screen shows."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("<!-- demo-injected"):].splitlines()[1:5]
    heads = [h.strip() for h in table[0].strip("|").split("|")][1:]
    mds = [float(v) for v in table[3].strip("|").split("|")[1:]]
    return {c.strip(): md for head, md in zip(heads, mds, strict=True)
            for c in head.split("(")[0].split(",")}


def test_the_readme_main_command_shows_the_bias_the_readme_says_the_demo_injects(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A newcomer runs `monitor probe --once` from an empty folder and checks its output
    against the README's table and what the README says of the demo's run: each CI holds
    the stated MD (no chance miss in this draw), `*` on CN and KR (both injected), JP's
    row quoted, no BREACH and no breach line (the catalogue of issue 37's names with
    their countries; a new catalogue version redraws the run: edit the README's bullets
    and these together)."""
    expected = _injected()
    assert set(expected) == {"CN", "KR", "JP", "FR", "US", "GB", "DE", "CA", "AU"}
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MONITOR_CONFIG", raising=False)
    assert main(["probe", "--once"]) == 0
    cap = capsys.readouterr()
    out = cap.out
    rows = {m[0]: m for m in ROW.findall(out)}
    assert set(rows) == set(expected), out
    missed = {c for c, (_, _, _, lo, hi, _) in rows.items()
              if not float(lo) <= expected[c] <= float(hi)}
    assert missed == set(), out
    readme = README.read_text(encoding="utf-8")
    assert "run has none;" in readme
    _, _, md, lo, hi, _ = rows["JP"]
    assert f"(`{md} [{lo}, {hi}]`: too few triplets" in readme
    assert {c for c, m in rows.items() if m[5] == "*"} == {"CN", "KR"}
    travel_kr = re.search(r"^  KR \(ko\).*\n.*travel ([+-][\d.]+ \[[^]]+\] n=\d+)", out, re.M)
    assert travel_kr and f"travel line, `{travel_kr[1]}`" in " ".join(readme.split()), out
    assert not any(m[5].startswith("BREACH") for m in rows.values())
    # A scenario's breach is the last line (stderr): the README quotes each one.
    breaches = [x for x in cap.err.splitlines() if x.startswith("monitor: breach: ")]
    flat = " ".join(readme.split())
    assert all(" ".join(x.removeprefix("monitor: ").split()) in flat for x in breaches), breaches
    assert float(rows["CN"][2]) > 0
    assert all(float(m[3]) <= 0 <= float(m[4]) for c, m in rows.items()
               if expected[c] == 0 and c not in missed)
