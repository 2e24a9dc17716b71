"""When will a waiting task start? A replay of the live queue on the engine, with run times guessed
from the history of finished tasks.

The live scheduler and this estimate call the same `engine.decide`, so quotas, borrowing limits,
priorities and queue order are honoured exactly as they will be. What is not known is when the
running tasks end; it is guessed from the run times of finished attempts (`RunTimes`):
- a running task of age `a` ends after the `q`-quantile of `d − a` over past run times `d > a`
  (a task that has outlived every past one is given its own age again: the longer it has run, the
  longer it is likely to go on);
- a task admitted during the replay runs for the `q`-quantile of all past run times;
- a class's `max_runtime` caps both.
The replay is run three times, with the 25th, 50th and 75th percentiles of those run times: the
middle one is the likely start, the other two the range. Preemptions the engine decides during the
replay happen after the victim's grace period. Not modelled: tasks submitted later (a
higher-priority arrival can overtake), cancellations, budget holds changing, failures.

Pure: the state's contents, run times and `now` in; times out.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from gpucommons.domain.model import Policy
from gpucommons.engine import decide
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import EngineConfig, RunningTask, TaskRequest
from gpucommons.sim.stats import percentile

#: Engine cycles one replay may take before giving up (the answer is then "later than we can say").
MAX_EVENTS = 400
QUANTILES = (25.0, 50.0, 75.0)


@dataclass(frozen=True, slots=True)
class RunTimes:
    """Run times (seconds) of finished attempts, the sample the guesses are drawn from."""

    seconds: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> RunTimes:
        return cls(tuple(sorted(v for v in values if v > 0)))

    def __len__(self) -> int:
        return len(self.seconds)

    def total(self, q: float) -> float | None:
        return percentile(self.seconds, q) if self.seconds else None

    def remaining(self, age: float, q: float) -> float | None:
        longer = [d - age for d in self.seconds if d > age]
        if longer:
            return percentile(longer, q)
        return max(age, 1.0) if self.seconds else None


@dataclass(frozen=True, slots=True)
class Estimate:
    """Start times on the caller's clock (None: not within the replay's reach)."""

    earliest: float | None
    likely: float | None
    latest: float | None
    #: Why there is no estimate, when `likely` is None.
    unknown_because: str = ""


def _cap(policy: Policy, task: TaskRequest, seconds: float) -> float:
    try:
        limit = policy.priority_class(task.priority_class).max_runtime_s
    except KeyError:
        return seconds
    return min(seconds, float(limit)) if limit else seconds


def _grace(policy: Policy, task: TaskRequest) -> float:
    try:
        return float(policy.priority_class(task.priority_class).grace_period_s)
    except KeyError:
        return 30.0


def replay_start(
    policy: Policy,
    running: Sequence[RunningTask],
    pending: Sequence[TaskRequest],
    target_id: str,
    times: RunTimes,
    now: float,
    q: float,
    config: EngineConfig | None = None,
) -> float | None:
    """When `target_id` is admitted if running tasks end as guessed at quantile `q`; None if not seen."""
    config = config or EngineConfig.commons()
    state = ClusterState(policy)
    ends: list[tuple[float, int, str]] = []
    seq = 0
    preempted: set[str] = set()
    for rt in sorted(running, key=lambda r: (r.admitted_at, r.task.seq)):
        state.add_pending(rt.task)
        state.admit(rt.task.id, rt.admission, rt.admitted_at)
        remaining = times.remaining(max(0.0, now - rt.admitted_at), q)
        if remaining is None:
            return None
        left = _cap(policy, rt.task, (now - rt.admitted_at) + remaining) - (now - rt.admitted_at)
        heapq.heappush(ends, (now + max(0.0, left), seq, rt.task.id))
        seq += 1
    for task in pending:
        state.add_pending(task)
    if state.pending(target_id) is None:
        return None
    t = now
    for _ in range(MAX_EVENTS):
        decisions = decide(state, t, config)
        for admit in decisions.admit:
            state.admit(admit.task_id, admit.admission, t)
            if admit.task_id == target_id:
                return t
            started = state.running(admit.task_id)
            total = times.total(q)
            if started is None or total is None:
                return None
            heapq.heappush(ends, (t + _cap(policy, started.task, total), seq, admit.task_id))
            seq += 1
        for p in decisions.preempt:
            victim = state.running(p.victim_id)
            if victim is None or victim.preempting:
                continue
            state.mark_preempting(p.victim_id, p.preemptor_id)
            preempted.add(p.victim_id)
            heapq.heappush(ends, (t + _grace(policy, victim.task), seq, p.victim_id))
            seq += 1
        if decisions.admit:
            continue  # decide again at the same instant: more may fit now
        while ends:
            at, _, task_id = heapq.heappop(ends)
            if state.running(task_id) is None:
                continue  # already ended (a preempted victim's earlier end)
            t = max(t, at)
            if task_id in preempted:
                preempted.discard(task_id)
                state.requeue(task_id, t)
            else:
                state.finish(task_id, t)
            break
        else:
            return None
    return None


def estimate_start(
    policy: Policy,
    running: Sequence[RunningTask],
    pending: Sequence[TaskRequest],
    target_id: str,
    times: RunTimes,
    now: float,
    config: EngineConfig | None = None,
) -> Estimate:
    if not times:
        return Estimate(None, None, None, "no finished task to learn run times from yet")
    low, mid, high = (
        replay_start(policy, running, pending, target_id, times, now, q, config) for q in QUANTILES
    )
    if mid is None:
        return Estimate(
            low,
            None,
            high,
            f"the task does not start within {MAX_EVENTS} scheduling events of the replay "
            "(or it never can under the current quotas)",
        )
    return Estimate(low, mid, high)
