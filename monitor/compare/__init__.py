"""`monitor compare`: a candidate (a new model, a new system prompt) against production,
paired and sequential, as a CI gate (docs/statistics.md, "Comparing two setups").

    start.py       a new comparison (its runs, the row linking them) or one to resume;
                   the triplets it asks, in order
    stage.py       run_comparison: batch by batch, both sides at once, a look after each
    sequential.py  the test on paired differences: two SPRTs per country, Bonferroni
    pairs.py       the triplets both sides answered, aligned; their differences
    outcome.py     what it found: verdicts, paired MD and DiD with CIs, JSD, coverage
    readback.py    a stored comparison read back (--show)
    summary.py     the JSON document, the text, the pull-request comment
    page.py        the report page: forest plot and heatmap of the differences
    plan.py        what a comparison costs, simulated (`monitor plan --compare`, bench)
    ports.py       what a comparison reads and writes in the store
"""

from monitor.compare.outcome import CountryResult, JSDChange, Result, TestState
from monitor.compare.page import write_page
from monitor.compare.ports import CompareStore
from monitor.compare.readback import show
from monitor.compare.stage import Budgets, run_comparison
from monitor.compare.start import CompareOptions, Prepared, Side, prepare
from monitor.compare.summary import json_document, markdown, text

__all__ = ["Budgets", "CompareOptions", "CompareStore", "CountryResult", "JSDChange",
           "Prepared", "Result", "Side", "TestState", "json_document", "markdown", "prepare",
           "run_comparison", "show", "text", "write_page"]
