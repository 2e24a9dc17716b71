"""Leadership among server processes that share one database: the rules, without the I/O.

Every `commons up` process serves the API; exactly one, the leader, runs the scheduler and the other
background workers. Who leads is decided by a lock in the database's own world (`store.leadership`: a
PostgreSQL session advisory lock, or a file lock beside a SQLite database); the thread that takes and
watches it is `server.workers.election`. What is decided here, so it can be tested with a hand-driven
clock:

- what a process does when another one already leads (`on_refusal`): follow it, or refuse to start
  (a SQLite database has one server process, so a second one must say so and stop);
- how long a follower waits before trying again (`Election.attempted`): `retry_s` after a clean "the
  lock is taken", a growing pause (up to `backoff_max_s`) while the database cannot be reached;
- when a leader is deposed (`Election.checked`): as soon as a check says the lock is not held. There is
  no grace: once the database has dropped the session that held the lock another process may already
  lead, so the only safe answer to "lost" is to stop acting at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    FOLLOWER = "follower"
    LEADER = "leader"


class Sharing(StrEnum):
    """How a process treats a database that another process already leads."""

    #: This process must be the only server on the database: it leads from the start or refuses to
    #: start (SQLite: one process per database).
    SINGLE = "single"
    #: Several processes share the database: this one serves the API and leads when the leader goes.
    SHARED = "shared"


class Refusal(StrEnum):
    FOLLOW = "follow"
    REFUSE = "refuse"


def on_refusal(sharing: Sharing) -> Refusal:
    """What a process does when its first attempt finds the lock taken."""
    return Refusal.FOLLOW if sharing is Sharing.SHARED else Refusal.REFUSE


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    #: A follower tries for the lock this often: with the lock freed at once when a leader dies (its
    #: database session ends with its process), this bounds the takeover time.
    retry_s: float = 1.0
    #: A leader checks this often that it still holds its lock.
    check_s: float = 1.0
    #: The longest pause between attempts while the database cannot be reached at all.
    backoff_max_s: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_s <= self.backoff_max_s:
            raise ValueError("need 0 < retry_s <= backoff_max_s")
        if self.check_s <= 0:
            raise ValueError("check_s must be positive")


@dataclass(frozen=True, slots=True)
class Step:
    """What the election thread does next: wait `wait_s`, then attempt (follower) or check (leader)."""

    role: Role
    wait_s: float
    #: This step changed the role (elected, or deposed).
    changed: bool = False


class Election:
    """The role of one process and when to act next; fed with the outcome of each lock operation."""

    def __init__(self, timing: ElectionTiming | None = None) -> None:
        self.timing = timing or ElectionTiming()
        self.role = Role.FOLLOWER
        #: Consecutive attempts that failed because the database could not be reached.
        self.errors = 0
        self.attempts = 0
        #: When this process last became the leader (the caller's clock).
        self.elected_at: float | None = None
        self.deposed_at: float | None = None

    def attempted(self, acquired: bool | None, now: float) -> Step:
        """A follower tried for the lock: `True` got it, `False` found it taken, `None` failed (error)."""
        if self.role is Role.LEADER:
            raise RuntimeError("a leader does not try for the lock again")
        self.attempts += 1
        if acquired is None:
            self.errors += 1
            wait = min(self.timing.retry_s * 2 ** min(self.errors - 1, 16), self.timing.backoff_max_s)
            return Step(Role.FOLLOWER, wait)
        self.errors = 0
        if not acquired:
            return Step(Role.FOLLOWER, self.timing.retry_s)
        self.role = Role.LEADER
        self.elected_at = now
        return Step(Role.LEADER, self.timing.check_s, changed=True)

    def checked(self, held: bool, now: float) -> Step:
        """A leader checked its lock. Not held (or the check failed): deposed, at once."""
        if self.role is not Role.LEADER:
            raise RuntimeError("only a leader checks its lock")
        if held:
            return Step(Role.LEADER, self.timing.check_s)
        self.role = Role.FOLLOWER
        self.deposed_at = now
        return Step(Role.FOLLOWER, self.timing.retry_s, changed=True)
