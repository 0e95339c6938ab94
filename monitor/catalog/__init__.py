"""The probe catalog (probes/): records, rules, loading, the pair draw."""

from monitor.catalog.load import *  # noqa: F403
from monitor.catalog.load import LABELS as LABELS
from monitor.catalog.load import catalog_version as catalog_version
from monitor.catalog.load import read_csv as read_csv
