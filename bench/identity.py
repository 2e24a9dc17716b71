"""Benchmark: what identity costs per request, and how the SCIM service scales with the directory.

Times (p50 / p99 / max over the runs of each):
  authorize      one `authorize()` decision (pure), member on own / other team
  authenticate   `resolve_token`: a bearer token to a Principal (token row, user, groups), SQLite,
                 with a directory of U users, each in 3 of G groups; again for a token a platform
                 admin minted (its creator's activity and admin role are checked too)
  scim create    POST /scim/v2/Users over HTTP to uvicorn on loopback (validation, uniqueness, audit)
  scim filter    GET /Users?filter=userName eq "…" (case-insensitive, indexed) at U users
  scim page      GET /Users?startIndex=…&count=100 at U users
  scim member+   PATCH /Groups/{id} adding one member to a group that has M members already
  paths          CPU time of that PATCH in-process: the general scim2-models path against the
                 membership path the server takes for the shapes IdPs send (same group, same op)
Run:  python bench/identity.py [--users U] [--groups G] [--members M] [--repeat R]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from scim2_models import Context, PatchOp
from sqlalchemy import insert

from gpucommons.identity.authz import Action, authorize
from gpucommons.identity.principal import Principal, Role
from gpucommons.identity.scim import SCIM_POLICY, ScimGroup, comparison_key, members_only_patch
from gpucommons.server.auth.credentials import issue_token, resolve_token
from gpucommons.server.auth.directory_edits import add_member as join_group
from gpucommons.server.auth.directory_edits import ensure_group, new_user
from gpucommons.server.scim.directory import Directory
from gpucommons.store.db import Database
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser, GroupMember
from gpucommons.testing.identity import (
    ADMINS,
    identity_app,
    identity_database,
    identity_policy,
    live_server,
    service_token,
)

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"


def timed(
    action: Callable[[int], object], repeat: int, clock: Callable[[], float] = time.perf_counter
) -> str:
    samples = []
    for i in range(repeat):
        start = clock()
        action(i)
        samples.append((clock() - start) * 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return f"{statistics.median(samples):8.3f} {p99:8.3f} {samples[-1]:8.3f}"


def _user_row(user_id: str, name: str, created: float) -> dict[str, object]:
    return {
        "id": user_id, "user_name": name, "user_name_key": name, "active": True,
        "attributes": {"schemas": [USER], "userName": name}, "created_at": created, "updated_at": created,
        "version": 1,
    }  # fmt: skip


def seed_directory(db: Database, users: int, groups: int) -> list[str]:
    """U users, G groups (ml-nlp among them), each user in 3 groups; bulk-inserted."""
    now = time.time()
    ids = [uuid.uuid4().hex for _ in range(users)]
    names = ["ml-nlp"] + [f"group-{i}" for i in range(1, groups)]
    gids = [uuid.uuid4().hex for _ in names]
    with db.session() as s:
        s.execute(
            insert(DirectoryUser),
            [
                _user_row(u, f"user{i}@corp.local", now + i)
                for i, u in enumerate(ids)
            ],
        )  # fmt: skip
        s.execute(
            insert(DirectoryGroup),
            [
                {"id": g, "display_name": n, "display_name_key": comparison_key(n),
                 "attributes": {"displayName": n}, "created_at": now, "updated_at": now, "version": 1}
                for g, n in zip(gids, names, strict=True)
            ],
        )  # fmt: skip
        s.execute(
            insert(GroupMember),
            [
                {"group_id": gids[(i + k) % groups], "member_id": u, "added_at": now}
                for i, u in enumerate(ids)
                for k in range(3)
            ],
        )
    return ids


def membership_paths(db: Database, members: int, repeat: int) -> None:
    with db.session() as s:
        seeded = ScimGroup.model_validate(
            {
                "schemas": [GROUP],
                "displayName": f"paths-{members}",
                "members": [{"value": uuid.uuid4().hex} for _ in range(members)],
            }
        )
        gid = Directory(s, time.time()).save_group(None, seeded).id

    def payload() -> dict[str, Any]:
        return {
            "schemas": [PATCH_OP],
            "Operations": [{"op": "add", "path": "members", "value": [{"value": uuid.uuid4().hex}]}],
        }

    def general(_i: int) -> None:
        with db.session() as s:
            d = Directory(s, time.time())
            ops = PatchOp[ScimGroup].model_validate(
                payload(), scim_ctx=Context.RESOURCE_PATCH_REQUEST, scim_policy=SCIM_POLICY
            )
            resource = d.group_resource(d.group(gid), "http://x/")
            ops.patch(resource, scim_policy=SCIM_POLICY)
            row = d.save_group(d.group(gid), resource)
            d.group_resource(row, "http://x/").model_dump(scim_ctx=Context.RESOURCE_PATCH_RESPONSE)

    def fast(_i: int) -> None:
        with db.session() as s:
            d = Directory(s, time.time())
            edits = members_only_patch(payload())
            assert edits is not None
            row = d.edit_members(d.group(gid), edits)
            d.group_resource(row, "http://x/").model_dump(scim_ctx=Context.RESOURCE_PATCH_RESPONSE)

    for name, action in (
        (f"general path, M={members} (CPU)", general),
        (f"membership path, M={members} (CPU)", fast),
    ):
        print(f"{name:<44} {timed(action, repeat, clock=time.process_time)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--members", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    policy = identity_policy()
    print(f"{'measure':<44} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")

    member = Principal("alice", member_of=frozenset({"nlp"}))
    allowed = timed(lambda _i: authorize(member, Action.LOGS_READ, "nlp"), 20_000)
    print(f"{'authorize, own team (allowed)':<44} {allowed}")

    def refused(_i: int) -> None:
        with contextlib.suppress(PermissionError):
            authorize(member, Action.LOGS_READ, "vision")

    print(f"{'authorize, other team (refused)':<44} {timed(refused, 20_000)}")

    with tempfile.TemporaryDirectory() as tmp:
        db = identity_database(Path(tmp))
        ids = seed_directory(db, args.users, args.groups)
        with db.session() as s:
            user_token = issue_token(s, name="b", now=time.time(), subject="user0", user_id=ids[0]).token
        scim_token = service_token(db, Role.SCIM, name="bench")

        with db.session() as s:
            admin = new_user(s, "admin0", time.time())
            join_group(s, ensure_group(s, ADMINS, time.time()), admin, time.time())
            minted_token = issue_token(
                s, name="m", now=time.time(), subject="user0", user_id=ids[0], created_by_user_id=admin.id
            ).token

        def authenticate(_i: int) -> None:
            with db.session() as s:
                assert resolve_token(s, user_token, policy, time.time()) is not None

        def authenticate_minted(_i: int) -> None:
            with db.session() as s:
                assert resolve_token(s, minted_token, policy, time.time()) is not None

        print(f"{f'authenticate (U={args.users}, G={args.groups})':<44} {timed(authenticate, args.repeat)}")
        print(f"{'authenticate, minted (creator checked)':<44} {timed(authenticate_minted, args.repeat)}")

        server = live_server(identity_app(db, policy))
        url = server.__enter__()
        client = httpx.Client(base_url=url, timeout=60)
        h = {"Authorization": f"Bearer {scim_token}", "Content-Type": "application/scim+json"}

        def create(i: int) -> None:
            r = client.post(
                "/scim/v2/Users", json={"schemas": [USER], "userName": f"new{i}@corp.local"}, headers=h
            )
            assert r.status_code == 201, r.text

        print(f"{f'scim create user (U={args.users})':<44} {timed(create, args.repeat)}")

        def find(i: int) -> None:
            r = client.get(
                "/scim/v2/Users",
                params={"filter": f'userName eq "USER{i * 37 % args.users}@corp.local"'},
                headers=h,
            )
            assert r.json()["totalResults"] == 1

        print(f"{'scim filter userName eq':<44} {timed(find, args.repeat)}")

        def page(i: int) -> None:
            r = client.get(
                "/scim/v2/Users", params={"startIndex": 1 + (i * 100) % args.users, "count": 100}, headers=h
            )
            assert len(r.json()["Resources"]) == 100

        print(f"{'scim page of 100 users':<44} {timed(page, max(10, args.repeat // 4))}")

        members = [{"value": u} for u in ids[: args.members]]
        gid = client.post(
            "/scim/v2/Groups",
            json={
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                "displayName": "big",
                "members": members,
            },
            headers=h,
        ).json()["id"]

        def add_member(i: int) -> None:
            op = {"op": "add", "path": "members", "value": [{"value": ids[args.members + i]}]}
            r = client.patch(
                f"/scim/v2/Groups/{gid}", json={"schemas": [PATCH_OP], "Operations": [op]}, headers=h
            )
            assert r.status_code == 200

        grow = timed(add_member, max(10, args.repeat // 10))
        print(f"{f'scim add 1 member to a group of M={args.members}':<44} {grow}")
        client.close()
        server.__exit__(None, None, None)
        for size in (200, args.members):
            membership_paths(db, size, max(10, args.repeat // 10))
        db.dispose()


if __name__ == "__main__":
    main()
