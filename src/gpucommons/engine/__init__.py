"""The pure admission engine: quota tree, pool assignment, preemption, placement.

No I/O and no wall clock: time is a parameter. Callers keep a `ClusterState`, call
`decide(state, now, config)` and apply the `Decisions` through the state's methods (tests use
`apply_decisions`, which does all of them at once). See `engine.types` for the contract and
docs/engine.md for the rules.
"""

from gpucommons.engine.apply import apply_decisions
from gpucommons.engine.cycle import decide
from gpucommons.engine.state import ClusterState, queue_key
from gpucommons.engine.types import (
    DEFAULT_FAIR_SHARE_STRATEGIES,
    Admission,
    Admit,
    Decisions,
    EngineConfig,
    FairShareStrategy,
    NodeSlice,
    Pending,
    PendingCode,
    Placement,
    Preempt,
    PreemptReason,
    RunningTask,
    TaskRequest,
)

__all__ = [
    "DEFAULT_FAIR_SHARE_STRATEGIES",
    "Admission",
    "Admit",
    "ClusterState",
    "Decisions",
    "EngineConfig",
    "FairShareStrategy",
    "NodeSlice",
    "Pending",
    "PendingCode",
    "Placement",
    "Preempt",
    "PreemptReason",
    "RunningTask",
    "TaskRequest",
    "apply_decisions",
    "decide",
    "queue_key",
]
