"""The current policy file against a proposed one: a unified diff, whether the proposal would be
accepted (with every issue, as `policy apply` reports them), and the quota changes in words."""

from __future__ import annotations

import difflib

from gpucommons.api import history as wire
from gpucommons.domain.model import Policy, Quota
from gpucommons.domain.resources import UNLIMITED
from gpucommons.policy import PolicyError, parse_policy

#: A diff longer than this is cut (a policy file is a few hundred lines).
MAX_DIFF_LINES = 5000


def describe(quota: Quota | None) -> str:
    if quota is None:
        return "no quota"
    parts = [f"{quota.nominal.gpus} GPU" + ("" if quota.nominal.gpus == 1 else "s")]
    if quota.borrow_limit.gpus < UNLIMITED:
        parts.append(f"borrow ≤ {quota.borrow_limit.gpus}")
    if quota.lend_limit.gpus < UNLIMITED:
        parts.append(f"lend ≤ {quota.lend_limit.gpus}")
    return ", ".join(parts)


def quota_changes(before: Policy, after: Policy) -> list[wire.QuotaChange]:
    out = []
    for team in sorted(set(before.team_names) & set(after.team_names)):
        old, new = before.team(team), after.team(team)
        pools = list(dict.fromkeys([q.pool for q in old.quotas] + [q.pool for q in new.quotas]))
        for pool in pools:
            a, b = describe(old.quota(pool)), describe(new.quota(pool))
            if a != b:
                out.append(wire.QuotaChange(team=team, pool=pool, before=a, after=b))
    return out


def diff(current_text: str, current: Policy, version: int, proposed_text: str) -> wire.PolicyDiff:
    lines = list(
        difflib.unified_diff(
            current_text.splitlines(),
            proposed_text.splitlines(),
            fromfile=f"current (version {version})",
            tofile="proposed",
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]
    try:
        proposed = parse_policy(proposed_text, "the proposed policy")
    except PolicyError as exc:
        issues = [{"path": i.path, "message": i.message, "line": i.line} for i in exc.issues] or [
            {"path": "", "message": str(exc), "line": None}
        ]
        return wire.PolicyDiff(
            current_version=version,
            diff=lines,
            valid=False,
            issues=issues,
            quota_changes=[],
            teams_added=[],
            teams_removed=[],
        )
    return wire.PolicyDiff(
        current_version=version,
        diff=lines,
        valid=True,
        issues=[],
        quota_changes=quota_changes(current, proposed),
        teams_added=sorted(set(proposed.team_names) - set(current.team_names)),
        teams_removed=sorted(set(current.team_names) - set(proposed.team_names)),
    )
