"""`monitor config check`: the effective configuration, as strict as `monitor run`."""

from __future__ import annotations

import argparse
import json
import sys

from monitor.config import load_settings, masked_dump
from monitor.daemon.scheduler import make_trigger

__all__ = ["config_check"]


def config_check(args: argparse.Namespace) -> int:
    settings, path = load_settings(args.config)
    make_trigger(settings, path)  # the schedule `monitor run` would refuse, refused here too
    data, warnings = masked_dump(settings, path)
    for w in warnings:
        print(f"monitor: warning: {w}", file=sys.stderr)
    print(f"# effective configuration from {path} (environment overrides applied)")
    print(json.dumps(data, indent=2, ensure_ascii=False))
    return 0
