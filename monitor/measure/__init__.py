"""Measuring: which triplets a run asks, the prompts, the LLM client, reading the answers,
the run.

    start.py        a run's row: a new run planned, or an interrupted one to resume
    sampling.py     the seeded rotation of triplets, variants and option orders
    prompts.py      the messages of one (triplet, language)
    assistant.py    the assistant's setup applied to them (config/assistant.py), its schema
    calls.py        what one call returns, the client Protocol, whether a request is out
    llm.py          the only LiteLLM user: limits, retries, the simulated and http providers
    http_target.py  the request to an assistant's own HTTP API (the http provider's)
    ratelimit.py    calls in flight and requests per minute
    simulated.py    the simulated model with a known injected bias
    parse.py        the three scores read out of an answer: its JSON, else its prose
    prose.py        the scores an answer's prose gives, as a careful reader takes them
    statements.py   score statements in one line, in every catalogue language
    options.py      the options as an answer may name them: labels, names, short forms
    tables.py       an answer's markdown tables
    declining.py    declining to score, in every catalogue language
    budget.py       what a run and its top-ups may spend: dollars call by call, calls
                    batch by batch (the daily budget, shared)
    rows.py         what a run writes: call rows, score rows, statistic rows
    writer.py       bounded batches into DuckDB, or the spool
    spool.py        answers paid for but not written
    progress.py     calls done, failures, ETA on stderr
    lease.py        a run holds its endpoint: replicas on a shared store take turns
    run.py          run_endpoint: one run of one endpoint, start to statistics
    ports.py        what measuring reads and writes in the store
"""

from monitor.measure.calls import CallResult, ChatClient
from monitor.measure.llm import LLMClient
from monitor.measure.progress import Progress
from monitor.measure.run import RunResult, finish_run, run_endpoint
from monitor.measure.start import RunOptions, plan_run

__all__ = ["CallResult", "ChatClient", "LLMClient", "Progress", "RunOptions", "RunResult",
           "finish_run", "plan_run", "run_endpoint"]
