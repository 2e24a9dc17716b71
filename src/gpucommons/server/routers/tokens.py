"""`/api/v1/tokens`: create, list and revoke API tokens (platform admins only)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from gpucommons.api.identity import TokenCreate, TokenCreated, TokenInfo
from gpucommons.identity.authz import Action, authorize
from gpucommons.server.auth import CurrentPrincipal
from gpucommons.server.auth.audit import audit_note
from gpucommons.server.auth.deps import current_policy, database
from gpucommons.server.auth.token_admin import create_token, list_tokens, revoke, token_info

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


@router.post("", status_code=201, response_model=TokenCreated)
def create(body: TokenCreate, request: Request, who: CurrentPrincipal) -> TokenCreated:
    authorize(who, Action.TOKEN_CREATE)
    with database(request).session() as session:
        issued = create_token(session, current_policy(request), who, body, time.time())
        info = token_info(issued.row)
    audit_note(
        request, Action.TOKEN_CREATE, team=body.team, target=info.id, role=body.role, subject=info.subject
    )
    return TokenCreated(**info.model_dump(), token=issued.token)


@router.get("", response_model=list[TokenInfo])
def list_all(request: Request, who: CurrentPrincipal, include_revoked: bool = False) -> list[TokenInfo]:
    authorize(who, Action.TOKEN_READ)
    with database(request).session() as session:
        return [token_info(row) for row in list_tokens(session, include_revoked)]


@router.delete("/{token_id}", response_model=TokenInfo)
def revoke_one(token_id: str, request: Request, who: CurrentPrincipal) -> TokenInfo:
    authorize(who, Action.TOKEN_REVOKE)
    audit_note(request, Action.TOKEN_REVOKE, target=token_id)
    with database(request).session() as session:
        return token_info(revoke(session, token_id, time.time()))
