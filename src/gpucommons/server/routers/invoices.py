"""`/api/v1/invoices` (chargeback of a month, in every export format) and `/api/v1/budgets`.

Including this router also runs the budget watcher (`workers.budgets`) while the process leads
(a leader duty, `workers.election`), so the app factory registers costs with one line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Literal

from fastapi import APIRouter, FastAPI, Query, Response

from gpucommons.api.errors import BadRequest, NotFound
from gpucommons.chargeback.exports import (
    render_invoice_html,
    render_invoice_pdf,
    to_csv,
    to_focus_csv,
    to_json,
)
from gpucommons.identity.authz import Action, authorize, visible_teams
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.services import chargeback as costs
from gpucommons.server.workers.budgets import BudgetWatcher


@asynccontextmanager
async def _budget_watcher(app: FastAPI) -> AsyncIterator[None]:
    ctx = app.state.commons
    watcher = BudgetWatcher.from_env(ctx)
    app.state.budget_watcher = watcher
    # The leader's work: its alerts are written once, and it feeds the leader's scheduler.
    ctx.add_duty("the budget watcher", watcher.start, watcher.stop)
    try:
        yield
    finally:
        watcher.stop()


router = APIRouter(prefix="/api/v1", tags=["costs"], lifespan=_budget_watcher)

Format = Literal["json", "csv", "focus", "html", "pdf"]
_MEDIA = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "focus": "text/csv; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "pdf": "application/pdf",
}


@router.get(
    "/invoices",
    response_class=Response,
    responses={200: {"content": {m: {} for m in sorted(set(_MEDIA.values()))}}},
)
def invoices(
    ctx: ContextDep,
    who: CurrentPrincipal,
    month: Annotated[str, Query(pattern=r"^\d{4}-\d{2}$", description="The month, e.g. 2026-11")],
    team: Annotated[str | None, Query(max_length=63)] = None,
    fmt: Annotated[
        Format,
        Query(
            alias="format",
            description="json (the chargeback result, docs/design.md), csv, focus, html or pdf",
        ),
    ] = "json",
) -> Response:
    """A month's chargeback (a month in progress: up to now). json, csv and focus hold every team the
    caller may see the costs of; html and pdf are one team's invoice."""
    policy = ctx.policies.policy
    visible = visible_teams(who, policy, Action.COSTS_READ)
    if team is not None:
        if not policy.has_team(team):
            raise NotFound(f"no team {team!r} in the policy", {"team": team})
        authorize(who, Action.COSTS_READ, team)
        shown = frozenset({team})
    else:
        shown = visible
    if fmt in ("html", "pdf"):
        if team is None and len(visible) != 1:
            raise BadRequest(
                f"format={fmt} is one team's invoice: name the team (team=... in the API, --team in "
                f"the CLI); you may see {', '.join(sorted(visible)) or 'no team'}",
                {"format": fmt, "teams": sorted(visible)},
            )
        team = team or next(iter(visible))
    now = ctx.clock.now()
    result = costs.chargeback(ctx.db, policy, costs.month_to_date(month, now), now)
    every_team = shown >= set(policy.team_names)
    teams = None if every_team and team is None else shown
    body: str | bytes
    if fmt == "json":
        body = to_json(result, teams)
    elif fmt == "csv":
        body = to_csv(result, teams)
    elif fmt == "focus":
        body = to_focus_csv(result, teams)
    else:
        assert team is not None
        if not result.has_team(team):
            raise NotFound(f"no team {team!r} in the chargeback of {month}", {"team": team})
        body = render_invoice_html(result, team) if fmt == "html" else render_invoice_pdf(result, team)
    name = f"invoice-{month}" + (f"-{team}" if team else "") + {"focus": "-focus.csv"}.get(fmt, f".{fmt}")
    headers = {"Content-Disposition": f'inline; filename="{name}"'}
    return Response(body, media_type=_MEDIA[fmt], headers=headers)


@router.get("/budgets")
def budgets(ctx: ContextDep, who: CurrentPrincipal) -> list[dict[str, object]]:
    """This month's spend against each visible team's budget (spend = direct cost so far)."""
    visible = visible_teams(who, ctx.policies.policy, Action.COSTS_READ)
    statuses = costs.budgets(ctx.db, ctx.policies.policy, ctx.clock.now())
    return [
        {
            "team": s.team,
            "month": s.month,
            "budget_cents": s.budget_cents,
            "spent_cents": s.spent_cents,
            "enforce": s.enforce.value,
            "thresholds_crossed": list(s.crossed),
            "exhausted": s.exhausted,
            "holds_new_tasks": s.holds_new_tasks,
        }
        for s in statuses.values()
        if s.team in visible
    ]
