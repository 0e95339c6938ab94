"""The configuration: its schema and how it is found and loaded.

    model.py      Settings and every section, with defaults and limits
    detector.py   the drift CUSUM's thresholds and the top-up confirmation
    assistant.py  the team's assistant around the probe; the setup key runs compare in
    target.py     an assistant behind its own HTTP API: the request and the answer's path
    sinks.py      the alert sinks beside Slack: a JSON webhook, PagerDuty
    load.py       the path, the environment overrides, one-line errors, the masked dump
"""

from monitor.config.assistant import (
    DEFAULT_SETUP,
    Setup,
    reach_advice,
    schema_advice,
    setup_for,
)
from monitor.config.detector import CUSUM_H
from monitor.config.load import (
    demo_config_path,
    deprecations,
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
    Report,
    Sampling,
    Schedule,
    Settings,
    Slack,
    Storage,
    Thresholds,
    Topup,
    parse_every,
)
from monitor.config.sinks import PAGERDUTY_URL, Delivery, PagerDuty, Webhook
from monitor.config.target import (
    HTTP_PLACEHOLDERS,
    PLACEHOLDER_RE,
    HttpTarget,
    mask_url,
    parse_path,
)

__all__ = ["AUTO_BASELINE_RUNS", "CUSUM_H", "DEFAULT_SETUP", "HTTP_PLACEHOLDERS", "PAGERDUTY_URL",
           "PLACEHOLDER_RE", "Alerts", "BaselineCfg", "Budget", "CatalogCfg", "Delivery",
           "Endpoint", "HttpTarget", "Metrics", "PagerDuty", "Report", "Sampling", "Schedule",
           "Settings", "Setup", "Slack", "Storage", "Thresholds", "Topup", "Webhook",
           "demo_config_path", "deprecations", "load_settings", "mask_url", "masked_dump",
           "parse_every", "parse_path", "parse_since", "reach_advice", "resolve_config_path",
           "schema_advice", "setup_for"]
