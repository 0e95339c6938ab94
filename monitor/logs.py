"""The log format of `monitor run` and its run processes (stderr), in one place."""

from __future__ import annotations

import logging
import sys

__all__ = ["LogLines", "setup_logging"]

# Third-party loggers: their DEBUG lines are request dumps (the OpenAI SDK logs
# every request with its headers) that drown the monitor's own and may carry secrets.
_QUIET = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx",
          "httpcore", "openai", "urllib3", "asyncio", "matplotlib", "PIL", "slack_sdk",
          "multipart")


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in _QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # APScheduler warns of every skipped slot; the scheduler counts and logs those itself.
    logging.getLogger("apscheduler").setLevel(logging.ERROR)


class LogLines:
    """A text stream whose lines become INFO records of `logger`: progress feedback
    (monitor.measure.progress, which writes lines to a stream) in the daemon's log."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if line:
                self.logger.info("%s", line)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False  # a line at a time, never redrawn in place
