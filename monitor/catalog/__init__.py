"""The probe catalog (probes/): records, the rules a catalog must meet, loading.

    records.py     Option, Pair, Triplet, Scenario, Catalog, PromptFile, Problem
    files.py       CSV and YAML reading with positions for messages
    rules.py       the checks of languages, options and pairs; each appends
                   Problems so one pass reports all
    coverage.py    each local country's options per scenario; names across scenarios
    scripts.py     what a name must look like in its language's script
    text_rules.py  the checks of aliases, sources and prompt files, and of the gender
                   variants as minimal pairs (token LCS from the neutral)
    load.py        read_catalog / load_catalog, the content-hash catalog version
    draw.py        the seeded pair draw (never a repeated pair; how many the options give)
    overlay.py     a team's own scenarios (catalog.extra_paths), merged
    pairs.py       `python -m monitor.catalog.pairs`: the catalogue's pairs redrawn
"""

from monitor.catalog.files import read_csv
from monitor.catalog.load import catalog_version, default_catalog_dir, load_catalog, read_catalog
from monitor.catalog.records import (
    LABELS,
    VARIANTS,
    Catalog,
    Option,
    Pair,
    Problem,
    PromptFile,
    Scenario,
    Triplet,
)

__all__ = ["LABELS", "VARIANTS", "Catalog", "Option", "Pair", "Problem", "PromptFile", "Scenario",
           "Triplet", "catalog_version", "default_catalog_dir", "load_catalog", "read_catalog",
           "read_csv"]
