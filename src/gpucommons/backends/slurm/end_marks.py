"""End marks: the note a batch script leaves when its command returns, and how it is checked.

A Slurm job's end reaches slurmctld at once, but GPU Commons would hear of it only at its next
`squeue` round (`SlurmExecutor.refresh_s`), and on a cluster of short tasks every GPU waits that long
at every turn. So each batch script writes `slurm-<job id>.end` beside its output when its command
returns — the exit status as its shell saw it (`submit`'s docstring) — and a watcher thread looks for
the marks of the jobs it expects every few tens of milliseconds: a stat per running job, no call to
Slurm. The attempt is reported ended as soon as its mark is read; its GPUs go to the next task, whose
job Slurm starts once it has released them.

A mark is written by the job, so anyone who may write that folder could forge one: the mark is
checked against Slurm afterwards. A job Slurm still reports running `verify_s` after its mark (its
script has long returned, or it never did) is cancelled, so a forged mark ends the forger's own job —
never two jobs on one GPU (Slurm holds the next job until the GPU is free) and at most `verify_s` of
unbilled time. The status in a mark is the task's own: a task chooses its exit code anyway.

An attempt ends when its mark was written (its modification time), but never before the last look
that found no mark, so a backdated forgery cannot shorten the bill. A mark already there at the first
look (a job that ended while a restarted server was down) is not used: Slurm's records close that
attempt at its real end, as they do without marks.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpucommons.backends.ports import ExitStatus
from gpucommons.backends.slurm.jobs import JobPhase, SlurmJob

#: A mark holds one number; more is not a mark the batch script wrote.
_MAX_MARK_BYTES = 32


@dataclass(frozen=True, slots=True)
class MarkedEnd:
    status: ExitStatus
    #: time.monotonic() when the mark was read (its check against Slurm counts from then).
    read_at: float


def status_of_mark(text: str, ended_at: float) -> ExitStatus | None:
    """`3` → exit code 3; `143` → killed by signal 15 (the shell's 128 + N, as the batch shell
    re-raises it); anything else is not a mark (None)."""
    value = text.strip()
    if not value.isdigit() or int(value) > 255:
        return None
    code = int(value)
    if 128 < code <= 143:
        return ExitStatus(code=None, signal=code - 128, ended_at=ended_at)
    return ExitStatus(code=code, ended_at=ended_at)


def read_mark(path: Path) -> tuple[str, float] | None:
    """The mark's text and modification time, or None while there is none (or it is not a regular
    file). Not following a link, not blocking on a pipe: the folder may be the team's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return os.read(fd, _MAX_MARK_BYTES + 1).decode("ascii", "replace"), info.st_mtime
    finally:
        os.close(fd)


class EndMarks:
    """The end marks of the jobs this server submitted: read, then checked against Slurm."""

    def __init__(
        self,
        verify_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.verify_s = verify_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._expected: dict[str, Path] = {}
        self._ended: dict[str, MarkedEnd] = {}
        #: Job id → when its mark was read, until Slurm agrees the job has ended.
        self._unconfirmed: dict[str, float] = {}
        #: Job id → the wall-clock time of the last look that found no mark.
        self._absent_at: dict[str, float] = {}
        self._clock = clock

    def expect(self, job_id: str, mark: Path) -> None:
        with self._lock:
            self._expected.setdefault(job_id, mark)

    def look(self) -> bool:
        """Read the marks that have appeared; True when one has (the scheduler then settles it)."""
        with self._lock:
            waiting = [(job_id, mark) for job_id, mark in self._expected.items() if job_id not in self._ended]
        found = False
        for job_id, mark in waiting:
            looked_at = self._clock()
            read = read_mark(mark)
            if read is None:
                self._absent_at[job_id] = looked_at
                continue
            absent_at = self._absent_at.get(job_id)
            if absent_at is None:
                continue  # there before the first look: Slurm's records tell (module docstring)
            text, written_at = read
            status = status_of_mark(text, max(written_at, absent_at))
            if status is None:
                continue  # not what the batch script writes (a team's file): Slurm tells
            with self._lock:
                if job_id in self._expected and job_id not in self._ended:
                    self._ended[job_id] = MarkedEnd(status, self._monotonic())
                    self._unconfirmed[job_id] = self._monotonic()
                    found = True
        return found

    def ended(self, job_id: str) -> ExitStatus | None:
        """How the job ended by its mark, once the mark has been read."""
        with self._lock:
            marked = self._ended.get(job_id)
        return marked.status if marked is not None else None

    def forget(self, job_id: str) -> None:
        """The end was reported (or the attempt released): remove the mark. Its check goes on."""
        with self._lock:
            mark = self._expected.pop(job_id, None)
            self._ended.pop(job_id, None)
            self._absent_at.pop(job_id, None)
        if mark is not None:
            with contextlib.suppress(OSError):
                mark.unlink()

    def check(self, jobs: Mapping[str, SlurmJob], taken_at: float) -> list[str]:
        """Check the marks read against a round of Slurm's jobs (`taken_at`: time.monotonic() when
        the round was asked for): a job that has ended (or that Slurm has forgotten) is confirmed;
        the ids of those still running `verify_s` after their mark are returned, to be cancelled."""
        overdue = []
        with self._lock:
            for job_id, read_at in list(self._unconfirmed.items()):
                if taken_at < read_at:
                    continue  # the round was asked for before the mark was read
                job = jobs.get(job_id)
                if job is None or job.script_ended or job.phase is not JobPhase.RUNNING:
                    del self._unconfirmed[job_id]
                elif taken_at - read_at >= self.verify_s:
                    del self._unconfirmed[job_id]
                    overdue.append(job_id)
        return overdue
