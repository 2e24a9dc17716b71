"""One row of the usage ledger: a task's hold on GPUs of one pool over a half-open time span.

The ledger is append-only and written by the control plane; chargeback and budgets read it. A
`UsageInterval` is a `NamedTuple` rather than a frozen dataclass on purpose: it is just as immutable
and typed, and about four times cheaper to build, which matters when a month holds a million rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import NamedTuple

#: The instant that integer microsecond timestamps count from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)
#: Microseconds in one hour: GPU-microseconds ÷ this = GPU-hours.
US_PER_HOUR = 3_600_000_000


class EndReason(StrEnum):
    """Why the interval ended (docs/design.md, contract 4). `running`: still running when the ledger was
    exported; its `end` is then the export time, so the interval is complete up to that instant."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    RUNNING = "running"


class UsageInterval(NamedTuple):
    """A task held `gpus` GPUs of `pool` for `team` over `[start, end)` (times in UTC).

    `borrowed_gpus` is the part of the request above the team's nominal quota at admission, as the
    control plane recorded it. Chargeback does not rely on it: it integrates borrowing over time
    (docs/design.md, "Chargeback rules", rule 2), because a task admitted on borrowed GPUs stops borrowing
    when its team's other tasks end. `lost_gpu_hours` is the work a preemption threw away (GPU-hours
    since the victim's last checkpoint); it is an extension column of contract 4 (docs/design.md),
    zero when absent.
    """

    task_id: str
    team: str
    pool: str
    gpus: int
    start: datetime
    end: datetime
    priority: str
    borrowed_gpus: int = 0
    end_reason: EndReason = EndReason.SUCCEEDED
    lost_gpu_hours: Decimal = Decimal(0)


def to_us(moment: datetime) -> int:
    """Microseconds since the epoch, exact. A naive datetime is taken to be UTC (the ledger's zone)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // ONE_MICROSECOND


def from_us(us: int) -> datetime:
    """The UTC datetime `us` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=us)


def format_utc(moment: datetime) -> str:
    """ISO-8601 in UTC with a `Z`: `2026-11-03T04:05:06Z` (microseconds only when there are some)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    spec = "seconds" if moment.microsecond == 0 else "microseconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"
