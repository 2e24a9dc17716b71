"""End marks: the hint a batch script leaves when its command returns, and what Slurm says then.

A Slurm job's end reaches slurmctld at once, but GPU Commons would hear of it only at its next
`squeue` round (`SlurmExecutor.refresh_s`), and on a cluster of short tasks every GPU waits that long
at every turn. So each batch script leaves an empty `slurm-<job id>.end` beside its output when its
command returns (`submit`'s docstring), and the watcher looks for the marks of the jobs it expects
every few tens of milliseconds: a stat per running job, no call to Slurm. A mark is only a hint —
whoever may write that folder could forge one — so the jobs whose marks appeared are asked about in
one `squeue --jobs=…` (tens of tasks often end in the same instant), and a job counts as ended only
when Slurm says its script has returned (`SlurmJob.script_ended`), with Slurm's exit status and end
time. While Slurm says a job still runs (the script is just returning, or the mark is forged), it is
asked again after `recheck_s`, then twice as long each time, up to `max_recheck_s`.

Marks live in memory: after a restart the server finds its jobs' ends by `squeue` alone, as before.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpucommons.backends.slurm.jobs import JobParseError, SlurmJob

log = logging.getLogger(__name__)


class EndMarks:
    """The end marks of the jobs this server submitted, and the jobs Slurm confirmed ended."""

    def __init__(
        self, recheck_s: float = 0.1, max_recheck_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.recheck_s = recheck_s
        self.max_recheck_s = max_recheck_s
        self._clock = clock
        self._lock = threading.Lock()
        self._expected: dict[str, Path] = {}
        #: Job id → (when it may be asked about again, the wait after that).
        self._asked: dict[str, tuple[float, float]] = {}
        self._ended: dict[str, SlurmJob] = {}

    def expect(self, job_id: str, mark: Path) -> None:
        with self._lock:
            self._expected[job_id] = mark

    def look(self, ask: Callable[[Sequence[str]], Sequence[SlurmJob]]) -> bool:
        """Ask Slurm (`ask`: the jobs of these ids, in one call) about every job whose mark has
        appeared and that is due; True when one of them has ended."""
        now = self._clock()
        with self._lock:
            due = [
                (job_id, mark)
                for job_id, mark in self._expected.items()
                if now >= self._asked.get(job_id, (now, 0.0))[0]
            ]
        seen = [job_id for job_id, mark in due if mark.exists()]
        if not seen:
            return False
        with self._lock:
            for job_id in seen:
                wait = self._asked.get(job_id, (now, self.recheck_s / 2))[1] * 2
                self._asked[job_id] = (now + min(wait, self.max_recheck_s), min(wait, self.max_recheck_s))
        try:
            jobs = ask(seen)
        except (OSError, RuntimeError, JobParseError) as exc:
            log.warning("cannot read Slurm jobs %s: %s", ",".join(seen), exc)
            return False
        ended = False
        with self._lock:
            for job in jobs:
                if job.script_ended and job.job_id in self._expected:
                    self._ended[job.job_id] = job
                    ended = True
        return ended

    def ended(self, job_id: str) -> SlurmJob | None:
        """The job as Slurm described it once its mark appeared, if it had ended."""
        with self._lock:
            return self._ended.get(job_id)

    def forget(self, job_id: str) -> None:
        """The job's end was reported (or its attempt released): remove its mark, if any."""
        with self._lock:
            mark = self._expected.pop(job_id, None)
            self._asked.pop(job_id, None)
            self._ended.pop(job_id, None)
        if mark is not None:
            with contextlib.suppress(OSError):
                mark.unlink()
