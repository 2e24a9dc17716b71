"""Stopping an attempt: why, and the class's signal, a grace period to save state, then SIGKILL — as data.

The server's worker must not sleep through grace periods (it serves every task at once). So the
escalation is a pure function: given when the stop was issued, the grace period, what has been
sent so far and the time now, it says what to do now and when to look again.

`stop_step` is that function over an attempt's stop as the store keeps it (`StopFields`: requested,
SIGKILL deadline, killed), and `StopFields.after` is what carrying a step out writes back; the
scheduler's supervisor decides every step of every stop through these two and nothing else
(docs/design.md, "Stopping an attempt"). Why a stop was started is a `StopReason`, stored as its
value; a value this version does not know reads as `StopReason.UNKNOWN`, never as an error.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from enum import StrEnum


class StopReason(StrEnum):
    """Why the control plane stopped an attempt: where the task goes when the attempt ends."""

    PREEMPTED = "preempted"  # the engine (or Kueue) chose it as a victim: requeued
    NODE_LEFT = "node_left"  # a node left service under a task that can resume: requeued
    MAX_RUNTIME = "max_runtime"  # ran for its class's max_runtime: failed
    CANCELLED = "cancelled"  # someone cancelled it: cancelled
    #: Stored by a newer version (rolled back since: a new reason needs no schema revision): the
    #: stop was ours, so the attempt's end is not a lost node's, and its exit status decides.
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, stored: str | None) -> StopReason | None:
        """The reason a stored value names; None for no stop; `UNKNOWN` for a value not listed."""
        if stored is None:
            return None
        try:
            return cls(stored)
        except ValueError:
            return cls.UNKNOWN


#: A SIGKILL whose end the backend has not confirmed is sent again this long after the last one:
#: a kill can be lost (a failed `scancel` on Slurm, a controller that did not answer).
KILL_RETRY_S = 30.0
#: How long after the first SIGKILL the control plane stops sending more and asks a person: it
#: says so in the task's events and keeps the attempt's GPUs held until the end is confirmed, since
#: freeing them while the process may still run could give one GPU to two tasks.
GIVE_UP_AFTER_S = 300.0


class StopAction(StrEnum):
    SEND_SIGNAL = "send_signal"  # send the class's signal (SIGTERM by default) to the group
    WAIT = "wait"  # the grace period runs; look again at `wake_at`
    KILL = "kill"  # the grace period is over (or the last SIGKILL did not take): SIGKILL the group
    WAIT_FOR_EXIT = "wait_for_exit"  # SIGKILL was sent; only the exit remains to be observed
    GIVE_UP = "give_up"  # SIGKILLs for `GIVE_UP_AFTER_S` and no end: stop sending, tell a person


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
    """What the worker does now for this stop. Idempotent for the same inputs; never sleeps.

    For a caller that watches one process and sees its exit at once (the executor's own tests):
    once SIGKILL is sent only the exit remains, with no retry (`stop_step` retries)."""
    if kill_sent:
        return StopStep(StopAction.WAIT_FOR_EXIT)
    step = _step(plan.deadline, plan.signum, now, signal_sent=signal_sent, stored=StopFields())
    # No retry here: after SIGKILL the caller looks again when the exit is seen.
    return replace(step, wake_at=None) if step.action is StopAction.KILL else step


def _step(deadline: float, signum: int, now: float, *, signal_sent: bool, stored: StopFields) -> StopStep:
    """The one rule of every stop: signal first, wait out the deadline, SIGKILL; then SIGKILL again
    every `KILL_RETRY_S` until the end is seen, and give up sending after `GIVE_UP_AFTER_S` (the
    kills so far are `stored`'s `killed_at`, `last_kill_at` and `gave_up_at`)."""
    if stored.killed_at is not None:
        if stored.gave_up_at is not None:
            return StopStep(StopAction.WAIT_FOR_EXIT)
        give_up_at = stored.killed_at + GIVE_UP_AFTER_S
        if now >= give_up_at:
            return StopStep(StopAction.GIVE_UP)
        last = stored.last_kill_at if stored.last_kill_at is not None else stored.killed_at
        retry_at = last + KILL_RETRY_S
        if now >= retry_at:
            return StopStep(
                StopAction.KILL, signum=signal.SIGKILL, wake_at=min(now + KILL_RETRY_S, give_up_at)
            )
        return StopStep(StopAction.WAIT_FOR_EXIT, wake_at=min(retry_at, give_up_at))
    if not signal_sent:
        # Even with no grace period the task gets its signal first (then SIGKILL at once).
        return StopStep(StopAction.SEND_SIGNAL, signum=signum, wake_at=deadline)
    if now >= deadline:
        return StopStep(StopAction.KILL, signum=signal.SIGKILL, wake_at=now + KILL_RETRY_S)
    return StopStep(StopAction.WAIT, wake_at=deadline)


@dataclass(frozen=True, slots=True)
class StopFields:
    """An attempt's stop as the store keeps it: when it was requested (the class's signal goes with
    the request), when SIGKILL is due, when the first SIGKILL was sent, how many were sent and when
    the last, when the stop gave up sending them. All None: no stop yet."""

    requested_at: float | None = None
    deadline: float | None = None
    killed_at: float | None = None
    kills: int = 0
    last_kill_at: float | None = None
    gave_up_at: float | None = None

    def kill_due(self, grace_s: float, now: float) -> float:
        """When SIGKILL is due: the deadline stored when the stop started (never before it); for a
        stop not started, `grace_s` from `now`; for one stored without a deadline, from its request."""
        if self.requested_at is None:
            return StopPlan(issued_at=now, grace_s=grace_s).deadline
        if self.deadline is None:
            return StopPlan(issued_at=self.requested_at, grace_s=grace_s).deadline
        return max(self.requested_at, self.deadline)

    def after(self, step: StopStep, now: float) -> StopFields:
        """The fields once `step` has been carried out at `now` (what the caller stores)."""
        if step.action is StopAction.SEND_SIGNAL:
            return StopFields(requested_at=now, deadline=step.wake_at, killed_at=None)
        if step.action is StopAction.KILL:
            first = self.killed_at if self.killed_at is not None else now
            # A kill stored by an older version (no count) was one.
            sent = max(self.kills, 1 if self.killed_at is not None else 0) + 1
            return replace(self, killed_at=first, kills=sent, last_kill_at=now)
        if step.action is StopAction.GIVE_UP:
            return replace(self, gave_up_at=now)
        return self


def stop_step(fields: StopFields, now: float, *, grace_s: float, signum: int) -> StopStep:
    """The next step of a stop the caller wants (or has started), given its stored fields.

    No stop yet: signal now, SIGKILL due after the class's `grace_s`. Started: the deadline stored
    when it started stands (a policy applied meanwhile changes later stops, not this one); a stop
    recorded without one (Kueue's evictions leave the grace to the cluster) gets `grace_s` from its
    request rather than an immediate SIGKILL. Once SIGKILL is sent it is sent again every
    `KILL_RETRY_S` until the backend reports the end, and after `GIVE_UP_AFTER_S` the stop gives
    up sending (GIVE_UP, once; then it only waits): a person must look at a process no SIGKILL
    ends.
    """
    return _step(
        fields.kill_due(grace_s, now),
        signum,
        now,
        signal_sent=fields.requested_at is not None,
        stored=fields,
    )


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
