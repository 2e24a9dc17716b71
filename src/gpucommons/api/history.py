"""Wire schemas of the history views (`/api/v1/history/*`, `/api/v1/teams/{team}`,
`/api/v1/tasks/{id}/timeline`) and of the planning and admin endpoints.

Response models ignore unknown fields (an older client reads a newer server); request models forbid
them. Times are UTC datetimes; money is integer cents; GPU averages are floats rounded to 0.001.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Window = Literal["24h", "7d", "30d"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ErrorDetail(_Response):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorBody(_Response):
    """Every error answer: `{"error": {"code", "message", "details"}}` (docs/api.md, Errors)."""

    error: ErrorDetail


# --- GPUs held over time --------------------------------------------------------------------------


class TeamPoolHistory(_Response):
    team: str
    pool: str
    #: Average GPUs held in each bucket (ledger intervals integrated over the bucket).
    held_gpus: list[float]
    #: Average GPUs held above the nominal quota in each bucket (hatched in the chart).
    borrowed_gpus: list[float]
    #: The nominal quota in force at the end of each bucket (the quota line).
    nominal_gpus: list[int]


class PoolCapacity(_Response):
    name: str
    gpu_type: str
    capacity_gpus: int


class GpuHistory(_Response):
    window: Window
    start: datetime
    end: datetime
    step_seconds: int
    #: Start of each bucket; the last bucket ends at `end` (now) and may be shorter than the step.
    bucket_starts: list[datetime]
    pools: list[PoolCapacity]
    #: One series per visible team and pool it has a quota or usage in.
    series: list[TeamPoolHistory]


class DayWaits(_Response):
    day: date
    #: Admissions that day (first admissions and re-admissions after a preemption).
    admissions: int
    p50_seconds: float
    p95_seconds: float
    max_seconds: float


class TeamWaits(_Response):
    team: str
    days: list[DayWaits]


class WaitHistory(_Response):
    start: date
    end: date
    teams: list[TeamWaits]


# --- one team -------------------------------------------------------------------------------------


class Member(_Response):
    user_name: str
    display_name: str
    #: `member` or `admin` (of this team), from the directory groups the policy names.
    role: Literal["member", "admin"]


class TeamQuota(_Response):
    pool: str
    gpu_type: str
    nominal_gpus: int
    #: None: unlimited.
    borrow_limit_gpus: int | None
    lend_limit_gpus: int | None
    used_gpus: int
    borrowed_gpus: int


class BudgetDay(_Response):
    day: date
    #: Direct cost from the month's start to the end of that day (or to now, today).
    spent_cents: int


class BudgetView(_Response):
    month: str
    budget_cents: int
    spent_cents: int
    enforce: str
    #: Spend at month's end if the team goes on at its rate of the last 7 days (or of the month so far).
    projected_cents: int
    #: Cents per day at that rate.
    rate_cents_per_day: float
    #: When the budget runs out at that rate, if within this month.
    exhausted_at: datetime | None
    days: list[BudgetDay]


class MonthCosts(_Response):
    month: str
    currency: str
    gpu_hours: float
    borrowed_gpu_hours: float
    direct_cents: int
    idle_cents: int
    admin_cents: int
    total_cents: int


class PreemptionSide(_Response):
    team: str
    count: int
    gpus: int


class PreemptionItem(_Response):
    at: datetime
    victim_team: str
    #: Only when the caller may see that team's tasks.
    victim_task_id: str | None
    preemptor_team: str
    preemptor_task_id: str | None
    reason: str
    gpus: int


class TeamPreemptions(_Response):
    since: datetime
    #: Preemptions of this team's tasks, by the team whose task took the GPUs.
    suffered: list[PreemptionSide]
    #: Preemptions this team's tasks caused, by the team that lost a task.
    caused: list[PreemptionSide]
    recent: list[PreemptionItem]


class TeamDetail(_Response):
    name: str
    cohort: str
    fair_share_weight: float
    members: list[Member]
    quotas: list[TeamQuota]
    pending_tasks: int
    running_tasks: int
    #: None when the caller may not read the team's costs.
    costs: MonthCosts | None
    budget: BudgetView | None
    preemptions: TeamPreemptions


# --- one task -------------------------------------------------------------------------------------


class Preemptor(_Response):
    team: str
    task_id: str | None
    reason: str
    at: datetime


class Attempt(_Response):
    number: int
    queued_at: datetime
    admitted_at: datetime | None
    started_at: datetime | None
    #: When a preemption was issued (the task then had its grace period to stop).
    preempted_at: datetime | None
    ended_at: datetime | None
    #: `waiting`, `admitted`, `running`, `preempting`, `preempted` (requeued), `succeeded`, `failed`,
    #: `cancelled`.
    outcome: str
    preempted_by: Preemptor | None
    waited_seconds: float
    ran_seconds: float


class StartEstimate(_Response):
    #: The likely start (the median run times of past tasks).
    likely: datetime | None
    #: The range: with shorter (25th percentile) and longer (75th) run times.
    earliest: datetime | None
    latest: datetime | None
    position: int
    #: How the estimate was made and what it ignores, in a sentence or two.
    basis: str
    #: Finished tasks whose run times the estimate learned from.
    history_tasks: int


class TaskTimeline(_Response):
    task_id: str
    state: str
    attempts: list[Attempt]
    estimate: StartEstimate | None


# --- planning ---------------------------------------------------------------------------------------

RunKind = Literal["replay", "advice"]
RunStatus = Literal["queued", "running", "succeeded", "failed"]


class PlanningRunCreate(_Request):
    """`replay`: last month under `policy` (YAML) and under the current policy, side by side.
    `advice`: the quota advisor on last month's usage, then the same replay of its proposal."""

    kind: RunKind
    policy: Annotated[str, StringConstraints(max_length=1_000_000)] = ""
    #: The replayed month (`YYYY-MM`); absent = the last complete month.
    month: Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}$")] | None = None


class PlanningRun(_Response):
    id: str
    kind: RunKind
    status: RunStatus
    title: str
    created_at: datetime
    created_by: str
    started_at: datetime | None
    finished_at: datetime | None
    window_start: datetime
    window_end: datetime
    phase: str
    done: int
    total: int
    error: str
    proposed_policy: str
    #: The comparison once succeeded: `summary` rows and `teams` rows per variant (see docs/dashboard.md).
    report: dict[str, Any] = Field(default_factory=dict)


# --- admin ------------------------------------------------------------------------------------------


class PolicyDiffRequest(_Request):
    text: Annotated[str, StringConstraints(max_length=1_000_000)]


class QuotaChange(_Response):
    team: str
    pool: str
    before: str
    after: str


class PolicyDiff(_Response):
    current_version: int
    #: Unified diff of the current policy file against the proposed one.
    diff: list[str]
    #: False when the proposed file is refused; `issues` say why (path, message, line).
    valid: bool
    issues: list[dict[str, Any]]
    #: Per team and pool, quota changes in words ("16 GPUs, borrow ≤ 8" → "12 GPUs, borrow ≤ 4").
    quota_changes: list[QuotaChange]
    teams_added: list[str]
    teams_removed: list[str]
