"""The columns of docs/design.md, contract 4 and the limits every reader of the usage ledger applies alike."""

from __future__ import annotations

from gpucommons.ledger.interval import US_PER_HOUR, EndReason

USAGE_COLUMNS: tuple[str, ...] = (
    "task_id",
    "team",
    "pool",
    "gpus",
    "start",
    "end",
    "priority",
    "borrowed_gpus",
    "end_reason",
)
#: More GPUs than any one task holds: a row claiming more is a corrupt row, not a big task.
MAX_GPUS = 1_000_000
#: The extension column (not in docs/design.md, contract 4 itself): appended after the contract's columns.
LOST_WORK_COLUMN = "lost_gpu_hours"
REASONS = {r.value: r for r in EndReason}
#: Lost work is written to the micro-GPU-hour; allow that rounding above what the interval held.
LOST_ROUNDING_GPU_US = US_PER_HOUR // 1_000_000
