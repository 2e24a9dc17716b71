"""Read models computed from the scheduler's published read view: teams, the queue, metric gauges.

Each takes `scheduler.view` once, so one answer shows one moment, and never waits for a cycle.

It sits above the workers (it reads `TaskWorker.view`) and the metrics (it builds their gauges), not
in `services`: the workers call the services, so a service that named the worker would close a
circle (docs/design.md, "The server's layers")."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from gpucommons.api import schemas
from gpucommons.backends.ports import QueuePosition
from gpucommons.domain.resources import UNLIMITED, ZERO
from gpucommons.engine.reasons import INHERITED, inherited_reason
from gpucommons.engine.state import queue_key
from gpucommons.engine.types import Pending, PendingCode, TaskRequest
from gpucommons.server.metrics import GaugeSnapshot, TeamPoolGauge
from gpucommons.server.workers.outputs import ReadView
from gpucommons.server.workers.port import TaskWorker


def _limit(value: int) -> int | None:
    return None if value >= UNLIMITED else value


def teams(scheduler: TaskWorker, visible: Collection[str]) -> list[schemas.TeamSummary]:
    """From the scheduler's last published view: never waits for a cycle to finish."""
    published = scheduler.view
    view, policy = published.usage, published.policy
    out = []
    for team in policy.teams:
        if team.name not in visible:
            continue
        pools = []
        for quota in team.quotas:
            used = view.usage.get((team.name, quota.pool), ZERO)
            pools.append(
                schemas.TeamPool(
                    pool=quota.pool,
                    nominal_gpus=quota.nominal.gpus,
                    borrow_limit_gpus=_limit(quota.borrow_limit.gpus),
                    lend_limit_gpus=_limit(quota.lend_limit.gpus),
                    used_gpus=used.gpus,
                    borrowed_gpus=max(0, used.gpus - quota.nominal.gpus),
                    pending_tasks=view.pending_by_pool.get((team.name, quota.pool), (0, 0))[0],
                    pending_gpus=view.pending_by_pool.get((team.name, quota.pool), (0, 0))[1],
                )
            )
        anywhere = view.pending_by_pool.get((team.name, ""), (0, 0))
        out.append(
            schemas.TeamSummary(
                name=team.name,
                cohort=team.cohort,
                pools=pools,
                nominal_gpus=sum(p.nominal_gpus for p in pools),
                used_gpus=sum(p.used_gpus for p in pools),
                borrowed_gpus=sum(p.borrowed_gpus for p in pools),
                pending_tasks=view.pending_tasks.get(team.name, 0),
                pending_gpus=view.pending_gpus.get(team.name, 0),
                running_tasks=view.running_tasks.get(team.name, 0),
                pending_any_pool_tasks=anywhere[0],
                pending_any_pool_gpus=anywhere[1],
            )
        )
    return out


#: A pending task with its 1-based place in the cluster's queue and in its team's.
Placed = tuple[TaskRequest, int, int]


def queue_order(pending: Iterable[TaskRequest]) -> list[Placed]:
    """Every pending task in the order the engine considers them, with its places: the part of
    the queue's answer that depends on the view alone, so a caller may compute it once per view."""
    team_pos: dict[str, int] = {}
    out = []
    for position, task in enumerate(sorted(pending, key=lambda t: (queue_key(t), t.team)), start=1):
        team_pos[task.team] = team_pos.get(task.team, 0) + 1
        out.append((task, position, team_pos[task.team]))
    return out


#: The engine's failures a later task of the team, asking at least as much, waits behind alike.
COVERING = frozenset(
    {
        PendingCode.QUOTA_EXHAUSTED,
        PendingCode.NO_IDLE_TO_BORROW,
        PendingCode.NO_NODE_FITS,
        PendingCode.NEVER_FITS,
    }
)


def resolve_reasons(order: Sequence[Placed], reasons: Mapping[str, Pending]) -> Mapping[str, Pending]:
    """`reasons`, with a reason for each task the engine set aside without one.

    When a team's head fails and every task behind it asks at least as much (the default pools,
    GPUs only), the engine stops walking that team's queue (`_rest_cannot_go`: a long queue is not
    walked every cycle), so those tasks get no reason of their own. They wait for the same cause:
    each gets "waits like <head>, which asks no more: <why>", resolved here, by the reader, once per
    view, as the engine would have worded it. `order` is `queue_order`'s."""
    covering: dict[str, tuple[TaskRequest, Pending]] = {}
    derived: dict[str, Pending] = {}
    out: dict[str, Pending] | None = None
    for task, _, _ in order:
        req = task.resources
        plain = not task.pools and req.cpu_milli == 0 and req.memory_mib == 0
        own = reasons.get(task.id)
        if own is not None:
            if plain and own.code in COVERING and not own.message.startswith(INHERITED):
                covering[task.team] = (task, own)
            continue
        found = covering.get(task.team)
        if found is None or not plain or req.gpus < found[0].resources.gpus:
            continue
        head, why = found
        reason = derived.get(head.id)
        if reason is None:
            reason = derived[head.id] = inherited_reason(head.id, why)
        if out is None:
            out = dict(reasons)
        out[task.id] = reason
    return reasons if out is None else out


class WaitingMessages:
    """Why each pending task waits, as of the scheduler's last cycle, for the task list and a task's
    own page (`commons tasks`, the dashboard).

    A task's stored `message` is written when its state changes ("waiting for the scheduler" at
    submit); why a pending task waits changes every cycle and lives in the published view only.
    Resolving the set-aside tasks walks the whole queue, so it is done once per view: the last
    view's answer is kept (a reader that races another computes it again, harmlessly)."""

    def __init__(self) -> None:
        self._last: tuple[ReadView, Mapping[str, str]] | None = None

    def of(self, view: ReadView) -> Mapping[str, str]:
        last = self._last
        if last is not None and last[0] is view:
            return last[1]
        if not view.pending:
            messages: Mapping[str, str] = {}
        else:
            reasons = resolve_reasons(queue_order(view.pending), view.reasons)
            messages = {task_id: pending.message for task_id, pending in reasons.items()}
        self._last = (view, messages)
        return messages


def queue_entries(
    shown: Iterable[Placed],
    reasons: Mapping[str, Pending],
    placed: Mapping[str, QueuePosition],
    now: float,
) -> list[schemas.QueueEntry]:
    """The entries of the tasks `shown` (already filtered to what the caller may see), names empty;
    `placed` are the admitting side's own positions where it has them (Kueue's visibility API)."""
    out = []
    for task, position, team_position in shown:
        reason = reasons.get(task.id)
        where = placed.get(task.id)
        out.append(
            schemas.QueueEntry(
                task_id=task.id,
                name="",
                team=task.team,
                priority=task.priority_class,
                gpus=task.resources.gpus,
                position=where.position if where else position,
                team_position=where.team_position if where else team_position,
                waiting_seconds=round(max(0.0, now - task.queued_at), 3),
                queued_at=datetime.fromtimestamp(task.queued_at, tz=UTC),
                reason_code=reason.code.value if reason else "",
                reason=reason.message if reason else "not yet considered by the scheduler",
            )
        )
    return out


def gauges(scheduler: TaskWorker) -> GaugeSnapshot:
    published = scheduler.view
    view, policy = published.usage, published.policy
    rows = []
    for team in policy.teams:
        for quota in team.quotas:
            used = view.usage.get((team.name, quota.pool), ZERO).gpus
            rows.append(
                TeamPoolGauge(
                    team=team.name,
                    pool=quota.pool,
                    used=used,
                    borrowed=max(0, used - quota.nominal.gpus),
                    idle_quota=max(0, quota.nominal.gpus - used),
                )
            )
    return GaugeSnapshot(
        team_pools=tuple(rows),
        free_gpus=dict(view.free_gpus),
        queue_length=dict(view.pending_tasks),
    )
