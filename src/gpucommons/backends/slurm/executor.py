"""`SlurmExecutor`: the Executor port on a Slurm cluster — our engine places, Slurm runs the job.

Each attempt is one `sbatch` pinned to the nodes and GPU counts the engine chose (`tracking`
maps the engine's node numbers to Slurm's names), under the team's Slurm account and, when the server
runs as root with team accounts, the team's Unix user (`sbatch --uid`). The handle stores the job id,
so a restarted server finds the job again by id (`find_attempt` by the job's name,
`gpucommons:<task>:<attempt>`, for one launched just before a crash).

Watching costs one `squeue --states=all` per round for every job (`refresh_s`), not one call per
attempt: the scheduler polls every handle each cycle and reads this round's snapshot; only a job that
ended other than COMPLETED costs one `scontrol show job ID` more, for its exit code. Between rounds,
every `mark_s`, a second watcher reads the end marks batch scripts leave (`end_marks`): an attempt is
reported ended as soon as its mark is read, and its GPUs go to the next task while Slurm is still
cleaning up, instead of up to a round later; each round then checks the marks against Slurm. The
nodes are read every `inventory_s`: a node that is down, drained or not responding is out of service
for the engine, and an attempt on a node that is down or does not answer is reported lost at once (its
task is requeued or failed by the scheduler), and cancelled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpucommons.backends.ports import (
    BackendTraits,
    ExecutorBase,
    ExitStatus,
    ForeignWork,
    Handle,
    Launch,
    LaunchError,
    Workplace,
)
from gpucommons.backends.slurm.accounts import team_account
from gpucommons.backends.slurm.client import SlurmClient, SlurmError
from gpucommons.backends.slurm.end_marks import EndMarks
from gpucommons.backends.slurm.inventory import SlurmInventory, build_inventory
from gpucommons.backends.slurm.jobs import JobParseError, JobPhase, SlurmJob
from gpucommons.backends.slurm.nodes import NodeParseError
from gpucommons.backends.slurm.submit import RunAs, SlurmSubmission, SubmitError, end_mark_path
from gpucommons.backends.slurm.tracking import (
    PlacementError,
    exit_status,
    foreign_work,
    handle_for,
    job_of,
    latest_attempt,
    ours,
    out_of_service,
    placement_nodes,
    pool_nodes,
)

if TYPE_CHECKING:
    from gpucommons.backends.local.accounts import TeamAccounts
    from gpucommons.domain.model import Policy

log = logging.getLogger(__name__)

#: Reported for a job the controller has forgotten and accounting cannot tell about.
GONE = ExitStatus(code=None, signal=9)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    jobs: Mapping[str, SlurmJob]
    #: time.monotonic() just before the command ran: jobs submitted after it may be missing.
    taken_at: float


class SlurmExecutor(ExecutorBase):
    """`ports.Executor` on Slurm. `partition`: only its nodes are looked at and jobs go there."""

    #: sbatch takes tens of milliseconds (a round trip to slurmctld, more on a busy one): one after
    #: the other they would bound throughput; `find_attempt` finds a job by name after a crash.
    traits = BackendTraits(name="slurm", concurrent_starts=8)

    def __init__(
        self,
        client: SlurmClient,
        *,
        partition: str | None = None,
        accounts: TeamAccounts | None = None,
        refresh_s: float = 0.2,
        inventory_s: float = 2.0,
        mark_s: float = 0.02,
        mark_verify_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        log_dir: Path | None = None,
    ) -> None:
        """`log_dir`: where the server keeps task logs (HOME/logs); with team accounts a job cannot
        write there, so its output goes to the team's workspace and is appended to the log when the
        attempt ends."""
        self.client = client
        self.log_dir = log_dir
        self.partition = partition
        self.accounts = accounts
        self.refresh_s = refresh_s
        self.inventory_s = inventory_s
        self.mark_s = mark_s
        self._clock = clock
        self._lock = threading.RLock()
        self._policy: Policy | None = None
        self._order: dict[str, tuple[str, ...]] = {}
        self._inventory: SlurmInventory | None = None
        self._out: dict[str, dict[int, str]] = {}
        self._lost_nodes: frozenset[str] = frozenset()
        self._inventory_at = float("-inf")
        self._snapshot = _Snapshot({}, float("-inf"))
        #: Job id → time.monotonic() of its sbatch (a snapshot older than that may not list it).
        self._submitted: dict[str, float] = {}
        #: Statuses already reported, so a second poll answers the same once Slurm forgets the job.
        self._ended: dict[str, ExitStatus] = {}
        #: `mark_verify_s`: how long Slurm may still report a job running after its end mark.
        self._marks = EndMarks(verify_s=mark_verify_s)
        self._teams_by_account: dict[str, str] = {}
        self._wake: Callable[[], None] | None = None
        self._watcher: threading.Thread | None = None
        self._closing = threading.Event()

    # --- the cluster -----------------------------------------------------------------------------

    def use_policy(self, policy: Policy) -> None:
        with self._lock:
            self._policy = policy
            self._teams_by_account = {team_account(t.name): t.name for t in policy.teams}
            self._read_nodes()

    def _read_nodes(self) -> None:
        """Nodes → pools. The commands run without `_lock` (the watcher calls this: polls and starts
        must not wait for Slurm); the result is swapped in under it. A failure keeps the last
        inventory: a controller that does not answer for a moment must not empty the cluster."""
        policy = self._policy
        if policy is None:
            return
        self._inventory_at = time.monotonic()
        try:
            nodes = self.client.nodes()
        except (SlurmError, NodeParseError) as exc:
            log.warning("cannot read the Slurm nodes: %s", exc)
            return
        inventory = build_inventory(nodes, policy.pools, self.partition)
        order = pool_nodes(nodes, inventory)
        out = out_of_service(inventory, order, {p.name: p.nodes for p in policy.pools})
        with self._lock:
            if self._inventory is None or inventory.notes != self._inventory.notes:
                for note in inventory.notes:
                    log.warning("slurm inventory: %s", note)
            self._inventory, self._order, self._out = inventory, order, out
            self._lost_nodes = frozenset(inventory.lost_nodes())

    def check(self) -> int:
        """Read the nodes now (start-up): how many; raises SlurmError when the controller does not
        answer, so a server pointed at the wrong slurm.conf says so instead of starting empty."""
        return len(self.client.nodes())

    def out_of_service(self) -> Mapping[str, Mapping[int, str]]:
        with self._lock:
            self._refresh()
            return self._out

    def foreign_work(self) -> tuple[ForeignWork, ...]:
        with self._lock:
            self._refresh()
            return foreign_work(
                self._snapshot.jobs.values(), self._order, self._teams_by_account, "", self._clock()
            )

    def _refresh(self, force: bool = False) -> _Snapshot:
        """This round's jobs (one squeue per `refresh_s`) and the nodes every `inventory_s` (caller
        holds `_lock`). With the watcher running (`on_exit`), the last snapshot it took, at once: the
        scheduler's cycle then never waits for Slurm's commands."""
        if self._watcher is not None and not force and self._snapshot.taken_at > float("-inf"):
            return self._snapshot
        now = time.monotonic()
        if now - self._inventory_at >= self.inventory_s:
            self._read_nodes()
        if force or now - self._snapshot.taken_at >= self.refresh_s:
            try:
                jobs = self.client.watch()
            except (SlurmError, JobParseError) as exc:
                log.warning("cannot read the Slurm jobs: %s", exc)
                return self._snapshot
            self._snapshot = _Snapshot({j.job_id: j for j in jobs}, now)
        return self._snapshot

    def on_exit(self, wake: Callable[[], None]) -> None:
        """Watch Slurm in threads of our own: one squeue per `refresh_s` and the nodes every
        `inventory_s` in one, the end marks every `mark_s` in another (a round of squeue on a
        busy controller would otherwise hold them up); `wake` the scheduler when one of our jobs has
        ended or a node was lost."""
        self._wake = wake
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch_loop, name="commons-slurm-watch", daemon=True)
            self._watcher.start()
            marks = threading.Thread(target=self._marks_loop, name="commons-slurm-marks", daemon=True)
            marks.start()

    def close(self) -> None:
        self._closing.set()

    def _watch_loop(self) -> None:
        self._every(self.refresh_s, self._watch_once)

    def _marks_loop(self) -> None:
        self._every(self.mark_s, self._look_for_marks)

    def _every(self, period_s: float, step: Callable[[], None]) -> None:
        while not self._closing.is_set():
            started = time.monotonic()
            try:
                step()
            except Exception:  # never let a watcher die: the scheduler would go blind
                log.exception("watching Slurm failed")
            self._closing.wait(max(0.0, period_s - (time.monotonic() - started)))

    def _watch_once(self) -> None:
        if time.monotonic() - self._inventory_at >= self.inventory_s:
            self._read_nodes()
        taken = time.monotonic()
        try:
            jobs = {j.job_id: j for j in self.client.watch()}
        except (SlurmError, JobParseError) as exc:
            log.warning("cannot read the Slurm jobs: %s", exc)
            return
        with self._lock:
            before = self._snapshot.jobs
            self._snapshot = _Snapshot(jobs, taken)
            lost = self._lost_nodes
        self._cancel_overdue(jobs, taken)
        ended = any(
            j.phase is JobPhase.ENDED
            and ours(j) is not None
            and (old := before.get(j.job_id)) is not None
            and old.phase is not JobPhase.ENDED
            for j in jobs.values()
        ) or any(set(j.nodes) & lost for j in jobs.values() if ours(j) and j.phase is JobPhase.RUNNING)
        if ended and self._wake is not None:
            self._wake()

    def _look_for_marks(self) -> None:
        if self._marks.look() and self._wake is not None:
            self._wake()

    def _cancel_overdue(self, jobs: Mapping[str, SlurmJob], taken: float) -> None:
        """Jobs Slurm still runs long after their end mark was read: the mark was forged (or the
        script hangs after it); their attempt was settled, so they must not go on unbilled."""
        for job_id in self._marks.check(jobs, taken):
            after = self._marks.verify_s
            log.warning("Slurm job %s still runs %.0f s after its end mark: cancelling it", job_id, after)
            with contextlib.suppress(SlurmError):
                self.client.cancel(job_id)

    # --- where -----------------------------------------------------------------------------------

    def workplace(self, team: str, task_id: str) -> Workplace | None:
        if self.accounts is None:
            return None
        place = self.accounts.prepare_task(team, task_id)
        return Workplace(place.workdir, place.checkpoint_dir, place.run_as)

    # --- starting --------------------------------------------------------------------------------

    def start(self, launch: Launch) -> Handle:
        with self._lock:
            try:
                nodes, gpus = placement_nodes(launch.pool, launch.placement, self._order)
            except PlacementError as exc:
                raise LaunchError(f"task {launch.task_id}: {exc}") from None
        if launch.run_as is not None and os.geteuid() != 0:
            raise LaunchError(
                f"task {launch.task_id} should run as {launch.run_as!r}: "
                "sbatch --uid needs the server to run as root"
            )
        env = dict(launch.env)
        output_dir = launch.workdir / ".commons" / "output"
        # As the server's user the job appends to the task's log; a team account cannot open the
        # server's private log directory, so its job writes a file of its own per attempt.
        output = launch.log_path if launch.run_as is None else None
        submission = SlurmSubmission(
            task_id=launch.task_id,
            team=launch.team,
            attempt=int(env.get("COMMONS_RESTART_COUNT", "0") or 0),
            command=launch.command,
            nodes=nodes,
            gpus_per_node=gpus,
            workdir=launch.workdir,
            checkpoint_dir=Path(env.get("COMMONS_CHECKPOINT_DIR", str(launch.workdir))),
            output_dir=output_dir,
            output=output,
            # Beside the output: a folder the job's user may write, on the nodes' shared file system.
            end_mark_dir=output.parent if output is not None else output_dir,
            account=team_account(launch.team),
            partition=self.partition,
            run_as=RunAs(launch.run_as) if launch.run_as else None,
            env=env,
        )
        if launch.run_as is not None:
            _make_output_dir(submission.output_dir, launch.run_as)
        try:
            submitted = self.client.submit(submission)
        except (SlurmError, SubmitError) as exc:
            raise LaunchError(f"sbatch refused task {launch.task_id}: {exc}") from None
        with self._lock:
            self._submitted[submitted.job_id] = time.monotonic()
        if (folder := submission.end_mark_folder) is not None:
            self._marks.expect(submitted.job_id, end_mark_path(folder, submitted.job_id))
        handle = handle_for(launch.task_id, submitted.job_id, len(nodes))
        if launch.run_as is not None:
            # Stored with the handle, so the output is found again after a restart.
            handle = replace(handle, exit_file=submitted.output_path)
        return handle

    # --- stopping --------------------------------------------------------------------------------

    def signal(self, handle: Handle, signum: int) -> None:
        job = job_of(handle)
        if job is None:
            return
        try:
            self.client.signal(job[0], str(signum), multi_node=job[1])
        except SlurmError as exc:
            log.warning("cannot signal Slurm job %s: %s", job[0], exc)

    def kill(self, handle: Handle) -> None:
        job = job_of(handle)
        if job is None:
            return
        try:
            self.client.cancel(job[0])
        except SlurmError as exc:
            log.warning("cannot cancel Slurm job %s: %s", job[0], exc)

    # --- watching --------------------------------------------------------------------------------

    def poll(self, handle: Handle) -> ExitStatus | None:
        job = job_of(handle)
        if job is None:
            return GONE
        job_id = job[0]
        with self._lock:
            if job_id in self._ended:
                return self._ended[job_id]
            if (mark := self._mark_of(handle, job_id)) is not None:
                self._marks.expect(job_id, mark)  # again after a restart: the job's mark is still due
            if (marked := self._marks.ended(job_id)) is not None:
                self._ended[job_id] = marked
        if marked is not None:
            self._marks.forget(job_id)
            self._collect_output(handle)
            return marked
        with self._lock:
            snapshot = self._refresh()
            if job_id not in snapshot.jobs and snapshot.taken_at < self._submitted.get(job_id, float("-inf")):
                if self._watcher is not None:
                    return None  # submitted after the last look: the watcher's next one lists it
                snapshot = self._refresh(force=True)
            found = snapshot.jobs.get(job_id)
            if found is not None and found.phase is JobPhase.ENDED and found.exit is None:
                found = self._with_exit(found)
            status = exit_status(found, self._lost_nodes) if found is not None else self._forgotten(job_id)
            if status is None:
                return None
            self._ended[job_id] = status
        self._marks.forget(job_id)
        self._collect_output(handle)
        if status.lost is not None and found is not None and not found.script_ended:
            with contextlib.suppress(SlurmError):
                self.client.cancel(job_id)
        return status

    def _mark_of(self, handle: Handle, job_id: str) -> Path | None:
        """Where the job's end mark goes: beside its output, which is the task's log (in `log_dir`)
        or, with team accounts, the attempt's own file in the team's workspace (`exit_file`)."""
        folder = handle.exit_file.parent if handle.exit_file is not None else self.log_dir
        return end_mark_path(folder, job_id) if folder is not None else None

    def _collect_output(self, handle: Handle) -> None:
        """An attempt that wrote its output in the team's workspace: append it to the task's log once
        it has ended (not following a link the team may have put there)."""
        if handle.exit_file is None or self.log_dir is None:
            return
        try:
            fd = os.open(handle.exit_file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return
        with os.fdopen(fd, "rb") as source, (self.log_dir / f"{handle.task_id}.log").open("ab") as log:
            while chunk := source.read(1 << 20):
                log.write(chunk)
        with contextlib.suppress(OSError):
            handle.exit_file.unlink()

    def _with_exit(self, job: SlurmJob) -> SlurmJob:
        """An ended job as scontrol reports it, with its exit code (squeue does not print it)."""
        with contextlib.suppress(SlurmError, JobParseError):
            full = self.client.job(job.job_id)
            if full is not None:
                return full
        return job

    def _forgotten(self, job_id: str) -> ExitStatus:
        """A job the controller no longer lists (ended longer than MinJobAge ago): accounting, if the
        cluster has it, says how it ended; otherwise it is reported killed."""
        with contextlib.suppress(SlurmError, JobParseError):
            for job in self.client.accounting([job_id]):
                if job.job_id == job_id:
                    status = exit_status(job)
                    if status is not None:
                        return status
        return GONE

    def is_alive(self, handle: Handle) -> bool:
        return self.poll(handle) is None

    def release(self, handle: Handle) -> None:
        job = job_of(handle)
        if job is not None:
            with self._lock:
                self._ended.pop(job[0], None)
                self._submitted.pop(job[0], None)
            self._marks.forget(job[0])

    def find_attempt(self, task_id: str) -> Handle | None:
        with self._lock:
            found = latest_attempt(self._refresh(force=True).jobs.values(), task_id)
        if found is None:
            return None
        return handle_for(task_id, found.job_id, max(1, len(found.nodes)))


def _make_output_dir(folder: Path, account: str) -> None:
    """The team's output folder in its workspace, owned by its account (slurmstepd opens the job's
    output as the job's user)."""
    import pwd

    try:
        entry = pwd.getpwnam(account)
        folder.mkdir(parents=True, exist_ok=True, mode=0o770)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    except (KeyError, OSError) as exc:
        raise LaunchError(f"cannot prepare {folder} for {account}: {exc}") from None
