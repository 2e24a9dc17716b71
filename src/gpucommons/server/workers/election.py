"""The election thread: take the leadership lock when it is free, run the leader's duties, watch it.

Every server process runs one `ElectionWorker` (started by the app's lifespan). A follower tries for
the lock every second; the process that gets it starts its duties in order — the scheduler
(`recover()` then its thread), the budget watcher, the planning runner, and whatever a backend adds
with `add_duty` (e.g. its watchers) — and from then on checks every second that it still holds the
lock. The rules (when to try again, when the lock counts as lost) are `domain.election`; the lock
itself is `store.leadership`.

Losing the lock while leading: the default `on_lost` logs and ends the process at once
(`os._exit(LOST_EXIT_CODE)`), and a supervisor (systemd `Restart=always`, a Kubernetes Deployment)
starts it again, as a follower. Why not just stop the duties and follow: once the lock is gone
another process may already lead, so nothing here may write another row or launch another process.
A cooperative stop cannot promise that — the scheduler may be in the middle of a cycle (reserving
GPUs, launching attempts, settling exits) and other threads may hold state derived from being the
leader — and a stop that is slow or stuck would leave two leaders side by side for that long. Ending
the process ends every thread at the same instant; the attempts it launched run on in their own
sessions and are re-adopted by the new leader, exactly as after any crash (`Scheduler.recover`), and
the writes it had in flight are the ones a crash would have left, which recovery already handles.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpucommons.domain.election import Election, ElectionTiming, Refusal, Role, Sharing, on_refusal
from gpucommons.store.leadership import Leadership

log = logging.getLogger(__name__)

#: The exit code of a leader that lost its lock (EX_TEMPFAIL: "try again", which a restart does).
LOST_EXIT_CODE = 75


class LeadershipRefused(RuntimeError):
    """Another process leads a database this process may not share (SQLite)."""


@dataclass
class Duty:
    """Work only the leader does: started when this process becomes the leader, stopped at exit."""

    name: str
    start: Callable[[], None]
    stop: Callable[[], None]


def exit_process(reason: str) -> None:
    """The default reaction to a lost lock: say why and end the process now (module docstring)."""
    log.critical("%s; exiting so that a supervisor restarts this process as a follower", reason)
    sys.stderr.write(
        f"commons up: {reason}; exiting (code {LOST_EXIT_CODE}) so that it restarts as a follower\n"
    )
    sys.stderr.flush()
    os._exit(LOST_EXIT_CODE)


class ElectionWorker:
    def __init__(
        self,
        leadership: Leadership,
        *,
        sharing: Sharing,
        timing: ElectionTiming | None = None,
        on_lost: Callable[[str], None] = exit_process,
        while_following: Callable[[], None] | None = None,
        follow_every_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leadership = leadership
        self.sharing = sharing
        self.election = Election(timing)
        self._on_lost = on_lost
        #: Called every `follow_every_s` while this process follows (e.g. refresh the read-only views).
        self._while_following = while_following
        self._follow_every_s = follow_every_s
        self._clock = clock
        self._duties: list[Duty] = []
        self._started: list[Duty] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_step = 0.0
        #: When this process became the leader (time.time()), for /healthz and the log.
        self.leader_since: float | None = None

    # --- duties ------------------------------------------------------------------------------------

    def add_duty(self, name: str, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Register leader-only work; started at once when this process already leads."""
        duty = Duty(name, start, stop)
        with self._lock:
            self._duties.append(duty)
            if self.role is Role.LEADER and self._thread is not None:
                self._start_duty(duty)

    def _start_duty(self, duty: Duty) -> None:
        log.info("leader: starting %s", duty.name)
        duty.start()
        self._started.append(duty)

    def _stop_duties(self) -> None:
        while self._started:
            duty = self._started.pop()
            try:
                duty.stop()
            except Exception:
                log.exception("stopping %s failed", duty.name)

    # --- state -------------------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self.election.role

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- the thread --------------------------------------------------------------------------------

    def start(self) -> Role:
        """First attempt now (so the caller knows its role), then the thread. Raises
        `LeadershipRefused` when another process leads and this one may not follow."""
        self._attempt(starting=True)
        if self.role is Role.FOLLOWER and on_refusal(self.sharing) is Refusal.REFUSE:
            holder = self.leadership.holder()
            raise LeadershipRefused(
                f"another server process ({holder or 'unknown'}) already runs on this database "
                f"({self.leadership.describe()}); a SQLite database serves one `commons up` at a time: "
                "stop the other one, or use PostgreSQL (COMMONS_DATABASE_URL) to run several replicas"
            )
        self._thread = threading.Thread(target=self._run, name="commons-election", daemon=True)
        self._thread.start()
        return self.role

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._lock:
            self._stop_duties()
        self.leadership.release()

    def _run(self) -> None:
        next_follow = 0.0
        while not self._stop.wait(max(0.0, self._next_step - self._clock())):
            if self.role is Role.LEADER:
                self._check()
                continue
            self._attempt()
            if self.role is Role.FOLLOWER and self._while_following is not None:
                now = self._clock()
                if now >= next_follow:
                    next_follow = now + self._follow_every_s
                    try:
                        self._while_following()
                    except Exception:
                        log.exception("follower refresh failed")

    def _attempt(self, starting: bool = False) -> None:
        try:
            acquired: bool | None = self.leadership.try_acquire()
        except Exception as exc:
            log.warning("cannot reach %s: %s", self.leadership.describe(), exc)
            acquired = None
        step = self.election.attempted(acquired, self._clock())
        self._next_step = self._clock() + step.wait_s
        if step.changed:
            self._become_leader(starting)

    def _become_leader(self, starting: bool) -> None:
        """Take up the leader's duties. Leading from the start is the common case of a single
        server (its banner says so); taking over later means another leader went away, which
        operators want to see in the log."""
        self.leader_since = time.time()
        log.log(
            logging.INFO if starting else logging.WARNING,
            "this process is now the leader (%s)",
            self.leadership.describe(),
        )
        with self._lock:
            try:
                for duty in self._duties:
                    if duty not in self._started:
                        self._start_duty(duty)
            except Exception as exc:
                log.exception("a leader duty failed to start")
                self._lost(f"a leader duty failed to start: {exc}")

    def _check(self) -> None:
        step = self.election.checked(self.leadership.still_held(), self._clock())
        self._next_step = self._clock() + step.wait_s
        if step.changed:
            self._lost(f"lost the leadership ({self.leadership.describe()} is no longer held)")

    def _lost(self, reason: str) -> None:
        self.leader_since = None
        self._on_lost(reason)
