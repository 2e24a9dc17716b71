"""What the simulator replays: one job of a trace, as docs/design.md, contract 2 describes it.

A `SimJob` is the trace's row with its request already in engine units (`Resources`), so a CSV
trace (GPUs) and a generated workload (CPUs, see `sim.workloads`) are the same thing to the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpucommons.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job: `duration_s` seconds of work on `resources`, admitted all-or-nothing (gang).

    `priority_class` and `pool` are names as the trace gives them (None = the policy's default
    class / the team's pools in the team's order). `checkpoint_interval_s` None means the job saves
    its state when it is told to stop (within its grace period), so it loses no work.
    """

    job_id: str
    team: str
    submit_s: float
    duration_s: float
    resources: Resources
    priority_class: str | None = None
    pool: str | None = None
    checkpoint_interval_s: float | None = None
    #: Line of the trace the job came from (0 for generated jobs): error messages cite it.
    line: int = 0


def with_default_checkpoint_interval(jobs: list[SimJob], interval_s: float | None) -> list[SimJob]:
    """Give every job that declares no checkpoint interval this one (a what-if on the job model)."""
    if interval_s is None:
        return jobs
    return [
        j if j.checkpoint_interval_s is not None else replace(j, checkpoint_interval_s=interval_s)
        for j in jobs
    ]
