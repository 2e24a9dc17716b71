"""The current policy: loaded at startup, replaced whole by `policy apply` (validated first).

Every applied policy is kept (`policies` table) with who applied it; the newest is current. Running
tasks keep running across a change; the scheduler's next cycle decides under the new quotas.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpucommons.api import schemas
from gpucommons.api.errors import Conflict, PolicyInvalid
from gpucommons.chargeback import explain
from gpucommons.domain.model import Policy
from gpucommons.domain.task import TaskState
from gpucommons.policy import PolicyError, load_policy, parse_policy
from gpucommons.server.services.convert import utc
from gpucommons.server.services.tasks import LIVE_STATES
from gpucommons.store.db import Database
from gpucommons.store.models import PolicyRow, TaskRow


def refused(error: PolicyError) -> PolicyInvalid:
    issues = [{"path": i.path, "message": i.message, "line": i.line} for i in error.issues]
    return PolicyInvalid(str(error), {"issues": issues})


def parse(text: str, source: str = "policy") -> Policy:
    try:
        return parse_policy(text, source)
    except PolicyError as exc:
        raise refused(exc) from None


def current(session: Session) -> PolicyRow | None:
    return session.scalars(select(PolicyRow).order_by(PolicyRow.id.desc()).limit(1)).first()


def newer_than(db: Database, version: int) -> tuple[Policy, int] | None:
    """The current policy when it is newer than `version` (applied through another replica)."""
    with db.session() as session:
        latest = session.scalar(select(func.max(PolicyRow.id)))
        if latest is None or latest <= version:
            return None
        row = session.get(PolicyRow, latest)
        assert row is not None
        return parse_policy(row.text, f"stored policy #{row.id}"), row.id


def load_at_startup(db: Database, path: Path | None, now: float) -> tuple[Policy, int]:
    """The file given to `commons up` becomes current if it differs from the stored one; without a
    file the stored current policy is used. Raises `PolicyError` for a bad file."""
    with db.session() as session:
        row = current(session)
        if path is not None:
            policy = load_policy(path)
            text = path.read_text(encoding="utf-8")
            if row is None or row.text != text:
                row = PolicyRow(
                    applied_at=now, applied_by="commons up", cluster_name=policy.cluster_name, text=text
                )
                session.add(row)
                session.flush()
            return policy, row.id
        if row is None:
            raise PolicyError([], "no policy: start with `commons up --policy FILE`")
        return parse_policy(row.text, f"stored policy #{row.id}"), row.id


def _live_teams(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(TaskRow.team, func.count())
        .where(TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]))
        .group_by(TaskRow.team)
    )
    return {team: int(n) for team, n in rows}


def apply(
    session: Session, text: str, who: str, now: float, dry_run: bool = False
) -> tuple[Policy, PolicyRow]:
    """Validate `text` and make it current. A team that still has tasks may not disappear.

    A dry run stores nothing; its row carries the id of the version in force (which it would replace).
    """
    policy = parse(text)
    orphans = {t: n for t, n in _live_teams(session).items() if not policy.has_team(t)}
    if orphans:
        listed = ", ".join(f"{t} ({n} tasks)" for t, n in sorted(orphans.items()))
        raise Conflict(
            f"the new policy drops teams that still have pending or running tasks: {listed}; "
            "cancel them or keep the teams",
            {"teams": sorted(orphans)},
        )
    row = PolicyRow(applied_at=now, applied_by=who, cluster_name=policy.cluster_name, text=text)
    if dry_run:
        # Nothing is stored, so the answer names the version that stays in force.
        in_force = current(session)
        row.id = in_force.id if in_force is not None else 0
    else:
        session.add(row)
        session.flush()
    return policy, row


def info(row: PolicyRow, policy: Policy, with_text: bool = False) -> schemas.PolicyInfo:
    return schemas.PolicyInfo(
        version=row.id or 0,
        applied_at=utc(row.applied_at),
        applied_by=row.applied_by,
        cluster_name=policy.cluster_name,
        teams=list(policy.team_names),
        pools=[p.name for p in policy.pools],
        text=row.text if with_text else "",
        chargeback=_chargeback_rules(policy),
    )


def _chargeback_rules(policy: Policy) -> schemas.ChargebackRules:
    cfg = policy.chargeback
    return schemas.ChargebackRules(
        currency=cfg.currency,
        idle=cfg.idle.value,
        admin_split=cfg.admin_split.value,
        borrowed_rate=str(cfg.borrowed_rate),
        direct_cost=explain.direct_cost_sentence(cfg.borrowed_rate),
        idle_share=explain.idle_share_sentence(cfg.idle),
        kept_by_platform=explain.PLATFORM_SENTENCE,
        budget=explain.BUDGET_SENTENCE,
    )
