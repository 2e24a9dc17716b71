"""Pure rules of the cluster worker: the steps between two task states, how far an attempt has
got (to tell a stale report from a new one), and the id of work found on the cluster."""

from __future__ import annotations

import collections
import hashlib

from gpucommons.domain.task import TRANSITIONS, TaskState


def steps(current: TaskState, target: TaskState) -> list[TaskState]:
    """The shortest legal way from `current` to `target` (breadth first over the transition table,
    in the table's own order): what the task went through while the watch may have looked away."""
    if current == target:
        return []
    paths: dict[TaskState, list[TaskState]] = {current: []}
    queue = collections.deque([current])
    order = list(TaskState)
    while queue:
        state = queue.popleft()
        for nxt in sorted(TRANSITIONS[state], key=order.index):
            if nxt in paths:
                continue
            paths[nxt] = [*paths[state], nxt]
            if nxt == target:
                return paths[nxt]
            queue.append(nxt)
    raise ValueError(f"no way from {current} to {target}")


#: How far an attempt has got: a report that is behind what the store already says is stale.
_RANK = {TaskState.PENDING: 0, TaskState.ADMITTED: 1, TaskState.RUNNING: 2, TaskState.PREEMPTING: 3}


def progress(state: TaskState, attempt: int, reported: bool) -> tuple[int, int]:
    """(attempt, step) of a task's life: the eviction that ends attempt k is reported with Kueue's
    eviction count k+1 already, so a reported `preempting` belongs to the attempt before."""
    if state is TaskState.PREEMPTING and reported:
        return (attempt - 1, _RANK[state])
    return (attempt, _RANK[state])


def external_task_id(uid: str) -> str:
    """A stable id for work found on the cluster: `k` + 10 hex digits of its object's uid."""
    return "k" + hashlib.sha256(uid.encode()).hexdigest()[:10]
