"""The authorization table: every route of the real app × every role × own team / other team.

The roles are real credentials against the real app (`create_app`): directory users pushed by SCIM
(a team admin and a member of nlp, a person in no group), service tokens (finance, scim), the
bootstrap admin, and no credential at all. "Own" means a resource of team nlp, "other" one of
team vision. Expectations are written out here, independently of `authorize()`, from the role
table of docs/identity.md; list endpoints are also checked for rows of teams the role may not see.

Every route the app serves must have a row: a new route without one fails
`test_every_route_has_a_row`, so nobody adds an endpoint without deciding who may use it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from gpucommons.identity.principal import Role
from gpucommons.server.app import create_app
from gpucommons.server.auth import create_bootstrap_admin_token
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.settings import Settings
from gpucommons.testing.identity import ScimClient, service_token

POLICY = """\
cluster:
  name: authz
  pools:
    - {name: h100, gpu_type: H100, nodes: 2, gpus_per_node: 8, price_per_gpu_hour: 2.50}
priority_classes:
  - {name: production, value: 1000, preemptible: false}
  - {name: experiment, value: 100, grace_period: 1m}
default_priority_class: experiment
teams:
  - name: nlp
    groups: [ml-nlp]
    admin_groups: [ml-nlp-leads]
    quota: {h100: {gpus: 8}}
  - name: vision
    groups: [ml-vision]
    quota: {h100: {gpus: 8}}
identity:
  admin_groups: [platform-admins]
  finance_groups: [finance]
"""

ROLES = ("admin", "finance", "team_admin", "member", "outsider", "scim", "anonymous")
OWN, OTHER = "nlp", "vision"
BOTH = frozenset({OWN, OTHER})
NONE: frozenset[str] = frozenset()

#: What each role may see, per kind of data (the role table of docs/identity.md, written out by hand).
SEES_TASKS: dict[str, AbstractSet[str]] = {"admin": BOTH, "team_admin": {OWN}, "member": {OWN}}
SEES_USAGE: dict[str, AbstractSet[str]] = {
    "admin": BOTH,
    "finance": BOTH,
    "team_admin": {OWN},
    "member": {OWN},
}
SEES_TEAMS = SEES_USAGE


@dataclass
class World:
    client: TestClient
    tokens: dict[str, str | None]
    tasks: dict[str, str]  # "nlp" / "vision" -> a task id of that team (submitted by someone else)
    own_task_of_member: str
    fresh: Callable[[str], str | None]

    def headers(self, role: str, token: str | None = None) -> dict[str, str]:
        t = token if token is not None else self.tokens[role]
        return {"Authorization": f"Bearer {t}"} if t else {}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("authz")
    (home / "commons.yaml").write_text(POLICY)
    app: FastAPI = create_app(
        Settings(home=home, policy=home / "commons.yaml", executor="timer", run_scheduler=False)
    )
    db = app.state.db
    with TestClient(app) as client:
        scim = ScimClient(client, service_token(db, Role.SCIM, name="idp"))

        def user(name: str, *groups: str) -> str:
            uid: str = scim.ok(
                scim.post(
                    "/Users", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name}
                ),
                201,
            )["id"]
            for g in groups:
                found = scim.ok(scim.get("/Groups", filter=f'displayName eq "{g}"'))["Resources"]
                if found:
                    members = [{"value": m["value"]} for m in found[0].get("members", [])] + [{"value": uid}]
                    scim.ok(
                        scim.put(
                            f"/Groups/{found[0]['id']}",
                            {
                                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                                "displayName": g,
                                "members": members,
                            },
                        )
                    )
                else:
                    scim.ok(
                        scim.post(
                            "/Groups",
                            {
                                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                                "displayName": g,
                                "members": [{"value": uid}],
                            },
                        ),
                        201,
                    )
            return uid

        users = {"team_admin": user("lena", "ml-nlp-leads"), "member": user("alice", "ml-nlp"),
                 "outsider": user("olga"), "victor": user("victor", "ml-vision")}  # fmt: skip

        def user_token(key: str) -> str:
            with db.session() as s:
                return issue_token(s, name="t", now=time.time(), subject=key, user_id=users[key]).token

        def fresh(role: str) -> str | None:
            if role == "anonymous":
                return None
            if role in users:
                return user_token(role)
            if role == "admin":
                return create_bootstrap_admin_token(db)
            return service_token(db, Role.FINANCE if role == "finance" else Role.SCIM, name=role)

        tokens = {role: fresh(role) for role in ROLES}

        def submit(token: str, team: str) -> str:
            r = client.post(
                "/api/v1/tasks",
                json={"team": team, "gpus": 1, "command": ["sleep", "600"]},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert r.status_code == 201, r.text
            task_id: str = r.json()["id"]
            return task_id

        tasks = {OWN: submit(tokens["team_admin"] or "", OWN), OTHER: submit(user_token("victor"), OTHER)}
        mine = submit(tokens["member"] or "", OWN)
        yield World(client, tokens, tasks, mine, fresh)


# --------------------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    """One route: how to call it about a team, who may, and what a list may show."""

    method: str
    path: str
    #: (role, team) -> allowed. `team` is None for routes about no team.
    allowed: Callable[[str, str | None], bool]
    call: Callable[[World, str, str | None], Any]
    team_scoped: bool = True
    #: Kind of data a listing returns, to check it holds no team the role may not see.
    lists: Mapping[str, AbstractSet[str]] | None = None
    note: str = ""
    denied_status: tuple[int, ...] = (403, 404)
    xfail: str = field(default="")


def people(role: str, _team: str | None) -> bool:
    """Every signed-in person or service, except the SCIM connector."""
    return role not in ("anonymous", "scim")


def admin_only(role: str, _team: str | None) -> bool:
    return role == "admin"


def sees(table: Mapping[str, AbstractSet[str]]) -> Callable[[str, str | None], bool]:
    return lambda role, team: team in table.get(role, NONE)


def task_member_of(role: str, team: str | None) -> bool:
    return team in SEES_TASKS.get(role, NONE)


def cancel_rule(role: str, team: str | None) -> bool:
    """Cancel someone else's task: only a platform admin or that team's admin."""
    return role == "admin" or (role == "team_admin" and team == OWN)


def get(path: str, **params: Any) -> Callable[[World, str, str | None], Any]:
    def call(w: World, role: str, team: str | None) -> Any:
        url = path.format(task=w.tasks.get(team or OWN, ""), team=team or "")
        query = {k: v.format(team=team or "") for k, v in params.items()}
        return w.client.get(url, params=query, headers=w.headers(role))

    return call


def send(
    method: str, path: str, body: Callable[[str | None], Any] | None = None, fresh: bool = False
) -> Callable[[World, str, str | None], Any]:
    def call(w: World, role: str, team: str | None) -> Any:
        url = path.format(task=w.tasks.get(team or OWN, ""), team=team or "")
        token = w.fresh(role) if fresh else None
        headers = w.headers(role, token) if fresh else w.headers(role)
        payload = body(team) if body else None
        return w.client.request(method, url, json=payload, headers=headers)

    return call


ROWS: list[Row] = [
    # tasks: contents, events and logs only for the team's members and admins (never finance)
    Row(
        "POST",
        "/api/v1/tasks",
        task_member_of,
        send("POST", "/api/v1/tasks", lambda t: {"team": t, "gpus": 1, "command": ["sleep", "1"]}),
    ),
    Row(
        "POST",
        "/api/v1/tasks/batch",
        task_member_of,
        send(
            "POST",
            "/api/v1/tasks/batch",
            lambda t: {"tasks": [{"team": t, "gpus": 1, "command": ["sleep", "1"]}]},
        ),
    ),
    Row("GET", "/api/v1/tasks", people, get("/api/v1/tasks", team="{team}"), lists=SEES_TASKS),
    Row("GET", "/api/v1/tasks/{task_id}", task_member_of, get("/api/v1/tasks/{task}")),
    Row("GET", "/api/v1/tasks/{task_id}/events", task_member_of, get("/api/v1/tasks/{task}/events")),
    # the event stream: the task list's rule (every event from the first, for a short while)
    Row(
        "GET",
        "/api/v1/events",
        people,
        get("/api/v1/events", team="{team}", after="0", timeout="0.5"),
        lists=SEES_TASKS,
    ),
    Row("GET", "/api/v1/tasks/{task_id}/attempts", task_member_of, get("/api/v1/tasks/{task}/attempts")),
    Row(
        "GET",
        "/api/v1/tasks/{task_id}/logs",
        task_member_of,
        get("/api/v1/tasks/{task}/logs", follow="false"),
    ),
    Row("POST", "/api/v1/tasks/{task_id}/cancel", cancel_rule, send("POST", "/api/v1/tasks/{task}/cancel")),
    Row(
        "POST",
        "/api/v1/tasks/{task_id}/checkpoint",
        cancel_rule,
        send("POST", "/api/v1/tasks/{task}/checkpoint", lambda t: {"note": "x"}),
    ),
    # the queue shows task names: a task read
    Row("GET", "/api/v1/queue", people, get("/api/v1/queue", team="{team}"), lists=SEES_TASKS),
    # usage and teams: finance sees every team
    Row("GET", "/api/v1/teams", people, get("/api/v1/teams"), team_scoped=False, lists=SEES_TEAMS),
    Row("GET", "/api/v1/usage", sees(SEES_USAGE), get("/api/v1/usage", team="{team}"), lists=SEES_USAGE),
    Row(
        "GET",
        "/api/v1/usage.csv",
        sees(SEES_USAGE),
        get("/api/v1/usage.csv", team="{team}"),
        lists=SEES_USAGE,
    ),
    # costs: like usage (finance sees every team), never task contents
    Row(
        "GET",
        "/api/v1/invoices",
        sees(SEES_USAGE),
        get("/api/v1/invoices", month="2026-11", team="{team}"),
        lists=SEES_USAGE,
    ),
    Row("GET", "/api/v1/budgets", people, get("/api/v1/budgets"), team_scoped=False, lists=SEES_USAGE),
    # the policy: readable by people, applied by platform admins
    Row("GET", "/api/v1/policy", people, get("/api/v1/policy"), team_scoped=False),
    Row(
        "PUT",
        "/api/v1/policy",
        admin_only,
        send("PUT", "/api/v1/policy", lambda _t: {"text": POLICY, "dry_run": True}),
        team_scoped=False,
        denied_status=(403,),
    ),
    # identity administration
    Row(
        "POST",
        "/api/v1/tokens",
        admin_only,
        send("POST", "/api/v1/tokens", lambda _t: {"name": "x", "role": "finance"}),
        team_scoped=False,
        denied_status=(403,),
    ),
    Row("GET", "/api/v1/tokens", admin_only, get("/api/v1/tokens"), team_scoped=False, denied_status=(403,)),
    Row(
        "DELETE",
        "/api/v1/tokens/{token_id}",
        admin_only,
        send("DELETE", "/api/v1/tokens/ffffffffffffffff"),
        team_scoped=False,
        denied_status=(403,),
    ),
    Row("GET", "/api/v1/audit", admin_only, get("/api/v1/audit"), team_scoped=False, denied_status=(403,)),
    Row(
        "GET",
        "/scim/v2",
        lambda r, _t: r in ("admin", "scim"),
        get("/scim/v2/Users"),
        team_scoped=False,
        denied_status=(403,),
    ),
    # the caller's own session
    Row("GET", "/api/v1/auth/whoami", people, get("/api/v1/auth/whoami"), team_scoped=False),
    Row(
        "DELETE",
        "/api/v1/auth/session",
        people,
        send("DELETE", "/api/v1/auth/session", fresh=True),
        team_scoped=False,
    ),
    Row("POST", "/auth/logout", people, send("POST", "/auth/logout", fresh=True), team_scoped=False),
    # the dashboard's data: cluster-wide aggregates, no task contents
    Row("GET", "/ui/api/context", people, get("/ui/api/context"), team_scoped=False),
    # Prometheus: labels GPU use by team, so only those who may read every team's usage
    Row(
        "GET",
        "/metrics",
        lambda r, _t: r in ("admin", "finance"),
        get("/metrics"),
        team_scoped=False,
        denied_status=(403,),
    ),
    # history: GPU use like usage, waits and a team's page like team summaries, a timeline like its task
    Row(
        "GET",
        "/api/v1/history/gpus",
        sees(SEES_USAGE),
        get("/api/v1/history/gpus", team="{team}"),
        lists=SEES_USAGE,
    ),
    Row(
        "GET",
        "/api/v1/history/waits",
        sees(SEES_TEAMS),
        get("/api/v1/history/waits", team="{team}"),
        lists=SEES_TEAMS,
    ),
    Row("GET", "/api/v1/teams/{team}", sees(SEES_TEAMS), get("/api/v1/teams/{team}")),
    Row("GET", "/api/v1/tasks/{task_id}/timeline", task_member_of, get("/api/v1/tasks/{task}/timeline")),
    # planning: every team's waits in a replay, so those who read every team's usage; runs by admins
    Row(
        "GET",
        "/api/v1/planning/runs",
        lambda r, _t: r in ("admin", "finance"),
        get("/api/v1/planning/runs"),
        team_scoped=False,
        denied_status=(403,),
    ),
    Row(
        "GET",
        "/api/v1/planning/runs/{run_id}",
        lambda r, _t: r in ("admin", "finance"),
        get("/api/v1/planning/runs/none"),
        team_scoped=False,
        denied_status=(403,),
    ),
    Row(
        "POST",
        "/api/v1/planning/runs",
        admin_only,
        send("POST", "/api/v1/planning/runs", lambda _t: {"kind": "replay", "policy": POLICY}),
        team_scoped=False,
        denied_status=(403,),
    ),
    Row(
        "POST",
        "/api/v1/policy/diff",
        admin_only,
        send("POST", "/api/v1/policy/diff", lambda _t: {"text": POLICY}),
        team_scoped=False,
        denied_status=(403,),
    ),
]

#: Routes anyone may call, and why that is safe.
PUBLIC = {
    ("GET", "/openapi.json"): "the API's description",
    ("GET", "/docs"): "API browser (static)",
    ("GET", "/docs/oauth2-redirect"): "API browser (static)",
    ("GET", "/redoc"): "API browser (static)",
    ("GET", "/healthz"): "liveness only",
    ("GET", "/"): "the dashboard's HTML shell; its data comes from authenticated calls",
    ("GET", "/ui/{path:path}"): "the dashboard's static assets",
    ("GET", "/auth/login"): "starts a sign-in",
    ("GET", "/auth/callback"): "ends a sign-in (checks its own state cookie)",
    ("GET", "/api/v1/auth/config"): "which OpenID provider to sign in with",
    ("POST", "/api/v1/auth/token"): "trades a verified ID token for a session",
}


def _served(app: FastAPI) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for rc in iter_route_contexts(app.routes):
        methods = getattr(rc.original_route, "methods", None) or {"GET"}  # a mount: its own table row
        for m in methods - {"HEAD"}:
            out.add((m, str(rc.path)))
    return out


def test_every_route_has_a_row(world: World) -> None:
    served = _served(world.client.app)  # type: ignore[arg-type]
    decided = {(r.method, r.path) for r in ROWS} | set(PUBLIC)
    assert served - decided == set(), "routes nobody decided access for (add a Row or a PUBLIC entry)"


def _cases() -> list[Any]:
    cases = []
    for row in ROWS:
        for role in ROLES:
            for team in (OWN, OTHER) if row.team_scoped else (None,):
                cases.append(
                    pytest.param(row, role, team, id=f"{row.method} {row.path} {role} {team or '-'}")
                )
    return cases


def _teams_in(response: Any) -> set[str]:
    if response.headers.get("content-type", "").startswith("text/csv"):
        lines = response.text.strip().splitlines()
        return {line.split(",")[1] for line in lines[1:]}
    found: set[str] = set()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
        return {json.loads(d)["team"] for d in data}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("team"), str):
                found.add(node["team"])
            if isinstance(node.get("name"), str) and "pools" in node:  # a team summary
                found.add(node["name"])
            if isinstance(node.get("teams"), dict):  # a chargeback result (docs/design.md, contract 5)
                found.update(node["teams"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(response.json())
    return found


@pytest.mark.parametrize(("row", "role", "team"), _cases())
def test_route_role_team(world: World, row: Row, role: str, team: str | None) -> None:
    if (row.method, row.path) not in _served(world.client.app):  # type: ignore[arg-type]
        pytest.skip(f"{row.method} {row.path} is not served by this build")
    response = row.call(world, role, team)
    status = response.status_code
    if role == "anonymous":
        assert status == 401, f"{row.method} {row.path}: anonymous got {status}"
        return
    if row.allowed(role, team):
        assert status not in (401, 403), (
            f"{role} should reach {row.method} {row.path} ({team}): {status} {response.text[:300]}"
        )
        assert status < 500, response.text
    else:
        assert status in row.denied_status, (
            f"{role} must not reach {row.method} {row.path} ({team}): {status} {response.text[:300]}"
        )
    if row.lists is not None and status == 200:
        leaked = _teams_in(response) - set(row.lists.get(role, NONE))
        assert not leaked, f"{role} saw rows of {leaked} through {row.method} {row.path}"


def test_a_member_cancels_their_own_task(world: World) -> None:
    r = world.client.post(f"/api/v1/tasks/{world.own_task_of_member}/cancel", headers=world.headers("member"))
    assert r.status_code == 200 and r.json()["state"] == "cancelled"


def test_a_listing_without_a_team_shows_only_visible_teams(world: World) -> None:
    for role, visible in (("member", {OWN}), ("finance", NONE), ("admin", BOTH)):
        rows = world.client.get("/api/v1/tasks", headers=world.headers(role)).json()
        assert {t["team"] for t in rows} <= set(visible), role
    assert {
        t["team"] for t in world.client.get("/api/v1/tasks", headers=world.headers("admin")).json()
    } == BOTH


def test_metrics_show_team_usage_only_to_who_may_read_every_team(world: World) -> None:
    assert world.client.get("/metrics").status_code == 401
    assert world.client.get("/metrics", headers=world.headers("member")).status_code == 403
    text = world.client.get("/metrics", headers=world.headers("finance")).text
    assert "commons_" in text


def test_the_table_is_dumpable_for_the_docs() -> None:
    table = {
        f"{r.method} {r.path}": {
            role: [t for t in (OWN, OTHER) if r.allowed(role, t)] if r.team_scoped else r.allowed(role, None)
            for role in ROLES
        }
        for r in ROWS
    }
    assert json.dumps(table)


def test_task_mutations_are_audited_with_their_team_and_target(world: World) -> None:
    def audit(**params: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = world.client.get(
            "/api/v1/audit", params={"limit": 1000, **params}, headers=world.headers("admin")
        ).json()
        return rows

    submitted = {r["target"]: r for r in audit(action="task.submit", outcome="ok")}
    assert submitted[world.tasks[OWN]]["team"] == OWN and submitted[world.tasks[OTHER]]["team"] == OTHER
    assert submitted[world.tasks[OWN]]["actor"] == "lena" and submitted[world.tasks[OWN]]["remote_addr"]
    for role, team in (("member", OTHER), ("finance", OWN)):
        body = {"team": team, "gpus": 1, "command": ["true"]}
        assert world.client.post("/api/v1/tasks", json=body, headers=world.headers(role)).status_code == 403
    refused = audit(action="task.submit", outcome="denied")
    assert {(r["actor"], r["team"]) for r in refused} >= {("alice", OTHER), ("finance", OWN)}
    # Without a note, the answer names team and target: a SCIM user created is audited with its id.
    created = audit(action="POST /scim/v2/Users", outcome="ok")  # the world pushed four users
    assert created and all(r["target"] for r in created)
