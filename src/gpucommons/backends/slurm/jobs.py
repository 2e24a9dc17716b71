"""Slurm jobs as GPU Commons needs them: state, where they run, what they hold, how they ended.

Three sources, one shape (`SlurmJob`):
- `scontrol show job --oneliner`: every job the controller still remembers, ended ones included for
  `MinJobAge` (default 300 s) — the exit code of a job that just ended comes from here;
- `squeue` with `SQUEUE_FIELDS`: pending and running jobs only, cheaper to poll;
- `sacct -P` with `SACCT_FIELDS` (accounting): jobs the controller has forgotten, after a restart of
  GPU Commons. Its job line shows `0:0` for a cancelled job whose batch step was killed by a signal,
  so the batch step's line is read too (`exit_from_sacct`). Never `sacct --json` on Slurm 22.05: it
  reports wrong exit codes.

Times: the client runs these commands with `SLURM_TIME_FORMAT=%s`, so they print seconds since the
epoch; an ISO time (what Slurm prints without that setting) is read as UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from gpucommons.backends.slurm.hostlist import HostlistError, expand
from gpucommons.backends.slurm.keyvalue import optional, parse_records
from gpucommons.backends.slurm.tres import TresError, parse_tres, requested_gpus, tres_gpus


class JobPhase(StrEnum):
    """What GPU Commons does with a job: wait for it, count it as running, or collect its end."""

    PENDING = "pending"
    RUNNING = "running"
    ENDED = "ended"
    #: A state this code does not know (a newer Slurm): keep polling, count nothing.
    UNKNOWN = "unknown"


#: Slurm job states (squeue(1) "JOB STATE CODES") by phase. COMPLETING still holds its nodes.
_PHASES: Mapping[str, JobPhase] = {
    "PENDING": JobPhase.PENDING,
    "REQUEUED": JobPhase.PENDING,
    "REQUEUE_HOLD": JobPhase.PENDING,
    "REQUEUE_FED": JobPhase.PENDING,
    "RESV_DEL_HOLD": JobPhase.PENDING,
    "CONFIGURING": JobPhase.RUNNING,
    "RUNNING": JobPhase.RUNNING,
    "COMPLETING": JobPhase.RUNNING,
    "SUSPENDED": JobPhase.RUNNING,
    "STOPPED": JobPhase.RUNNING,
    "SIGNALING": JobPhase.RUNNING,
    "STAGE_OUT": JobPhase.RUNNING,
    "RESIZING": JobPhase.RUNNING,
    "COMPLETED": JobPhase.ENDED,
    "CANCELLED": JobPhase.ENDED,
    "FAILED": JobPhase.ENDED,
    "TIMEOUT": JobPhase.ENDED,
    "NODE_FAIL": JobPhase.ENDED,
    "PREEMPTED": JobPhase.ENDED,
    "BOOT_FAIL": JobPhase.ENDED,
    "DEADLINE": JobPhase.ENDED,
    "OUT_OF_MEMORY": JobPhase.ENDED,
    "SPECIAL_EXIT": JobPhase.ENDED,
    "REVOKED": JobPhase.ENDED,
}
#: Ended states in which the job's work was lost to the machine, not to the job: requeue the task.
LOST_TO_THE_MACHINE = frozenset({"NODE_FAIL", "BOOT_FAIL"})


def job_phase(state: str) -> JobPhase:
    """`RUNNING` → RUNNING; sacct's `CANCELLED by 0` → ENDED; an unknown word → UNKNOWN."""
    return _PHASES.get(_state_word(state), JobPhase.UNKNOWN)


def _state_word(state: str) -> str:
    # sacct prints "CANCELLED by 1000"; squeue may add flags after a '+'.
    return state.strip().split(" ", 1)[0].split("+", 1)[0].upper()


@dataclass(frozen=True, slots=True)
class SlurmExit:
    """`ExitCode=A:B`: the exit status A, or the signal B that ended the job (0 = none)."""

    code: int
    signal: int

    @property
    def succeeded(self) -> bool:
        return self.code == 0 and self.signal == 0


class JobParseError(ValueError):
    """A job record Slurm would not print; the message names the job and the field."""


def parse_exit(text: str | None) -> SlurmExit | None:
    """`0:15` → SlurmExit(0, 15); empty → None."""
    value = optional(text)
    if value is None:
        return None
    code, colon, sig = value.partition(":")
    if not code.isdigit() or (colon and not sig.isdigit()):
        raise JobParseError(f"exit code {text!r} is not CODE:SIGNAL")
    return SlurmExit(int(code), int(sig) if colon else 0)


def parse_time(text: str | None) -> int | None:
    """Seconds since the epoch from `1796140438` or `2026-12-01T15:50:56` (UTC); None for Unknown/N/A."""
    value = optional(text)
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise JobParseError(f"time {text!r} is neither seconds since the epoch nor an ISO time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as one of the three sources reports it; a field a source lacks is None or empty."""

    job_id: str
    name: str
    state: str
    reason: str | None
    account: str | None
    user: str | None
    partition: str | None
    nodes: tuple[str, ...]
    #: GPUs held (running) or asked for (pending), over all nodes.
    gpus: int
    submit_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    exit: SlurmExit | None = None
    #: Times Slurm itself requeued the job (`Restarts=`); GPU Commons submits with --no-requeue.
    restarts: int = 0
    #: Where the batch script's output goes (scontrol only).
    stdout: str | None = None

    @property
    def phase(self) -> JobPhase:
        return job_phase(self.state)

    @property
    def script_ended(self) -> bool:
        """Ended, or COMPLETING with its exit code known: the batch script has returned and only
        Slurm's clean-up (epilog, releasing the nodes) is left; the task's work is over."""
        completing = _state_word(self.state) == "COMPLETING"
        return self.phase is JobPhase.ENDED or (completing and self.exit is not None)

    @property
    def lost_to_the_machine(self) -> bool:
        """Ended because a node failed or did not boot: nothing the task did; requeue it."""
        return _state_word(self.state) in LOST_TO_THE_MACHINE


def job_gpus(
    tres: str, per_node: str = "", per_job: str = "", per_task: str = "", nodes: int = 1, tasks: int = 1
) -> int:
    """GPUs a job holds (or asks for): its TRES when they count GPUs, else its request."""
    if any(key == "gres/gpu" or key.startswith("gres/gpu:") for key in parse_tres(tres)):
        return tres_gpus(tres)
    return requested_gpus(per_job) + requested_gpus(per_node) * nodes + requested_gpus(per_task) * tasks


def _first_number(text: str | None) -> int:
    """`2`, `1-2` (a pending job's node range) → its first number; empty or N/A → 1."""
    value = optional(text)
    if value is None:
        return 1
    head = value.split("-", 1)[0].split(",", 1)[0]
    if not head.isdigit():
        raise JobParseError(f"{text!r} is not a count")
    return int(head)


def parse_scontrol_jobs(text: str) -> tuple[SlurmJob, ...]:
    """Every job of `scontrol show job --oneliner` (one or all), in Slurm's order."""
    return tuple(_from_scontrol(f) for f in parse_records(text, "JobId"))


def _from_scontrol(f: dict[str, str]) -> SlurmJob:
    job_id = f["JobId"]
    user = optional(f.get("UserId"))
    try:
        return SlurmJob(
            job_id=job_id,
            name=f.get("JobName", ""),
            state=f.get("JobState", "UNKNOWN"),
            reason=optional(f.get("Reason")),
            account=optional(f.get("Account")),
            # `UserId=alice(1000)`
            user=user.split("(", 1)[0] if user else None,
            partition=optional(f.get("Partition")),
            nodes=expand(f.get("NodeList", "")),
            gpus=job_gpus(
                f.get("TRES", "") or f.get("ReqTRES", ""),
                f.get("TresPerNode", ""),
                f.get("TresPerJob", ""),
                f.get("TresPerTask", ""),
                _first_number(f.get("NumNodes")),
                _first_number(f.get("NumTasks")),
            ),
            submit_time=parse_time(f.get("SubmitTime")),
            start_time=parse_time(f.get("StartTime"))
            if job_phase(f.get("JobState", "")) != JobPhase.PENDING
            else None,
            end_time=parse_time(f.get("EndTime"))
            if job_phase(f.get("JobState", "")) == JobPhase.ENDED
            else None,
            exit=parse_exit(f.get("ExitCode")),
            restarts=int(f.get("Restarts", "0") or 0),
            stdout=optional(f.get("StdOut")),
        )
    except (HostlistError, TresError, JobParseError, ValueError) as exc:
        raise JobParseError(f"job {job_id}: {exc}") from None


#: squeue --Format fields, each followed by `|`; the free-text job name comes last, so a `|` in it
#: cannot shift the other columns.
SQUEUE_FIELDS = (
    "JobID",
    "State",
    "Reason",
    "Account",
    "UserName",
    "Partition",
    "NodeList",
    "tres-alloc",
    "tres-per-node",
    "tres-per-job",
    "tres-per-task",
    "NumNodes",
    "NumTasks",
    "SubmitTime",
    "StartTime",
    "Name",
)


#: What the executor watches every round (`squeue --states=all`: ended jobs too, for MinJobAge): the
#: same, with each job's end time. Cheaper than `scontrol show job` for every job (a tenth of the
#: text); the exit code, which squeue does not print, is asked of scontrol only for jobs that ended
#: other than COMPLETED (which means exit code 0).
WATCH_FIELDS = (*SQUEUE_FIELDS[:-1], "EndTime", "Name")


def squeue_format(fields: Sequence[str] = SQUEUE_FIELDS) -> str:
    """The `--Format` argument: every field with a `|` suffix and no width (so nothing is cut)."""
    return ",".join(f"{name}:|" for name in fields)


def parse_squeue(text: str, fields: Sequence[str] = SQUEUE_FIELDS) -> tuple[SlurmJob, ...]:
    """`squeue --noheader --Format=<squeue_format(fields)>` → its jobs (`fields` must end with Name)."""
    jobs = []
    count = len(fields)
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|", count - 1)
        if len(cells) != count:
            raise JobParseError(f"squeue line {line!r} does not have {count} '|'-separated fields")
        row = dict(zip(fields, cells, strict=True))
        row["Name"] = row["Name"].removesuffix("|")
        job_id = row["JobID"].strip()
        try:
            phase = job_phase(row["State"])
            jobs.append(
                SlurmJob(
                    job_id=job_id,
                    name=row["Name"],
                    state=row["State"].strip(),
                    reason=optional(row["Reason"]),
                    account=optional(row["Account"]),
                    user=optional(row["UserName"]),
                    partition=optional(row["Partition"]),
                    nodes=expand(row["NodeList"]),
                    # An ended job holds none (and squeue --states=all lists hundreds: skip the parse).
                    gpus=0
                    if phase is JobPhase.ENDED
                    else job_gpus(
                        row["tres-alloc"],
                        row["tres-per-node"],
                        row["tres-per-job"],
                        row["tres-per-task"],
                        _first_number(row["NumNodes"]),
                        _first_number(row["NumTasks"]),
                    ),
                    submit_time=parse_time(row["SubmitTime"]),
                    start_time=None if phase is JobPhase.PENDING else parse_time(row["StartTime"]),
                    end_time=parse_time(row.get("EndTime")) if phase is JobPhase.ENDED else None,
                    # COMPLETED is Slurm's word for "every step exited 0".
                    exit=SlurmExit(0, 0) if _state_word(row["State"]) == "COMPLETED" else None,
                )
            )
        except (HostlistError, TresError, JobParseError) as exc:
            raise JobParseError(f"job {job_id}: {exc}") from None
    return tuple(jobs)


#: sacct --format fields (`sacct -P` prints a header line naming them, which the parser reads).
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "Account",
    "User",
    "Partition",
    "NodeList",
    "AllocTRES",
    "Submit",
    "Start",
    "End",
)


def parse_sacct(text: str) -> tuple[SlurmJob, ...]:
    """`sacct -P --format=<SACCT_FIELDS>` (header included) → one SlurmJob per job, steps folded in.

    A step's line (`123.batch`, `123.0`) is not a job: it only lends its exit status to its job when the
    job's own line says `0:0` but the job did not complete (see `exit_from_sacct`).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ()
    header = lines[0].split("|")
    missing = [f for f in ("JobID", "State", "ExitCode") if f not in header]
    if missing:
        raise JobParseError(f"sacct output lacks the columns {', '.join(missing)} (header {lines[0]!r})")
    rows = []
    for line in lines[1:]:
        cells = line.split("|")
        if len(cells) != len(header):
            raise JobParseError(f"sacct line {line!r} does not have {len(header)} '|'-separated fields")
        rows.append(dict(zip(header, cells, strict=True)))
    steps: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        job_id, dot, _ = row["JobID"].partition(".")
        if dot:
            steps.setdefault(job_id, []).append(row)
    jobs = []
    for row in rows:
        job_id = row["JobID"]
        if "." in job_id:
            continue
        try:
            state = row["State"]
            phase = job_phase(state)
            jobs.append(
                SlurmJob(
                    job_id=job_id,
                    name=row.get("JobName", ""),
                    state=state,
                    reason=optional(row.get("Reason")),
                    account=optional(row.get("Account")),
                    user=optional(row.get("User")),
                    partition=optional(row.get("Partition")),
                    nodes=expand(row.get("NodeList", "")),
                    gpus=tres_gpus(row.get("AllocTRES", "")),
                    submit_time=parse_time(row.get("Submit")),
                    start_time=None if phase is JobPhase.PENDING else parse_time(row.get("Start")),
                    end_time=parse_time(row.get("End")) if phase is JobPhase.ENDED else None,
                    exit=exit_from_sacct(row, steps.get(job_id, [])),
                )
            )
        except (HostlistError, TresError, JobParseError) as exc:
            raise JobParseError(f"job {job_id}: {exc}") from None
    return tuple(jobs)


def exit_from_sacct(job_row: Mapping[str, str], step_rows: Sequence[Mapping[str, str]]) -> SlurmExit | None:
    """The job line's exit status, unless it says `0:0` for a job that did not complete: then the
    batch step's (a cancelled job's batch step shows the signal that ended it, `0:15`)."""
    own = parse_exit(job_row.get("ExitCode"))
    if own is None or not own.succeeded or _state_word(job_row.get("State", "")) == "COMPLETED":
        return own
    for step in step_rows:
        if step["JobID"].endswith(".batch"):
            batch = parse_exit(step.get("ExitCode"))
            if batch is not None and not batch.succeeded:
                return batch
    return own
