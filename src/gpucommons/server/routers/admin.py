"""`POST /api/v1/policy/diff`: the admin page's preview of a proposed policy before `PUT /policy`.

Platform admins only (it shows the policy file, which `GET /policy` gives only to them). Tokens and
the audit log have their own routes (`/api/v1/tokens`, `/api/v1/audit`); the admin page uses them.
"""

from __future__ import annotations

from fastapi import APIRouter

from gpucommons.api import history as wire
from gpucommons.identity.authz import Action, authorize
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.routers.responses import errors
from gpucommons.server.services import policies, policy_diff

router = APIRouter(prefix="/api/v1", tags=["cluster"])


@router.post("/policy/diff", response_model=wire.PolicyDiff, responses=errors(401, 403, 422))
def diff_policy(body: wire.PolicyDiffRequest, ctx: ContextDep, who: CurrentPrincipal) -> wire.PolicyDiff:
    """The current policy file against `text`: unified diff, validity (every issue), quota changes."""
    authorize(who, Action.POLICY_APPLY)
    with ctx.db.session() as session:
        row = policies.current(session)
        assert row is not None  # the server does not start without one
        text, version = row.text, row.id
    return policy_diff.diff(text, ctx.policies.policy, version, body.text)
