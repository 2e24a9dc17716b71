"""One call that does what `commons simulate` means: the run, its reference bound, its fairness.

Finish-time fairness needs the same jobs replayed under `static`; callers comparing several
variants of one policy pass that baseline in (`static=`) so it is computed once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gpucommons.domain import Policy
from gpucommons.sim.bound import BoundOutcome, utilization_bound
from gpucommons.sim.jobs import SimJob
from gpucommons.sim.report import build_report
from gpucommons.sim.simulator import RunOutcome, SimConfig, simulate

#: (phase label, jobs settled, jobs in all) — phases are the engine's name, then `static`.
PhaseProgress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class SimResult:
    outcome: RunOutcome
    bound: BoundOutcome
    static: RunOutcome | None
    report: dict[str, Any]


def bound_for(outcome: RunOutcome) -> BoundOutcome:
    capacity = dict(outcome.meter.capacity)
    units = {run.job.job_id: run.units for run in outcome.runs}
    return utilization_bound(capacity, outcome.resolution.jobs, units, outcome.window)


def run_simulation(
    policy: Policy,
    jobs: list[SimJob],
    config: SimConfig,
    *,
    fairness: bool = True,
    static: RunOutcome | None = None,
    on_progress: PhaseProgress | None = None,
) -> SimResult:
    """Simulate under `config.engine`, plus the bound and (with `fairness`) the static baseline."""

    def phase(label: str) -> Callable[[int, int], None] | None:
        if on_progress is None:
            return None
        return lambda done, total: on_progress(label, done, total)

    if config.engine == "static" and static is not None:
        outcome = static  # the baseline the caller already has *is* this run
    else:
        outcome = simulate(policy, jobs, config, phase(config.engine))
    if fairness and static is None:
        static = (
            outcome
            if config.engine == "static"
            else simulate(policy, jobs, replace(config, engine="static"), phase("static (for fairness)"))
        )
    bound = bound_for(outcome)
    return SimResult(outcome, bound, static, build_report(outcome, bound, static if fairness else None))
