"""A task as the engine sees it: the one mapping from a task to a `TaskRequest`.

The simulator predicts the live scheduler only if both hand the engine the same request for the same
task (docs/decisions/0002-one-engine-two-callers.md), so the rules live here once and each caller
only picks its fields: the server from a stored task row (`server.workers.attempts.task_request`),
the simulator from a trace job (`sim.simulator`).
"""

from __future__ import annotations

from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.engine.types import TaskRequest


def task_request(
    task_id: str,
    team: str,
    resources: Resources,
    priority_class: str,
    priority: int,
    *,
    seq: int,
    queued_at: float,
    pool: str | None,
    policy: Policy,
    stoppable: bool = True,
    checkpointed: bool,
) -> TaskRequest:
    """The engine's request for one task.

    - `priority` is the class's value when the task was submitted (the server stores it; a trace
      job is submitted under the policy it is replayed with);
    - `seq` is the global submission sequence, `queued_at` when it (re)entered its queue;
    - a task that names a `pool` may run only there; otherwise in the team's pools, in its order;
    - whether it may be preempted is its class's rule in the current `policy`; a class that has
      left the policy makes it an ordinary preemptible task; work we did not start (`stoppable`
      False: someone ran it on the cluster directly) is usage we see, not a process we may stop;
    - `checkpointed`: it declared how it saves its state (a trace job always does: on its stop
      signal, or at its interval), so consolidation may move it.
    """
    try:
        preemptible = policy.priority_class(priority_class).preemptible
    except KeyError:
        preemptible = True
    return TaskRequest(
        id=task_id,
        team=team,
        resources=resources,
        priority=priority,
        priority_class=priority_class,
        seq=seq,
        queued_at=queued_at,
        pools=(pool,) if pool else (),
        preemptible=preemptible and stoppable,
        checkpointed=checkpointed,
    )
