"""The identity operations of the API (tokens, audit, sign-in, whoami) on a `CommonsClient`.

Kept beside `http.py` rather than in it, so identity's endpoints evolve without touching the control
plane's client; it shares the client's connection, token and error mapping.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpucommons.api.identity import (
    AuditEntry,
    AuthConfig,
    IdTokenExchange,
    SessionToken,
    TokenCreate,
    TokenCreated,
    TokenInfo,
    WhoAmI,
)
from gpucommons.client.http import CommonsClient


class IdentityApi:
    def __init__(self, client: CommonsClient) -> None:
        self._c = client

    def create_token(self, body: TokenCreate) -> TokenCreated:
        return self._c._model(TokenCreated, "POST", "/api/v1/tokens", json=body.model_dump(exclude_none=True))

    def tokens(self, include_revoked: bool = False) -> list[TokenInfo]:
        params = {"include_revoked": "true"} if include_revoked else {}
        return self._c._models(TokenInfo, "GET", "/api/v1/tokens", params=params)

    def revoke_token(self, token_id: str) -> TokenInfo:
        return self._c._model(TokenInfo, "DELETE", f"/api/v1/tokens/{token_id}")

    def audit(
        self,
        since: datetime | None = None,
        actor: str | None = None,
        action: str | None = None,
        outcome: str | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        params: dict[str, Any] = {"limit": limit}
        if since is not None:
            params["since"] = since.isoformat()
        for key, value in (("actor", actor), ("action", action), ("outcome", outcome)):
            if value:
                params[key] = value
        return self._c._models(AuditEntry, "GET", "/api/v1/audit", params=params)

    def auth_config(self) -> AuthConfig:
        return self._c._model(AuthConfig, "GET", "/api/v1/auth/config")

    def exchange_id_token(self, id_token: str) -> SessionToken:
        body = IdTokenExchange(id_token=id_token).model_dump()
        return self._c._model(SessionToken, "POST", "/api/v1/auth/token", json=body)

    def whoami(self) -> WhoAmI:
        return self._c._model(WhoAmI, "GET", "/api/v1/auth/whoami")

    def sign_out(self) -> None:
        self._c._request("DELETE", "/api/v1/auth/session")
