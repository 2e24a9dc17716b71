"""Decide until nothing changes at one instant: the loop the live scheduler and the simulator share.

One `decide` is not the whole answer at an instant. Kueue admits one head per team per cycle; after
an admission the engine defers that cohort's preemption plans to the next cycle (as Kueue does); and
a victim stopped with a zero grace period rejoins its queue at the same instant, but only after the
cycle that chose it (docs/design.md, trap 3). So both callers run cycles back to back, at the same
`now`, until one changes nothing, and the simulator's prediction is only worth anything if the
server runs exactly this loop (docs/decisions/0010-one-loop-per-instant.md).

The loop is pure: what happens between cycles is the caller's (`InstantHands`): the simulator pops
its event heap and changes its `ClusterState`; the server settles ended attempts and writes the
store. Bounded: after `max_cycles` cycles that all changed something the loop stops and says so
(`Instant.settled` is False); the simulator calls that a zero-time loop, the server a reason to come
back at its next tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gpucommons.engine.cycle import decide
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admit, Decisions, EngineConfig, Pending, Preempt


class InstantHands(Protocol):
    """What a caller does between the cycles of one instant."""

    def take_events(self, now: float) -> None:
        """Apply to the state what has happened by `now` and not yet been applied: ends of tasks,
        victims that stopped (a zero grace period stops a victim at the instant it was chosen)."""

    def refresh_victim_inputs(self, now: float) -> bool:
        """A cycle proposes preemptions: bring inputs that only steer *which* victims are taken
        (unsaved work) up to `now`. True if the cycle must be decided again with them."""

    def apply(self, decisions: Decisions, now: float) -> bool:
        """Carry out one cycle's decisions through the state's methods; True if the state changed."""


@dataclass(frozen=True, slots=True)
class Instant:
    """What one instant's cycles decided, in the order they were decided."""

    #: Cycles run (a cycle decided again after `refresh_victim_inputs` counts once).
    cycles: int
    #: False when `max_cycles` was reached with every cycle still changing something.
    settled: bool
    admitted: tuple[Admit, ...] = ()
    preempted: tuple[Preempt, ...] = ()
    #: Why each task still waits, from the last cycle (empty when nothing was decided).
    pending: Mapping[str, Pending] = field(default_factory=dict)

    def __init__(
        self,
        cycles: int,
        settled: bool,
        admitted: tuple[Admit, ...] = (),
        preempted: tuple[Preempt, ...] = (),
        pending: Mapping[str, Pending] | None = None,
    ) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted): one per
        # instant of a replay.
        object.__setattr__(self, "cycles", cycles)
        object.__setattr__(self, "settled", settled)
        object.__setattr__(self, "admitted", admitted)
        object.__setattr__(self, "preempted", preempted)
        object.__setattr__(self, "pending", {} if pending is None else pending)

    @property
    def decisions(self) -> Decisions:
        """The instant's decisions as one `Decisions` (for callers that report per cycle)."""
        return Decisions(self.admitted, self.preempted, dict(self.pending))


def settle_instant(
    state: ClusterState, now: float, config: EngineConfig, hands: InstantHands, *, max_cycles: int
) -> Instant:
    """Take events, decide, apply; again until a cycle changes nothing or nothing waits.

    No cycle is run while nothing is pending. Deterministic: the same state, events and `now` give
    the same cycles (the engine breaks every tie by submission sequence).
    """
    cycles = 0
    admitted: list[Admit] = []
    preempted: list[Preempt] = []
    pending: Mapping[str, Pending] = {}
    while True:
        hands.take_events(now)
        if not state.pending_count():
            return Instant(cycles, True, tuple(admitted), tuple(preempted), pending)
        if cycles >= max_cycles:
            return Instant(cycles, False, tuple(admitted), tuple(preempted), pending)
        cycles += 1
        decisions = decide(state, now, config)
        if decisions.preempt and config.checkpoint_aware and hands.refresh_victim_inputs(now):
            decisions = decide(state, now, config)
        pending = decisions.pending
        changed = hands.apply(decisions, now)
        admitted += decisions.admit
        preempted += decisions.preempt
        if not changed:
            return Instant(cycles, True, tuple(admitted), tuple(preempted), pending)
