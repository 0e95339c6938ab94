"""The configuration: its schema (model.py) and how it is found and loaded (load.py)."""

from monitor.config.load import (
    demo_config_path,
    load_settings,
    masked_dump,
    parse_since,
    resolve_config_path,
)
from monitor.config.model import (
    AUTO_BASELINE_RUNS,
    Alerts,
    BaselineCfg,
    Budget,
    CatalogCfg,
    Endpoint,
    Metrics,
    Sampling,
    Schedule,
    Settings,
    Slack,
    Storage,
    Thresholds,
    parse_every,
)

__all__ = ["AUTO_BASELINE_RUNS", "Alerts", "BaselineCfg", "Budget", "CatalogCfg", "Endpoint",
           "Metrics", "Sampling", "Schedule", "Settings", "Slack", "Storage", "Thresholds",
           "demo_config_path", "load_settings", "masked_dump", "parse_every", "parse_since",
           "resolve_config_path"]
