"""Authentication for every route: who is calling, and the credentials behind it.

Stable names (the control plane builds on them):
- `CurrentPrincipal`: `Annotated[Principal, Depends(current_principal)]`; resolves the bearer token (or
  the web session cookie) through `request.app.state.db` and the policy on `request.app.state.policy`;
  401 `{"error": {"code": "unauthenticated", ...}}` otherwise.
- `create_bootstrap_admin_token(db) -> str`: a new platform-admin token for `commons up`.
- `install_auth(app)` lives one layer up, in `gpucommons.server.auth_wiring`: it mounts the token,
  audit and SCIM routers, which import this package, so this package must not import them.
Authorization itself is `gpucommons.identity.authz.authorize(principal, Action.X, team)` in each route.
"""

from __future__ import annotations

import time

from gpucommons.server.auth.credentials import create_bootstrap_admin
from gpucommons.server.auth.deps import CurrentPrincipal, current_policy, current_principal
from gpucommons.store.db import Database

__all__ = [
    "CurrentPrincipal",
    "create_bootstrap_admin_token",
    "current_policy",
    "current_principal",
]


def create_bootstrap_admin_token(db: Database) -> str:
    """Create a platform-admin API token (named `bootstrap-admin`) and return it; only its hash is kept."""
    with db.session() as session:
        return create_bootstrap_admin(session, time.time()).token
