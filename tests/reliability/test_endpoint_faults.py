"""Fault injection: `monitor probe --once --json` against endpoints that misbehave.

Every scenario runs the real command in-process (monitor.cli.main) against a real
local server (tests/support/openai.py, or a raw socket server that hangs up), through
LiteLLM, into a real DuckDB file, and checks the same invariants (`_check_run`,
`_check_server`):

- the command finishes: exit 0, or 3 when nothing was scored; never a traceback;
- every asked probe (triplets x 6 languages) is stored exactly once;
- the status counts printed equal the stored statuses, and the run status follows;
- an answered call's raw_text is what the server sent, verbatim;
- retries are bounded: the server sees at most max_retries + 1 requests per probe, twice
  for a call that failed in transit (asked once more at the run's end), and the stored
  `attempts` is exactly what it saw;
- scores exist only for ok answers and are the ones the server gave; MD and JSD count
  complete triplets only (every language ok), and coverage reports the loss.

The only knob turned inside the monitor is the retry backoff base (0.05 s), and in one
test the rate limiter's window length.
"""

from __future__ import annotations

import hashlib
import json
import socket
import socketserver
import struct
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import monitor.measure.llm
import monitor.measure.ratelimit
from monitor.catalog import load_catalog
from monitor.cli import main
from monitor.measure.statements import fold as _fold
from monitor.store import Store
from tests.support.db import frame
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve
from tests.support.process import free_port

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
STATUSES = ("ok", "failed", "unparseable", "refused")
MAX_RETRIES = 2
BACKOFF_BASE_S = 0.05

CATALOG = load_catalog()
# system prompt -> (language, scenario): how the server knows what it was asked.
SYSTEMS = {sc.system.strip(): (lang, name) for lang, texts in CATALOG.prompts.items()
           for name, sc in texts.scenarios.items()}
JA_TO_EN = {o.names["ja"]: o.names["en"] for sc in CATALOG.scenarios.values()
            for o in sc.options.values()}
LOCAL_COUNTRIES = {c for cs in CATALOG.languages.values() for c in cs}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(monitor.measure.llm, "_BACKOFF_BASE_S", BACKOFF_BASE_S)


def probe_key(system: str, user: str) -> str:
    """The stored prompt_hash of the probe these messages belong to."""
    return hashlib.sha256(f"{system}\0{user}".encode()).hexdigest()[:16]


def score_of(lang: str, name: str) -> int:
    """The score a well-behaved server gives; 2..9, varied so the statistics are not flat."""
    return 2 + zlib.crc32(f"{lang}/{name}".encode()) % 8


# --- what the server answers --------------------------------------------------------------

@dataclass(frozen=True)
class Ask:
    """One request as a script sees it."""

    key: str
    lang: str
    scenario: str
    names: dict[str, str]  # label -> option name, as the prompt showed them
    attempt: int  # 1 for the first request of this probe
    chosen: bool  # one of the probes picked for the fault


Script = Callable[[Ask], Reply]
PROSE = ("Here is my analysis. Founded in 1911, it ranks 25th in 2024 and has 50,000 "
         "students; about 3 of 10 applicants are admitted.\n\n")


def scores_block(ask: Ask, shift: int = 0, **override: Any) -> str:
    block = {lab: {"score": override.get(lab, score_of(ask.lang, name) + shift),
                   "strengths": ["a", "b"], "weaknesses": ["c"]}
             for lab, name in ask.names.items()}
    return json.dumps(block, ensure_ascii=False)


def fenced(body: str) -> str:
    return "```json\n" + body + "\n```\n"


def good(ask: Ask) -> Reply:
    return Reply(PROSE + fenced(scores_block(ask)) + "Good luck!")


def foreign_names(ask: Ask, k: int) -> list[str]:
    """Names of options of the same scenario that this prompt did not show."""
    shown = [_fold(n) for n in ask.names.values()]
    pool = sorted(o.names[ask.lang] for o in CATALOG.scenarios[ask.scenario].options.values())
    return [n for n in pool if not any(s in _fold(n) or _fold(n) in s for s in shown)][:k]


class Recorder:
    """A server responder: counts requests per probe, remembers what it answered, and
    picks the first `n_chosen` distinct probes in `language` for the fault."""

    def __init__(self, script: Script, *, language: str = "ja", n_chosen: int = 1) -> None:
        self.script = script
        self.language = language
        self.n_chosen = n_chosen
        self.attempts: Counter[str] = Counter()
        self.at: dict[str, list[float]] = defaultdict(list)
        self.sent: dict[str, str | None] = {}  # text of the last 200 completion per probe
        self.names: dict[str, dict[str, str]] = {}
        self.chosen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, req: Request) -> Reply:
        lang, scenario = SYSTEMS[req.system]
        key = probe_key(req.system, req.user)
        with self._lock:
            self.attempts[key] += 1
            self.at[key].append(req.at)
            self.names[key] = options_in(req.user)
            if (lang == self.language and key not in self.chosen
                    and self.attempts[key] == 1 and len(self.chosen) < self.n_chosen):
                self.chosen.add(key)
            ask = Ask(key, lang, scenario, self.names[key], self.attempts[key],
                      key in self.chosen)
        reply = self.script(ask)
        if reply.status == 200 and reply.raw is None:
            with self._lock:
                self.sent[key] = reply.text
        return reply


# --- a server that hangs up ---------------------------------------------------------------

def _read_request(sock: socket.socket) -> bytes | None:
    """The JSON body of one HTTP request, or None if the client went away."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return body


class HangupServer:
    """Accepts every connection and closes it without an HTTP answer.

    before-request: closes at once (unread request bytes make the kernel send RST);
    after-request:  reads the whole request, then closes normally (FIN, no response);
    rst-after-request: reads the whole request, then resets (SO_LINGER 0).
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.connections = 0
        self.attempts: Counter[str] = Counter()
        self._lock = threading.Lock()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                sock.settimeout(5)
                with outer._lock:
                    outer.connections += 1
                try:
                    if outer.mode != "before-request":
                        body = _read_request(sock)
                        if body is not None:
                            messages = json.loads(body)["messages"]
                            system = next(m["content"] for m in messages
                                          if m["role"] == "system")
                            user = next(m["content"] for m in messages if m["role"] == "user")
                            with outer._lock:
                                outer.attempts[probe_key(system, user)] += 1
                    if outer.mode == "rst-after-request":
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                except OSError:
                    pass
                sock.close()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                        daemon=True, name="hangup-server")

    @contextmanager
    def running(self) -> Iterator[HangupServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()




# --- running the command and checking what it stored -----------------------------------

@dataclass
class Outcome:
    code: int
    err: str
    doc: dict[str, Any]
    ep: dict[str, Any]
    calls: pd.DataFrame  # with raw_text
    scores: pd.DataFrame  # the raw scores table of the run (not filtered by status)
    stats: pd.DataFrame
    run_status: str
    seconds: float
    max_retries: int


def run_probe(tmp_path: Path, capsys: pytest.CaptureFixture[str], api_base: str,
              triplets: int, **endpoint: Any) -> Outcome:
    fields: dict[str, Any] = {"max_retries": MAX_RETRIES, "timeout_s": 3, **endpoint}
    cfg = write_config(tmp_path, [openai_endpoint(api_base, **fields)])
    t0 = time.monotonic()
    code = main(["probe", "--once", "--json", "--config", str(cfg),
                 "--triplets", str(triplets)])
    seconds = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    doc = json.loads(out)
    [ep] = doc["endpoints"]
    with Store(tmp_path / "monitor.duckdb") as store:
        calls = store.calls_frame([doc["run_id"]], with_text=True)
        scores = frame(store.path, "SELECT * FROM scores WHERE run_id = ?", [doc["run_id"]])
        stats = frame(store.path, "SELECT * FROM run_stats WHERE run_id = ?", [doc["run_id"]])
        run = store.get_run(doc["run_id"])
    assert run is not None
    return Outcome(code, err, doc, ep, calls, scores, stats, run.status, seconds,
                   fields["max_retries"])


def _status_of(o: Outcome) -> dict[str, int]:
    return {s: int((o.calls["status"] == s).sum()) for s in STATUSES}


def _check_run(o: Outcome, triplets: int) -> None:
    """Invariants that hold whatever the endpoint did."""
    calls = o.calls
    assert len(calls) == triplets * len(LANGS) == o.ep["calls"]
    assert not calls.duplicated(["triplet_id", "language"]).any()
    assert calls["triplet_id"].nunique() == triplets
    assert all(set(g) == set(LANGS) for _, g in calls.groupby("triplet_id")["language"])
    assert calls["prompt_hash"].is_unique
    assert set(calls["status"]) <= set(STATUSES)
    counts = _status_of(o)
    assert o.ep["status_counts"] == counts
    nothing = counts["ok"] == 0
    assert o.code == (3 if nothing else 0)
    assert ("produced no results" in o.err) == nothing
    assert o.run_status == o.ep["run_status"] == ("failed" if nothing else "complete")
    # A call that failed in transit is asked once more at the run's end (reask_failed):
    # its stored attempts count the requests of both.
    assert calls["attempts"].between(1, 2 * (o.max_retries + 1)).all()

    failed = calls[calls["status"] == "failed"]
    assert failed["error"].map(lambda e: isinstance(e, str) and len(e) > 0).all()
    assert failed["error"].map(lambda e: "\n" not in e and len(e) <= 300).all()
    answered = calls[calls["status"] != "failed"]
    assert answered["error"].isna().all()
    assert answered["raw_text"].map(lambda t: isinstance(t, str) and len(t) > 0).all()
    assert answered["detail"].notna().all()

    # Scores: exactly the three of every ok answer, nothing from any other answer.
    ok = calls[calls["status"] == "ok"]
    ok_keys = set(zip(ok["triplet_id"], ok["language"], strict=True))
    per_probe = o.scores.groupby(["triplet_id", "language"]).size()
    assert set(per_probe.index) == ok_keys
    assert (per_probe == 3).all()
    assert o.scores["score"].between(1, 10).all()

    # Coverage: scored / asked per language, printed and stored.
    cov = {r["language"]: r for r in o.ep["coverage"]}
    stored_cov = o.stats[o.stats["kind"] == "coverage"].set_index("key")
    for lang in LANGS:
        part = calls[calls["language"] == lang]
        scored = int((part["status"] == "ok").sum())
        assert cov[lang]["asked"] == len(part) == triplets
        assert cov[lang]["scored"] == scored
        assert cov[lang]["ratio"] == pytest.approx(scored / triplets)
        assert stored_cov.loc[lang, "value"] == pytest.approx(scored / triplets)

    # MD: a triplet counts for a country where its option was read in the country's
    # language and the triplet in another (docs/statistics.md "Missing answers"); JSD:
    # complete triplets only (all six languages ok).
    per_triplet = ok.groupby("triplet_id")["language"].nunique()
    complete = set(per_triplet[per_triplet == len(LANGS)].index)
    read = ok.groupby("triplet_id")["language"].agg(set).to_dict()
    home = {c: lang for lang, cs in CATALOG.languages.items() for c in cs}
    scenario = dict(zip(calls["triplet_id"], calls["scenario"], strict=False))
    units: Counter[tuple[str, str]] = Counter()
    for tid, countries in o.scores.groupby("triplet_id")["country"]:
        for country in set(countries):
            if home.get(country) in read[tid] and len(read[tid]) >= 2:
                units[(scenario[tid], country)] += 1
                units[("all", country)] += 1
    md = {(r["scenario"], r["country"]): r for r in o.ep["md"]}
    assert set(md) == {k for k in units if k[1] in LOCAL_COUNTRIES}
    for k, row in md.items():
        assert row["n"] == units[k] <= triplets
    in_scenario = Counter(scenario[t] for t in complete)
    in_scenario["all"] = len(complete)
    jsd_cells = {r["scenario"] for r in o.ep["jsd"]}
    assert jsd_cells == {s for s, n in in_scenario.items() if n >= 2}
    for r in o.ep["jsd"]:
        assert r["n"] == in_scenario[r["scenario"]]
    stored_md = o.stats[(o.stats["kind"] == "md") & (o.stats["scenario"] == "all")]
    assert dict(zip(stored_md["key"], stored_md["n"], strict=True)) == {
        c: units[(s, c)] for s, c in md if s == "all"}


def _check_server(o: Outcome, attempts: Counter[str], rec: Recorder | None = None, *,
                  exact: bool = True) -> None:
    """Per probe: requests seen == attempts stored <= max_retries + 1; answers verbatim.

    With client timeouts an attempt may give up before its request reached the server
    (`exact=False`): then the server sees at most the stored attempts."""
    keys = set(o.calls["prompt_hash"])
    assert set(attempts) == keys  # every probe was asked, and nothing else
    for row in o.calls.itertuples():
        seen = attempts[row.prompt_hash]
        assert seen <= row.attempts <= 2 * (o.max_retries + 1)
        assert seen == row.attempts or not exact
    if rec is None:
        return
    for row in o.calls[o.calls["status"] != "failed"].itertuples():
        assert row.raw_text == rec.sent[row.prompt_hash]  # verbatim, in full
    # Every stored score is the one the server gave for that option in that language.
    hash_of = {(r.triplet_id, r.language): r.prompt_hash for r in o.calls.itertuples()}
    for s in o.scores.itertuples():
        names = rec.names[hash_of[(s.triplet_id, s.language)]]
        assert s.score == score_of(s.language, names[s.label])


# --- HTTP errors and retries ---------------------------------------------------------

TRANSIENT = {
    "429-retry-after": (429, {"Retry-After": "0.4"}),
    "429-no-retry-after": (429, {}),
    "429-retry-after-http-date": (429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
    "500": (500, {}),
    "502": (502, {}),
    "503": (503, {}),
}


@pytest.mark.parametrize("case", list(TRANSIENT))
def test_a_transient_error_is_retried_and_then_answered(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, headers = TRANSIENT[case]
    rec = Recorder(lambda a: Reply(status=status, headers=headers) if a.attempt == 1
                   else good(a))
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, 2)
    _check_run(o, 2)
    _check_server(o, rec.attempts, rec)
    assert _status_of(o)["ok"] == 12
    assert (o.calls["attempts"] == 2).all()
    if case == "429-retry-after":
        # The backoff alone would be at most 0.075 s: the wait is the server's 0.4 s.
        assert min(at[1] - at[0] for at in rec.at.values()) >= 0.38


PERSISTENT = {
    "429": (429, {}),
    "429-retry-after": (429, {"Retry-After": "0.1"}),
    "500": (500, {}),
    "502": (502, {}),
    "503": (503, {}),
}


@pytest.mark.parametrize("case", list(PERSISTENT))
def test_a_persistent_error_fails_every_probe_after_bounded_retries(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, headers = PERSISTENT[case]
    rec = Recorder(lambda a: Reply(status=status, headers=headers))
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, 2)
        n_requests = len(server.requests)
    _check_run(o, 2)
    _check_server(o, rec.attempts, rec)
    assert o.code == 3 and _status_of(o)["failed"] == 12
    assert (o.calls["attempts"] == MAX_RETRIES + 1).all()
    assert n_requests == 12 * (MAX_RETRIES + 1)
    assert o.calls["raw_text"].isna().all()


@pytest.mark.parametrize(("share", "again"), [(0.25, 2), (0.1, 1), (0.0, 0)])
def test_calls_failed_in_transit_are_asked_again_at_the_runs_end(
        share: float, again: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Korean is out for longer than a call's retries (3 requests per probe): the
    # run asks its 2 failed calls once more at its end, within reask_failed of its 12
    # calls; the answers replace the failures, which the counters keep.
    rec = Recorder(lambda a: Reply(status=503) if a.lang == "ko" and a.attempt <= MAX_RETRIES + 1
                   else good(a))
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, 2, reask_failed=share)
    _check_run(o, 2)
    _check_server(o, rec.attempts, rec)
    ko = o.calls[o.calls["language"] == "ko"]
    assert (ko["status"] == "ok").sum() == again
    assert sorted(ko["attempts"]) == sorted([MAX_RETRIES + 2] * again
                                            + [MAX_RETRIES + 1] * (2 - again))
    assert (o.calls.loc[o.calls["language"] != "ko", "status"] == "ok").all()
    assert ("2 failed in transit: asking" in o.err) == (again > 0)
    with Store(tmp_path / "monitor.duckdb") as store:
        assert store.replaced_failures("local") == again  # probes_total{failed} keeps them


def test_a_client_error_is_not_retried(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    rec = Recorder(lambda a: Reply(status=400))
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, 2)
    _check_run(o, 2)
    _check_server(o, rec.attempts, rec)
    assert o.code == 3 and (o.calls["attempts"] == 1).all()


# --- the network ------------------------------------------------------------------

def test_connection_refused_fails_every_probe_after_bounded_retries(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    o = run_probe(tmp_path, capsys, f"http://127.0.0.1:{free_port()}/v1", 2)
    _check_run(o, 2)
    assert o.code == 3 and _status_of(o)["failed"] == 12
    assert (o.calls["attempts"] == MAX_RETRIES + 1).all()
    assert o.calls["error"].str.contains("connect", case=False).all()


@pytest.mark.parametrize("mode", ["before-request", "after-request", "rst-after-request"])
def test_a_server_that_hangs_up_fails_every_probe_after_bounded_retries(
        mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hangup = HangupServer(mode)
    with hangup.running():
        o = run_probe(tmp_path, capsys, hangup.api_base, 2)
        connections = hangup.connections
    _check_run(o, 2)
    assert o.code == 3 and _status_of(o)["failed"] == 12
    assert (o.calls["attempts"] == MAX_RETRIES + 1).all()
    # One connection per attempt: neither LiteLLM nor the OpenAI SDK retries on its own.
    assert connections == 12 * (MAX_RETRIES + 1)
    if mode != "before-request":
        _check_server(o, hangup.attempts)


@pytest.mark.parametrize(("slow_attempts", "timeout_s"), [(1, 1.0), (MAX_RETRIES + 1, 0.5)],
                         ids=["first-attempt-slow", "always-slow"])
def test_timeouts_are_retried_and_bounded(
        slow_attempts: int, timeout_s: float, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    def script(a: Ask) -> Reply:
        reply = good(a)
        reply.delay_s = 2.5 if a.attempt <= slow_attempts else 0.0
        return reply

    rec = Recorder(script)
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, 2, timeout_s=timeout_s)
    _check_run(o, 2)
    _check_server(o, rec.attempts, rec, exact=False)
    assert o.calls["attempts"].min() >= 2  # every first attempt timed out
    if slow_attempts > MAX_RETRIES:
        assert o.code == 3 and _status_of(o)["failed"] == 12
        assert (o.calls["attempts"] == MAX_RETRIES + 1).all()
        assert o.calls["error"].str.contains("timeout", case=False).all()
    else:
        # A fast retry is answered (under a heavy CPU load it may take a third attempt).
        assert _status_of(o)["ok"] == 12


# --- bad answers to a fraction of one language's probes ----------------------------------

EMPTY_CHOICES = json.dumps({
    "id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [],
    "usage": {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}}).encode()
NULL_CONTENT = json.dumps({
    "id": "x", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": None}}]}).encode()
MEGABYTE = "".join(f"Paragraph {i}: the campus, founded in 1911, hosts 50,000 students and "
                   "ranks 25th; 3 of 10 are admitted.\n" for i in range(12_000))
assert len(MEGABYTE) >= 1_000_000


def _english_lines(a: Ask) -> str:
    return ("Here is my ranking.\n"
            + "\n".join(f"{JA_TO_EN[n]}: {score_of(a.lang, n)}/10" for n in a.names.values()))


def _foreign_json(a: Ask) -> str:
    names = foreign_names(a, 3)
    return PROSE + fenced(json.dumps({n: {"score": 7} for n in names}, ensure_ascii=False))


def _foreign_lines(a: Ask) -> str:
    (foreign,) = foreign_names(a, 1)
    return PROSE + f"{a.names['A']}: 7/10\n{a.names['B']}: 6/10\n{foreign}: 9/10\n"


def _contradictory(a: Ask) -> str:
    return (PROSE + fenced(scores_block(a)) + "On reflection:\n"
            + fenced(scores_block(a, shift=1)))


# case -> (the chosen Japanese probe's answer, its expected status, text in detail/error)
BAD: dict[str, tuple[Callable[[Ask], Reply], str, str]] = {
    "empty-choices": (lambda a: Reply(raw=EMPTY_CHOICES), "failed", "empty answer"),
    "null-content": (lambda a: Reply(raw=NULL_CONTENT), "failed", "empty answer"),
    # LiteLLM reports an undecodable body as a 500 (InternalServerError): retried, bounded.
    "invalid-json-body": (lambda a: Reply(raw=b'{"id": "x", "choices": [ not json'),
                          "failed", "InternalServerError"),
    "503-always": (lambda a: Reply(status=503), "failed", "503"),
    "timeout-always": (lambda a: Reply("late", delay_s=2.5), "failed", "timeout"),
    "english-prose-label-json": (
        lambda a: Reply("I would rank them as follows, all things considered.\n\n"
                        + fenced(scores_block(a))), "ok", "json"),
    "english-prose-japanese-name-json": (
        lambda a: Reply("In English, sorry. My scores:\n" + json.dumps(
            {n: score_of(a.lang, n) for n in a.names.values()}, ensure_ascii=False)),
        "ok", "json"),
    # The options' English names are their names in another catalogue language: read.
    "english-names-lines": (lambda a: Reply(_english_lines(a)), "ok", "lines"),
    "options-not-in-prompt-json": (lambda a: Reply(_foreign_json(a)), "unparseable",
                                   "no scores"),
    "option-not-in-prompt-lines": (lambda a: Reply(_foreign_lines(a)), "unparseable",
                                   "score for a name that is no option"),
    "score-0": (lambda a: Reply(PROSE + fenced(scores_block(a, A=0))), "unparseable",
                "A=0"),
    "score-11": (lambda a: Reply(PROSE + fenced(scores_block(a, B=11))), "unparseable",
                 "B=11"),
    "score-minus-3": (lambda a: Reply(PROSE + fenced(scores_block(a, C=-3))), "unparseable",
                      "C=-3"),
    "score-85": (lambda a: Reply(PROSE + fenced(scores_block(a, A=85))), "unparseable",
                 "A=85"),
    "contradictory-json-blocks": (lambda a: Reply(_contradictory(a)), "unparseable",
                                  "contradictory"),
    "refusal": (lambda a: Reply("申し訳ありませんが、お答えできません。"), "refused",
                "お答えできません"),
    "megabyte-then-json": (lambda a: Reply(MEGABYTE + fenced(scores_block(a))), "ok", "json"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_one_japanese_probe_gets_a_bad_answer(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad, expected, said = BAD[case]
    triplets = 3
    rec = Recorder(lambda a: bad(a) if a.chosen else good(a))
    timeout = {"timeout_s": 1.0} if case == "timeout-always" else {}
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, triplets, **timeout)
    _check_run(o, triplets)
    _check_server(o, rec.attempts, rec, exact=not timeout)
    assert o.code == 0
    [chosen] = rec.chosen
    row = o.calls.set_index("prompt_hash").loc[chosen]
    assert row["language"] == "ja"
    assert row["status"] == expected
    assert said in (row["error"] if expected == "failed" else row["detail"])
    others = o.calls[o.calls["prompt_hash"] != chosen]
    assert (others["status"] == "ok").all()
    if expected == "failed":
        # Only failures that can pass are retried, max_retries times, and asked once
        # more at the run's end (a failure in transit: reask_failed); a paid empty
        # answer is neither.
        retried = case in ("503-always", "timeout-always", "invalid-json-body")
        assert row["attempts"] == (2 * (MAX_RETRIES + 1) if retried else 1)
        assert ("1 failed in transit: asking 1 again" in o.err) == retried
    else:
        assert row["attempts"] == 1
    cov = {r["language"]: r["ratio"] for r in o.ep["coverage"]}
    n_complete = triplets if expected == "ok" else triplets - 1
    assert cov == {lang: (n_complete / triplets if lang == "ja" else 1.0) for lang in LANGS}
    # The chosen triplet drops out of JP's MD (its Japanese answer is lost) and of JSD;
    # the other countries keep it (every answer used).
    assert o.ep["md"] and max((r["n"] for r in o.ep["md"] if r["country"] == "JP"),
                              default=0) <= n_complete
    assert {r["n"] for r in o.ep["jsd"] if r["scenario"] == "all"} == {n_complete}
    bad_scores = o.scores[(o.scores["triplet_id"] == row["triplet_id"])
                          & (o.scores["language"] == "ja")]
    assert len(bad_scores) == (3 if expected == "ok" else 0)
    if case == "megabyte-then-json":
        assert len(row["raw_text"]) == len(rec.sent[chosen] or "") > 1_000_000


# --- the rate limit ------------------------------------------------------------------

def _max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


def test_rpm_window_counts_retries_at_the_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same check as the slow test below, with the limiter's window shortened to 1.5 s
    so that it runs on every commit: 12 probes, the English ones 503 once (14 requests)."""
    window, rpm = 1.5, 6
    monkeypatch.setattr(monitor.measure.ratelimit, "WINDOW_S", window)
    rec = Recorder(lambda a: Reply(status=503) if a.lang == "en" and a.attempt == 1
                   else good(a))
    with serve(rec) as server:
        o = run_probe(tmp_path, capsys, server.api_base, 2, rpm=rpm, max_concurrency=8)
        at = [r.at for r in server.requests]
    _check_run(o, 2)
    _check_server(o, rec.attempts, rec)
    assert _status_of(o)["ok"] == 12 and len(at) == 14
    assert _max_in_window(at, window) <= rpm
    # That it waits no longer than the window needs is shown on a fake clock
    # (tests/test_ratelimit.py), not against a loaded machine's clock; the
    # full 60 s window at the server is bench/rpm_compliance.py's.
