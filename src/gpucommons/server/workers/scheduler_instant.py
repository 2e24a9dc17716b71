"""The live scheduler's hands between the cycles of one instant (`engine.instant.InstantHands`).

A scheduler cycle runs the simulator's loop (`engine.instant.settle_instant`): settle the attempts
that ended, decide, preempt and reserve, again at the same `now` until a cycle changes nothing.
What the simulator does with its event heap and its job model, the server does here with the
supervisor (ended attempts, victims that stopped) and the actuator (signals, store writes).
Launches are only collected: the scheduler starts them once the instant is settled, outside its
lock (the engine's state already holds the admissions, so the next cycle does not need them) — except
on a backend whose starts run in threads of their own (Slurm's sbatch), where each is handed over as
soon as it is reserved: the instant's further cycles then overlap the `sbatch` calls instead of
delaying them.
"""

from __future__ import annotations

from gpucommons.engine.types import Decisions
from gpucommons.server.workers.outputs import CycleStats
from gpucommons.server.workers.scheduler_actuator import Actuator, Admissions
from gpucommons.server.workers.scheduler_supervisor import AttemptSupervisor

#: Cycles one scheduler cycle may run at one instant. The engine guarantees progress (docs/engine.md),
#: so a live instant settles in a few; the bound keeps a zero-time loop (Kueue's rules under
#: `EngineConfig.kueue()` allow them) from holding the lock: the next tick carries on.
MAX_CYCLES_PER_INSTANT = 100


class LiveInstant:
    """One scheduler cycle's instant: what it settled, preempted and reserved (caller holds `lock`)."""

    def __init__(self, supervisor: AttemptSupervisor, actuator: Actuator) -> None:
        self.supervisor = supervisor
        self.actuator = actuator
        self.stats = CycleStats()
        #: Reserved across the instant's cycles, launched once it is settled.
        self.admissions = Admissions([], [])

    def take_events(self, now: float) -> None:
        """Attempts that ended (a victim signalled in the cycle before may have stopped already)."""
        self.stats.ended += self.supervisor.watch(now)

    def refresh_victim_inputs(self, now: float) -> bool:
        """Unsaved work as of `now` (supervision refreshes it only once per tick), as the simulator
        refreshes it when a preemption is on the table; decided again only if a value changed."""
        return self.supervisor.refresh_unsaved_work(now)

    def apply(self, decisions: Decisions, now: float) -> bool:
        """Preempt, then reserve; the state changed if any preemption was issued or any admission
        reserved (one whose task is no longer pending in the store changes nothing here)."""
        preempted = sum(self.actuator.preempt(p, now) for p in decisions.preempt)
        reserved = self.actuator.reserve_all(decisions.admit, now)
        self.stats.preempted += preempted
        self.stats.admitted += reserved.reserved
        if self.actuator.starts_in_background:
            self.actuator.launch_all(Admissions(reserved.launches, []))
        else:
            self.admissions.launches += reserved.launches
        self.admissions.failed += reserved.failed
        self.admissions.reserved += reserved.reserved
        return bool(preempted or reserved.reserved)
