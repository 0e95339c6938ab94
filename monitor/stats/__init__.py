"""Bias statistics: MD / DiD, JSD, coverage, weakness share."""

from monitor.stats.core import *  # noqa: F403
from monitor.stats.core import ALL, BINS  # noqa: F401
