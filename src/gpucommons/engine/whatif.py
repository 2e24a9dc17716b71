"""What-if changes to the state during one cycle, each with its undo (Kueue's snapshot discipline).

A cycle admits, reserves and tries victims on the caller's `ClusterState` itself — no copy, so a
cycle costs what it touches — and every change goes through this log. `rollback(mark)` undoes the
changes made since `mark`; `decide()` rolls back to 0 before it returns, so the caller's state is
exactly as it was (tests assert it with `ClusterState.fingerprint()`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucommons.domain.resources import ZERO, Resources
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import NodeSlice


@dataclass(slots=True)
class _Change:  # not frozen: one is built per what-if step, and a frozen init costs twice as much
    team: str
    pool: str
    usage: Resources  # added to the team's usage
    take: tuple[NodeSlice, ...]  # GPUs taken
    give: tuple[NodeSlice, ...]  # GPUs given back

    def __init__(
        self, team: str, pool: str, usage: Resources, take: tuple[NodeSlice, ...], give: tuple[NodeSlice, ...]
    ) -> None:
        # By hand: compiled (gpucommons._native), a generated `__init__` stays interpreted.
        self.team = team
        self.pool = pool
        self.usage = usage
        self.take = take
        self.give = give


class WhatIf:
    """An undo log over a `ClusterState`'s usage and node map."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._log: list[_Change] = []

    def mark(self) -> int:
        return len(self._log)

    def _apply(self, c: _Change) -> None:
        if c.give:
            self.state.nodes.give_back(c.pool, c.give)
        if c.take:
            self.state.nodes.take(c.pool, c.take)
        if not c.usage.is_zero():
            self.state.quota.add_usage(c.team, c.pool, c.usage)
        self._log.append(c)

    def hold(self, team: str, pool: str, usage: Resources, placement: tuple[NodeSlice, ...] = ()) -> None:
        """As if the team took `usage` in the pool, on `placement`'s GPUs."""
        self._apply(_Change(team, pool, usage, placement, ()))

    def release(self, team: str, pool: str, usage: Resources, placement: tuple[NodeSlice, ...] = ()) -> None:
        """As if the team gave back `usage` and `placement`'s GPUs (a victim that stopped)."""
        self._apply(_Change(team, pool, ZERO - usage, (), placement))

    def rollback(self, mark: int = 0) -> None:
        while len(self._log) > mark:
            c = self._log.pop()
            if not c.usage.is_zero():
                self.state.quota.add_usage(c.team, c.pool, ZERO - c.usage)
            if c.take:
                self.state.nodes.give_back(c.pool, c.take)
            if c.give:
                self.state.nodes.take(c.pool, c.give)
