"""Stopping an attempt: the class's signal, a grace period to save state, then SIGKILL — as data.

The server's worker must not sleep through grace periods (it serves every task at once). So the
escalation is a pure function: given when the stop was issued, the grace period, what has been
sent so far and the time now, it says what to do now and when to look again.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import StrEnum


class StopAction(StrEnum):
    SEND_SIGNAL = "send_signal"  # send the class's signal (SIGTERM by default) to the group
    WAIT = "wait"  # the grace period runs; look again at `wake_at`
    KILL = "kill"  # the grace period is over: SIGKILL the group
    WAIT_FOR_EXIT = "wait_for_exit"  # SIGKILL was sent; only the exit remains to be observed


@dataclass(frozen=True, slots=True)
class StopPlan:
    """A stop in progress: `issued_at` on the server's clock, `grace_s` seconds, which signal."""

    issued_at: float
    grace_s: float
    signum: int = signal.SIGTERM

    @property
    def deadline(self) -> float:
        return self.issued_at + max(0.0, self.grace_s)


@dataclass(frozen=True, slots=True)
class StopStep:
    action: StopAction
    #: The signal to send for SEND_SIGNAL / KILL; None otherwise.
    signum: int | None = None
    #: When to call `next_stop_step` again (None: when the attempt's exit is observed).
    wake_at: float | None = None


def next_stop_step(plan: StopPlan, now: float, *, signal_sent: bool, kill_sent: bool) -> StopStep:
    """What the worker does now for this stop. Idempotent for the same inputs; never sleeps."""
    if kill_sent:
        return StopStep(StopAction.WAIT_FOR_EXIT)
    if not signal_sent:
        # Even with no grace period the task gets its signal first (then SIGKILL at once).
        return StopStep(StopAction.SEND_SIGNAL, signum=plan.signum, wake_at=plan.deadline)
    if now >= plan.deadline:
        return StopStep(StopAction.KILL, signum=signal.SIGKILL)
    return StopStep(StopAction.WAIT, wake_at=plan.deadline)


def parse_signal(name: str | int) -> int:
    """`SIGTERM`, `TERM`, `sigterm` or `15` → 15. Raises ValueError naming the bad value."""
    if isinstance(name, int):
        candidates: str = str(name)
    else:
        candidates = name.strip()
    if candidates.isdigit():
        number = int(candidates)
        if number in {int(s) for s in signal.Signals}:
            return number
        raise ValueError(f"unknown signal number {number}")
    upper = candidates.upper()
    if not upper.startswith("SIG"):
        upper = "SIG" + upper
    try:
        return int(signal.Signals[upper])
    except KeyError:
        raise ValueError(f"unknown signal {name!r}; use a name such as SIGTERM or SIGINT") from None
