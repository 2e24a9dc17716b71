"""The usage ledger: who held which GPUs when (docs/design.md, contract 4), and its integrals over a period.

Pure: reading and writing take open text streams (or a file's bytes); nothing here touches files,
clocks or databases.
"""

from gpucommons.ledger.csv_io import (
    LOST_WORK_COLUMN,
    USAGE_COLUMNS,
    LedgerError,
    LineIssue,
    read_usage_bytes,
    read_usage_csv,
    read_usage_table,
    write_usage_csv,
)
from gpucommons.ledger.cut import cut_to_period
from gpucommons.ledger.integrate import PoolUsage, UsageSummary, summarize_usage, us_to_hours
from gpucommons.ledger.interval import US_PER_HOUR, EndReason, UsageInterval, format_utc, from_us, to_us
from gpucommons.ledger.period import Period, PeriodError
from gpucommons.ledger.table import UsageTable

__all__ = [
    "LOST_WORK_COLUMN",
    "USAGE_COLUMNS",
    "US_PER_HOUR",
    "EndReason",
    "LedgerError",
    "LineIssue",
    "Period",
    "PeriodError",
    "PoolUsage",
    "UsageInterval",
    "UsageSummary",
    "UsageTable",
    "cut_to_period",
    "format_utc",
    "from_us",
    "read_usage_bytes",
    "read_usage_csv",
    "read_usage_table",
    "summarize_usage",
    "to_us",
    "us_to_hours",
    "write_usage_csv",
]
