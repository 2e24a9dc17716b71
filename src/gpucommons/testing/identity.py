"""Test support for identity: a policy with directory groups, an app with auth and SCIM, a live server.

policy = identity_policy()                 # teams nlp and vision, admins, finance
db = identity_database(tmp_path)
app = identity_app(db, policy)             # install_auth(): SCIM, sign-in, tokens, audit
with live_server(app) as url: ...          # uvicorn on a free loopback port, in a thread
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gpucommons.domain.model import IdentityConfig, Policy
from gpucommons.identity.principal import Role
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.auth_wiring import install_auth
from gpucommons.server.errors import install_error_handlers
from gpucommons.store.base import Base
from gpucommons.store.db import Database, sqlite_url
from gpucommons.testing.builders import make_policy

#: Directory group names of `identity_policy()`.
NLP_GROUP, NLP_LEADS, VISION_GROUP, ADMINS, FINANCE = (
    "ml-nlp",
    "ml-nlp-leads",
    "ml-vision",
    "platform-admins",
    "finance",
)


def identity_policy() -> Policy:
    """Two teams, nlp and vision, each with a members group; nlp has a leads group."""
    base = (
        make_policy()
        .pool("h100", nodes=2, gpus_per_node=8)
        .team("nlp", h100=8)
        .team("vision", h100=8)
        .build()
    )
    teams = (
        replace(base.team("nlp"), groups=(NLP_GROUP,), admin_groups=(NLP_LEADS,)),
        replace(base.team("vision"), groups=(VISION_GROUP,)),
    )
    return replace(
        base, teams=teams, identity=IdentityConfig(admin_groups=(ADMINS,), finance_groups=(FINANCE,))
    )


def identity_database(directory: Path) -> Database:
    """A fresh SQLite database with every table (identity and control plane)."""
    import gpucommons.store.identity_models  # noqa: F401  (registers the tables)

    db = Database(sqlite_url(directory))
    Base.metadata.create_all(db.engine)
    return db


def identity_app(db: Database, policy: Policy | None = None) -> FastAPI:
    """An app with only what identity serves, wired the way the real app factory wires it."""
    app = FastAPI()
    app.state.db = db
    app.state.policy = policy
    install_error_handlers(app)
    install_auth(app)
    return app


def service_token(db: Database, role: Role, *, team: str | None = None, name: str = "test") -> str:
    with db.session() as session:
        return issue_token(session, name=name, now=time.time(), subject=name, role=role, team=team).token


@contextmanager
def live_server(app: FastAPI) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 and a free port; yields the base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


SCIM_JSON = "application/scim+json"


class ScimClient:
    """A SCIM client for tests: paths relative to /scim/v2, SCIM media type, a scim token."""

    def __init__(self, client: TestClient, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": SCIM_JSON}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(f"/scim/v2{path}", params=params, headers=self.headers)

    def post(self, path: str, body: Any) -> Any:
        return self.client.post(f"/scim/v2{path}", json=body, headers=self.headers)

    def put(self, path: str, body: Any) -> Any:
        return self.client.put(f"/scim/v2{path}", json=body, headers=self.headers)

    def patch(self, path: str, body: Any) -> Any:
        return self.client.patch(f"/scim/v2{path}", json=body, headers=self.headers)

    def delete(self, path: str) -> Any:
        return self.client.delete(f"/scim/v2{path}", headers=self.headers)

    def ok(self, response: Any, status: int = 200) -> dict[str, Any]:
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith(SCIM_JSON)
        body: dict[str, Any] = response.json()
        return body
