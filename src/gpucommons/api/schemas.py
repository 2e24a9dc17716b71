"""Wire schemas of the REST API (`/api/v1`), shared by the server and the typed client.

Request models forbid unknown fields (a typo is an error, not a silent default); response models
ignore unknown fields, so an older client can read a newer server. Times are UTC datetimes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from gpucommons.api.fields import TEXT_PATTERN

#: A team, pool or priority-class name: what the policy file allows.
Name = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
#: `on-signal` or `every:<duration>` (`every:30m`, `every:2h`).
CheckpointText = Annotated[str, StringConstraints(pattern=r"^(on-signal|every:[1-9][0-9]{0,6}[smhd])$")]
TaskId = Annotated[str, StringConstraints(min_length=1, max_length=64)]

TaskStateName = Literal["pending", "admitted", "running", "preempting", "succeeded", "failed", "cancelled"]


class _Request(BaseModel):
    #: Strict: `"gpus": true` or `"gpus": "1"` is a mistake to point out, not a value to coerce.
    model_config = ConfigDict(extra="forbid", strict=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


# --- tasks -------------------------------------------------------------------------------------

#: Bounds of a task's command (docs/api.md): what a command line needs, far below what would let
#: one submission bloat every listing.
MAX_COMMAND_ARGS = 1024
MAX_ARG_CHARS = 32_768
MAX_COMMAND_CHARS = 65_536
MAX_TASK_NAME_CHARS = 200

Argument = Annotated[str, StringConstraints(max_length=MAX_ARG_CHARS, pattern=TEXT_PATTERN)]
TaskName = Annotated[str, StringConstraints(max_length=MAX_TASK_NAME_CHARS, pattern=TEXT_PATTERN)]
#: A container image reference (`ghcr.io/acme/train:1.4`, `repo@sha256:…`): no spaces.
Image = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=r"^[A-Za-z0-9][^\s\x00]*$")]


class TaskSubmit(_Request):
    """What `commons submit` sends."""

    team: Name
    gpus: int = Field(0, ge=0, le=100_000)
    cpu_milli: int = Field(0, ge=0, le=1_000_000_000)
    memory_mib: int = Field(0, ge=0, le=1_000_000_000)
    command: list[Argument] = Field(
        ...,
        min_length=1,
        max_length=MAX_COMMAND_ARGS,
        description=f"The command and its arguments: at most {MAX_COMMAND_ARGS} arguments of at most "
        f"{MAX_ARG_CHARS} characters, {MAX_COMMAND_CHARS} characters in all.",
    )
    name: TaskName = ""
    #: Priority class name; absent = the policy's default class.
    priority: Name | None = None
    #: Pool to run in; absent = the team's pools in the order its quota lists them.
    pool: Name | None = None
    checkpoint: CheckpointText | None = None
    #: The container image, on a cluster backend (Kubernetes); absent = the server's default image.
    image: Image | None = None

    @model_validator(mode="after")
    def _command_within_bounds(self) -> TaskSubmit:
        total = sum(len(arg) for arg in self.command)
        if total > MAX_COMMAND_CHARS:
            raise ValueError(f"the command holds {total} characters; at most {MAX_COMMAND_CHARS} in all")
        return self


class TaskSubmitBatch(_Request):
    """Several submissions in one request (a job array): all accepted, or none."""

    tasks: list[TaskSubmit] = Field(..., min_length=1, max_length=1000)


class Task(_Response):
    id: str
    seq: int
    name: str
    team: str
    state: TaskStateName
    priority: str
    priority_value: int
    command: list[str]
    gpus: int
    cpu_milli: int
    memory_mib: int
    pool: str | None = Field(None, description="Pool the task asked for (None: any of its team's pools)")
    assigned_pool: str | None = Field(None, description="Pool of the current or last admission")
    gpu_indices: list[int] = []
    borrowed_gpus: int = Field(
        0,
        description="While it holds GPUs: how many of them are its team's use above nominal quota now "
        "(the newest tasks first); afterwards: what it borrowed when it was admitted",
    )
    checkpoint: str | None = None
    submitted_at: datetime
    queued_at: datetime
    admitted_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    restart_count: int = 0
    preemptions: int = 0
    exit_code: int | None = None
    cancel_requested: bool = False
    last_checkpoint_at: datetime | None = None
    lost_gpu_seconds: float = 0.0
    message: str = ""
    submitted_by: str = ""
    image: str | None = Field(None, description="The container image (cluster backends)")
    cluster_ref: str | None = Field(
        None, description="The cluster object the task is (`namespace/job` on Kubernetes), once created"
    )
    origin: str = Field(
        "commons", description="`commons`: submitted through GPU Commons; `cluster`: found on the cluster"
    )


class TaskEvent(_Response):
    id: int
    task_id: str
    at: datetime
    kind: str
    from_state: str | None = None
    to_state: str | None = None
    message: str = ""


class StreamEvent(TaskEvent):
    """A task event as `GET /api/v1/events` sends it: a `TaskEvent` and the task's team."""

    team: str


class TaskAttempt(_Response):
    """One time the task held resources: where, how it was stopped, how it ended (oldest first)."""

    number: int
    admitted_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    #: succeeded | failed | cancelled | preempted; None while it lasts.
    end_reason: str | None = None
    exit_code: int | None = None
    pool: str
    gpu_indices: list[int] = []
    borrowed_gpus: int = 0
    stop_reason: str | None = None
    stop_requested_at: datetime | None = None
    #: SIGKILLs sent (again every 30 s while the end is not seen); when the stop gave up sending.
    kills: int = 0
    gave_up_at: datetime | None = None
    preempted_by: str | None = None


class CheckpointReport(_Request):
    """A task reports that it saved its state (`commons checkpoint`)."""

    path: Annotated[str, StringConstraints(max_length=4096, pattern=TEXT_PATTERN)] | None = None
    note: Annotated[str, StringConstraints(max_length=1000, pattern=TEXT_PATTERN)] = ""


# --- queue and teams ---------------------------------------------------------------------------


class QueueEntry(_Response):
    task_id: str
    name: str
    team: str
    priority: str
    gpus: int
    #: 1-based position in the cluster's queue (the order the engine considers tasks).
    position: int
    #: 1-based position within its team's queue.
    team_position: int
    waiting_seconds: float
    #: When it joined the queue (submit, or requeue after a preemption): ages computed from this stay
    #: right in an answer a client reuses after a `304 Not Modified`.
    queued_at: datetime | None = None
    #: The engine's reason code (`quota_exhausted`, `no_idle_to_borrow`, ...); empty before the first cycle.
    reason_code: str = ""
    reason: str = ""


class TeamPool(_Response):
    pool: str
    nominal_gpus: int
    borrow_limit_gpus: int | None = None
    lend_limit_gpus: int | None = None
    used_gpus: int = 0
    borrowed_gpus: int = 0
    #: Pending tasks that asked for this pool, and their GPUs.
    pending_tasks: int = 0
    pending_gpus: int = 0


class TeamSummary(_Response):
    name: str
    cohort: str
    pools: list[TeamPool]
    nominal_gpus: int
    used_gpus: int
    borrowed_gpus: int
    pending_tasks: int
    pending_gpus: int
    running_tasks: int
    #: Pending tasks that named no pool (any of the team's pools will do), and their GPUs.
    pending_any_pool_tasks: int = 0
    pending_any_pool_gpus: int = 0


# --- usage and policy --------------------------------------------------------------------------


class UsageInterval(_Response):
    """One row of the usage ledger (docs/design.md, contract 4): who held which GPUs when."""

    task_id: str
    team: str
    pool: str
    gpus: int
    start: datetime
    end: datetime | None = None
    priority: str
    borrowed_gpus: int
    end_reason: str


class PolicyApply(_Request):
    """A whole policy file (YAML text) to validate and make current."""

    #: Bounded by the request size limit too (`COMMONS_MAX_BODY_BYTES`, 1 MiB by default).
    text: Annotated[str, StringConstraints(min_length=1, max_length=1_000_000, pattern=TEXT_PATTERN)]
    dry_run: bool = False


class ChargebackRules(_Response):
    """How the policy charges, with the sentences the dashboard and invoices show for each part."""

    currency: str
    idle: str
    admin_split: str
    borrowed_rate: str
    direct_cost: str = Field(description="What direct cost is, with the policy's borrowed rate")
    idle_share: str = Field(description="What an idle share is, with the policy's idle rule")
    kept_by_platform: str = Field(description="What the platform keeps")
    budget: str = Field(description="What a budget's spend counts")


class PolicyInfo(_Response):
    version: int
    applied_at: datetime
    applied_by: str = ""
    cluster_name: str
    teams: list[str]
    pools: list[str]
    text: str = ""
    chargeback: ChargebackRules | None = None


class Health(_Response):
    #: `ok` (HTTP 200) or `degraded` (HTTP 503, `detail` says why).
    status: Literal["ok", "degraded"]
    version: str
    #: `stalled`: the scheduler's thread is alive but has not finished a cycle for too long.
    scheduler: Literal["running", "stopped", "stalled"]
    executor: str
    last_cycle_at: datetime | None = None
    #: `leader`: this process runs the scheduler and the background workers; `follower`: it serves
    #: the API and takes over when the leader goes (several replicas on one PostgreSQL database).
    role: Literal["leader", "follower"] = "leader"
    #: When this process became the leader (None for a follower).
    leader_since: datetime | None = None
    #: Why the status is not `ok` (e.g. "scheduler stalled: last cycle 312 s ago (limit 120 s)").
    detail: str | None = None
