"""The DuckDB store: the only place that speaks SQL."""

from monitor.store.db import *  # noqa: F403
from monitor.store.db import APP, MIGRATIONS  # noqa: F401
