"""Applying a cycle's decisions to the state all at once: a helper for tests and property checks
(`gpucommons.testing.builders.settle`, `gpucommons.testing.strategies.MiniSim`, the engine's tests).

Neither the live server nor the simulator calls it: each applies a decision as it carries it out,
through the same state methods (`ClusterState.admit` when the server reserves a task's GPUs, just
before its launch, or the simulator starts a job; `mark_preempting` when a victim is signalled or
Kueue reports an eviction; `requeue` once it has stopped). Passing the preemptor
along with each victim is what keeps the preemptor's claim on the freed GPUs (docs/design.md,
trap 1).
"""

from __future__ import annotations

from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Decisions


def apply_decisions(state: ClusterState, decisions: Decisions, now: float) -> None:
    """Admit what was admitted and mark victims as preempting (they still hold their GPUs).

    The caller requeues each victim (`state.requeue(victim, later)`) when it has actually stopped,
    after its grace period — at a later event than this one, even with a zero grace period
    (docs/design.md, trap 3).
    """
    for p in decisions.preempt:
        state.mark_preempting(p.victim_id, p.preemptor_id)
    for a in decisions.admit:
        state.admit(a.task_id, a.admission, now)
