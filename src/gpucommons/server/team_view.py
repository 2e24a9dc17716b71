"""One team's page: members from the directory, quota and limits, this month's use and cost against
its budget with a burn-down projection, and the preemptions it suffered and caused.

Costs come from the same services as the usage page and invoices (`services.chargeback`: the
month-to-date chargeback and the budget status), so the numbers agree to the cent; the daily
burn-down uses `chargeback.budget.spend_cents`, the budget's own rule, on the month's ledger.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.api import history as wire
from gpucommons.chargeback.budget import spend_cents
from gpucommons.domain.model import Policy, Team
from gpucommons.domain.resources import UNLIMITED, ZERO
from gpucommons.identity.authz import Action, is_allowed, visible_teams
from gpucommons.identity.principal import Principal
from gpucommons.ledger.period import Period
from gpucommons.server.context import ServerContext
from gpucommons.server.services import chargeback as costs
from gpucommons.server.services import ledger, preemptions
from gpucommons.server.services.convert import utc
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser, GroupMember

#: How far back the team page lists preemptions.
PREEMPTION_DAYS = 30
#: The burn-down's rate is the spend of the last this-many days (or of the month so far, if shorter).
RATE_DAYS = 7
DAY_S = 86400.0


def members(session: Session, team: Team) -> list[wire.Member]:
    """Active directory users in the team's groups (admins: in its admin groups), by user name."""
    roles = {g.casefold(): "member" for g in team.groups}
    roles.update({g.casefold(): "admin" for g in team.admin_groups})
    if not roles:
        return []
    groups = {
        g.id: roles[g.display_name_key]
        for g in session.scalars(
            select(DirectoryGroup).where(DirectoryGroup.display_name_key.in_(sorted(roles)))
        )
    }
    if not groups:
        return []
    rows = session.execute(
        select(DirectoryUser, GroupMember.group_id)
        .join(GroupMember, GroupMember.member_id == DirectoryUser.id)
        .where(GroupMember.group_id.in_(sorted(groups)), DirectoryUser.active.is_(True))
    ).all()
    best: dict[str, tuple[DirectoryUser, str]] = {}
    for user, group_id in rows:
        role = groups[group_id]
        if user.id not in best or role == "admin":
            best[user.id] = (user, role)
    return sorted(
        (
            wire.Member(user_name=u.user_name, display_name=u.display_name or u.user_name, role=role)  # type: ignore[arg-type]
            for u, role in best.values()
        ),
        key=lambda m: m.user_name.casefold(),
    )


def _limit(value: int) -> int | None:
    return None if value >= UNLIMITED else value


def _month(now: float) -> Period:
    return Period.month_of(datetime.fromtimestamp(now, tz=UTC))


def month_costs(ctx: ServerContext, policy: Policy, team: str, now: float) -> wire.MonthCosts | None:
    month = _month(now)
    if now <= month.start.timestamp():
        return None
    result = costs.chargeback(ctx.db, policy, costs.month_to_date(month.label, now), now)
    if not result.has_team(team):
        return None
    charge = result.team(team)
    return wire.MonthCosts(
        month=month.label,
        currency=result.currency,
        gpu_hours=float(charge.gpu_hours),
        borrowed_gpu_hours=float(charge.borrowed_gpu_hours),
        direct_cents=charge.direct_cents,
        idle_cents=charge.idle_cents,
        admin_cents=charge.admin_cents,
        total_cents=charge.total_cents,
    )


def burn_down(ctx: ServerContext, policy: Policy, team: str, now: float) -> wire.BudgetView | None:
    """This month's spend day by day (cumulative), and where it ends at the recent rate."""
    status = costs.budgets(ctx.db, policy, now).get(team)
    if status is None:
        return None
    month = _month(now)
    m0, m1 = month.start.timestamp(), month.end.timestamp()
    days: list[wire.BudgetDay] = []
    spent_at: dict[float, int] = {}
    if now > m0:
        with ctx.db.session() as session:
            intervals = ledger.usage_intervals(session, [team], m0, now, now)
        day_end = m0
        while day_end < now:
            day_end = min(day_end + DAY_S, now)
            spent = spend_cents(
                policy, intervals, Period(month.start, datetime.fromtimestamp(day_end, tz=UTC))
            ).get(team, 0)
            spent_at[day_end] = spent
            days.append(
                wire.BudgetDay(day=datetime.fromtimestamp(day_end - 1e-3, tz=UTC).date(), spent_cents=spent)
            )
        rate_from = max(m0, now - RATE_DAYS * DAY_S)
        earlier = 0
        if rate_from > m0:
            earlier = spend_cents(
                policy, intervals, Period(month.start, datetime.fromtimestamp(rate_from, tz=UTC))
            ).get(team, 0)
        rate = (status.spent_cents - earlier) / max(now - rate_from, 1.0)
    else:
        rate = 0.0
    projected = status.spent_cents + round(rate * max(0.0, m1 - now))
    exhausted_at = None
    if status.spent_cents >= status.budget_cents:
        exhausted_at = None
    elif rate > 0:
        when = now + (status.budget_cents - status.spent_cents) / rate
        exhausted_at = utc(when) if when < m1 else None
    return wire.BudgetView(
        month=status.month,
        budget_cents=status.budget_cents,
        spent_cents=status.spent_cents,
        enforce=status.enforce.value,
        projected_cents=projected,
        rate_cents_per_day=round(rate * DAY_S, 2),
        exhausted_at=exhausted_at,
        days=days,
    )


def team_preemptions(
    session: Session, who: Principal, policy: Policy, team: str, now: float
) -> wire.TeamPreemptions:
    since = now - PREEMPTION_DAYS * DAY_S
    readable = visible_teams(who, policy, Action.TASK_READ)
    suffered: dict[str, list[int]] = {}
    caused: dict[str, list[int]] = {}
    recent: list[wire.PreemptionItem] = []
    for row in preemptions.involving_team(session, team, since, limit=10_000):
        if row.victim_team == team:
            side = suffered.setdefault(row.preemptor_team, [0, 0])
            side[0] += 1
            side[1] += row.victim_gpus
        if row.preemptor_team == team:
            side = caused.setdefault(row.victim_team, [0, 0])
            side[0] += 1
            side[1] += row.victim_gpus
        if len(recent) < 50:
            recent.append(
                wire.PreemptionItem(
                    at=utc(row.at),
                    victim_team=row.victim_team,
                    victim_task_id=row.victim_task_id if row.victim_team in readable else None,
                    preemptor_team=row.preemptor_team,
                    preemptor_task_id=row.preemptor_task_id if row.preemptor_team in readable else None,
                    reason=row.reason,
                    gpus=row.victim_gpus,
                )
            )

    def sides(found: dict[str, list[int]]) -> list[wire.PreemptionSide]:
        return [wire.PreemptionSide(team=t, count=c, gpus=g) for t, (c, g) in sorted(found.items())]

    return wire.TeamPreemptions(
        since=utc(since), suffered=sides(suffered), caused=sides(caused), recent=recent
    )


def team_detail(ctx: ServerContext, who: Principal, team_name: str) -> wire.TeamDetail:
    """The caller must be allowed `team.read` on the team (the router checks); costs need `costs.read`."""
    scheduler = ctx.scheduler
    published = scheduler.view
    policy, view = published.policy, published.usage
    team = policy.team(team_name)
    now = ctx.clock.now()
    quotas = []
    for q in team.quotas:
        used = view.usage.get((team.name, q.pool), ZERO).gpus
        quotas.append(
            wire.TeamQuota(
                pool=q.pool,
                gpu_type=policy.pool(q.pool).gpu_type if policy.has_pool(q.pool) else "",
                nominal_gpus=q.nominal.gpus,
                borrow_limit_gpus=_limit(q.borrow_limit.gpus),
                lend_limit_gpus=_limit(q.lend_limit.gpus),
                used_gpus=used,
                borrowed_gpus=max(0, used - q.nominal.gpus),
            )
        )
    may_cost = is_allowed(who, Action.COSTS_READ, team.name)
    with ctx.db.session() as session:
        people = members(session, team)
        preempted = team_preemptions(session, who, policy, team.name, now)
    return wire.TeamDetail(
        name=team.name,
        cohort=team.cohort,
        fair_share_weight=float(team.fair_share_weight),
        members=people,
        quotas=quotas,
        pending_tasks=view.pending_tasks.get(team.name, 0),
        running_tasks=view.running_tasks.get(team.name, 0),
        costs=month_costs(ctx, policy, team.name, now) if may_cost else None,
        budget=burn_down(ctx, policy, team.name, now) if may_cost else None,
        preemptions=preempted,
    )
