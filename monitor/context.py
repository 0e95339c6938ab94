"""What every stage of a run is given: the settings, the catalogue and a store.

The stages (measure, watch, review, the report) took the same group of
arguments - settings, catalog, store - in 16 functions; they take one
`Context` now. Its store is typed by what the stage reads and writes (a
Protocol of the stage's own: monitor.stats.engine.StatsStore,
monitor.watch.ports.WatchStore, ...), never the whole Store, so a stage's
reach into the database is written down where the stage is; the covariant
parameter lets a Context of the whole Store stand for any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from monitor.catalog import Catalog
from monitor.config import Settings

__all__ = ["Context"]

S = TypeVar("S", covariant=True)


@dataclass(frozen=True)
class Context(Generic[S]):
    """The settings, the catalogue, and the store as the stage at hand uses it."""

    settings: Settings
    catalog: Catalog
    store: S
