"""A recorded fake of the Kubernetes API server, served over loopback for the real client to talk to.

No API server can run on these machines. This one answers the calls `commons k8s apply` and the
Workload watcher make — discovery, GET, LIST with a label selector, server-side apply (PATCH with
`application/apply-patch+yaml`, `fieldManager`, `force`, `dryRun=All`), DELETE and a watch stream —
with bodies replayed from `recordings/*.json`. Each recording names where its shape comes from; the
fake only fills in names (`{name}`, `{plural}`, ...) and keeps a small object store, so that a second
apply sees what the first wrote.

Server-side apply is modelled to the depth the tests need: every leaf field has one owner; applying a
different value to a field another manager owns is a 409 conflict unless `force=true`, which moves the
field to the applier; an apply that changes nothing does not bump `resourceVersion`.
"""

from __future__ import annotations

import copy
import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent / "recordings"

#: plural → (kind, group/version, namespaced): the fake's own table, independent of the code under test.
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "namespaces": ("Namespace", "v1", False),
    "clusterroles": ("ClusterRole", "rbac.authorization.k8s.io/v1", False),
    "clusterrolebindings": ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", False),
    "rolebindings": ("RoleBinding", "rbac.authorization.k8s.io/v1", True),
    "networkpolicies": ("NetworkPolicy", "networking.k8s.io/v1", True),
    "jobs": ("Job", "batch/v1", True),
}
for _r in json.loads((RECORDINGS / "discovery_kueue_v1beta2.json").read_text())["body"]["resources"]:
    if "/" not in _r["name"]:
        RESOURCES[_r["name"]] = (_r["kind"], "kueue.x-k8s.io/v1beta2", _r["namespaced"])
_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def recording(name: str) -> tuple[int, Any]:
    data = json.loads((RECORDINGS / f"{name}.json").read_text())
    return int(data["status"]), data["body"]


def _fill(template: Any, values: dict[str, str]) -> Any:
    if isinstance(template, str):
        for key, value in values.items():
            template = template.replace("{" + key + "}", value)
        return template
    if isinstance(template, dict):
        filled = {k: _fill(v, values) for k, v in template.items()}
        return {k: v for k, v in filled.items() if v != ""}  # the API server omits empty strings
    if isinstance(template, list):
        return [_fill(v, values) for v in template]
    return template


def leaves(obj: Any, prefix: str = "") -> dict[str, Any]:
    """`.spec.queueingStrategy` → value, down through maps (a list is one leaf, as `fieldsV1` depth)."""
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(leaves(value, f"{prefix}.{key}"))
        return out
    return {prefix: obj}


def _fields_v1(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {f"f:{k}": _fields_v1(v) for k, v in obj.items()}
    return {}


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    keys = path.lstrip(".").split(".")
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = copy.deepcopy(value)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass
class Target:
    plural: str
    kind: str
    group_version: str
    namespace: str | None
    name: str | None

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


@dataclass
class FakeApiServer:
    """Start with `with FakeApiServer() as fake:`; `fake.kubeconfig(dir)` writes a kubeconfig for it."""

    kueue: bool = True
    user: str = "alice@example.com"
    token: str = "fake-token"
    #: (verb, plural) pairs RBAC denies: ("patch", "clusterqueues"), ("list", "namespaces"), ...
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    #: object path → (recording, values): answer applies to that object with this recorded refusal.
    refusals: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: The same, for real writes only: the dry run passes, the write fails (the cluster changed).
    write_refusals: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: Workload watch events streamed by GET .../workloads?watch=1.
    watch_events: list[dict[str, Any]] = field(default_factory=list)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: object path → {leaf field path → manager}.
    owners: dict[str, dict[str, str]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    _rv: int = 1000
    _uid: int = 0

    # --- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> FakeApiServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, each answer waits ~40 ms for an ACK.
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                url = urllib.parse.urlsplit(self.path)
                request = Request(
                    self.command,
                    url.path,
                    urllib.parse.parse_qs(url.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
                fake.requests.append(request)
                if request.param("watch") in ("1", "true"):
                    self._stream(fake.watch_lines())
                    return
                try:
                    status, body = fake.handle(request)
                except Exception as exc:  # a bug in the fake: answer, so the test fails with the reason
                    status, body = 500, {"kind": "Status", "code": 500, "message": f"fake: {exc!r}"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, lines: Iterator[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in lines:
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")

            do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def kubeconfig(self, directory: Path, context: str = "fake") -> Path:
        path = directory / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "alice", "user": {"token": self.token}}],
                    "contexts": [{"name": context, "context": {"cluster": "fake", "user": "alice"}}],
                    "current-context": context,
                }
            )
        )
        return path

    # --- inspection helpers for tests ----------------------------------------------------------------

    def writes(self) -> list[Request]:
        """Requests that change the store: applies and deletes without dryRun."""
        return [r for r in self.requests if r.method in ("PATCH", "DELETE") and r.param("dryRun") is None]

    def seed(self, path: str, obj: dict[str, Any], manager: str = "kubectl-edit") -> None:
        """An object some other tool wrote; `manager` owns all its fields."""
        stored = copy.deepcopy(obj)
        stored["metadata"].update(self._server_metadata(stored, manager, generation=1))
        self.objects[path] = stored
        self.owners[path] = {p: manager for p in leaves(self._content(stored))}

    # --- request handling ---------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _server_metadata(self, obj: dict[str, Any], manager: str, generation: int) -> dict[str, Any]:
        self._uid += 1
        _, meta = recording("apply_response_metadata")
        filled = _fill(
            meta["metadata"],
            {
                "uid": f"00000000-0000-4000-8000-{self._uid:012d}",
                "resourceVersion": self._next_rv(),
                "manager": manager,
                "apiVersion": obj.get("apiVersion", ""),
            },
        )
        filled["generation"] = generation
        filled["managedFields"][0]["fieldsV1"] = _fields_v1(self._content(obj))
        return dict(filled)

    @staticmethod
    def _content(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in _SERVER_FIELDS}
        return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "metadata": meta}

    def parse(self, path: str) -> Target | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group_version, rest = "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in RESOURCES:
            return None
        kind, served_gv, _ = RESOURCES[rest[0]]
        if served_gv != group_version or (served_gv.startswith("kueue") and not self.kueue):
            return None
        return Target(rest[0], kind, group_version, namespace, rest[1] if len(rest) > 1 else None)

    def status(self, recorded: str, /, **values: str) -> tuple[int, Any]:
        code, body = recording(recorded)
        return code, _fill(body, values)

    def handle(self, request: Request) -> tuple[int, Any]:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return self.status("status_unauthorized")
        if request.path == "/apis/kueue.x-k8s.io/v1beta2":
            return (
                recording("discovery_kueue_v1beta2") if self.kueue else self.status("status_group_not_found")
            )
        target = self.parse(request.path)
        if target is None:
            return self.status("status_group_not_found")
        verb = {"GET": "get" if target.name else "list", "PATCH": "patch", "DELETE": "delete"}.get(
            request.method, request.method.lower()
        )
        if (verb, target.plural) in self.forbidden:
            return self._forbidden(target, verb)
        if request.method == "GET":
            return self._get(request, target)
        if request.method == "PATCH":
            return self._apply(request, target)
        if request.method == "DELETE":
            return self._delete(request, target)
        return 405, {"kind": "Status", "status": "Failure", "reason": "MethodNotAllowed", "code": 405}

    def _forbidden(self, target: Target, verb: str) -> tuple[int, Any]:
        scope = f'in the namespace "{target.namespace}"' if target.namespace else "at the cluster scope"
        subject = f'{target.resource} "{target.name}"' if target.name else target.resource
        return self.status(
            "status_forbidden",
            subject=subject,
            user=self.user,
            verb=verb,
            plural=target.plural,
            group=target.group,
            scope=scope,
            name=target.name or "",
        )

    def _not_found(self, target: Target) -> tuple[int, Any]:
        return self.status(
            "status_not_found",
            resource=target.resource,
            name=target.name or "",
            group=target.group,
            plural=target.plural,
        )

    def _get(self, request: Request, target: Target) -> tuple[int, Any]:
        if target.name is not None:
            stored = self.objects.get(request.path)
            return (200, copy.deepcopy(stored)) if stored is not None else self._not_found(target)
        wanted = dict(
            pair.split("=", 1) for pair in (request.param("labelSelector") or "").split(",") if "=" in pair
        )
        items = []
        for stored in self.objects.values():
            if stored.get("kind") != target.kind:
                continue
            if target.namespace and stored["metadata"].get("namespace") != target.namespace:
                continue
            labels = stored["metadata"].get("labels", {})
            if all(labels.get(k) == v for k, v in wanted.items()):
                item = copy.deepcopy(stored)
                if not target.group_version.startswith("kueue.x-k8s.io/"):
                    item.pop("kind", None)  # typed lists of built-in kinds leave these out of their items
                    item.pop("apiVersion", None)
                items.append(item)
        return 200, {
            "kind": f"{target.kind}List",
            "apiVersion": target.group_version,
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

    def _apply(self, request: Request, target: Target) -> tuple[int, Any]:
        if request.headers.get("content-type") != "application/apply-patch+yaml":
            return 415, {"kind": "Status", "status": "Failure", "reason": "UnsupportedMediaType", "code": 415}
        manager = request.param("fieldManager")
        if not manager:
            return 422, {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch",
                "reason": "Invalid",
                "code": 422,
            }
        applied: dict[str, Any] = request.body
        if applied["metadata"]["name"] != target.name or applied.get("kind") != target.kind:
            return 400, {
                "kind": "Status",
                "status": "Failure",
                "reason": "BadRequest",
                "message": f"the name of the object ({applied['metadata']['name']}) does not match the "
                f"name on the URL ({target.name})",
                "code": 400,
            }
        if target.namespace and f"/api/v1/namespaces/{target.namespace}" not in self.objects:
            return self.status(
                "status_not_found",
                resource="namespaces",
                name=target.namespace,
                group="",
                plural="namespaces",
            )
        dry_run = request.param("dryRun") == "All"
        refusal = self.refusals.get(request.path) or (
            None if dry_run else self.write_refusals.get(request.path)
        )
        if refusal is not None:
            return self.status(refusal[0], **refusal[1])
        force = request.param("force") == "true"
        stored = self.objects.get(request.path)
        if stored is None:
            created = copy.deepcopy(applied)
            created["metadata"].update(self._server_metadata(created, manager, generation=1))
            if not dry_run:
                self.objects[request.path] = created
                self.owners[request.path] = {p: manager for p in leaves(self._content(applied))}
            return 201, copy.deepcopy(created)
        owners = dict(self.owners.get(request.path, {}))
        ours = leaves(self._content(applied))
        theirs = leaves(self._content(stored))
        conflicts = [
            p for p, value in ours.items() if owners.get(p, manager) != manager and theirs.get(p) != value
        ]
        if conflicts and not force:
            other = owners[conflicts[0]]
            return self.status(
                "status_apply_conflict", manager=other, apiVersion=target.group_version, field=conflicts[0]
            )
        merged = self._content(applied)
        for path, owner in owners.items():  # fields others own and we do not set stay as they are
            if owner != manager and path not in ours and path in theirs:
                _set_path(merged, path, theirs[path])
        for path in ours:
            owners[path] = manager
        if merged == self._content(stored):
            return 200, copy.deepcopy(stored)
        result = copy.deepcopy(merged)
        result["metadata"].update(
            {k: stored["metadata"][k] for k in _SERVER_FIELDS if k in stored["metadata"]}
        )
        result["metadata"]["resourceVersion"] = str(self._rv + 1) if dry_run else self._next_rv()
        result["metadata"]["generation"] = stored["metadata"].get("generation", 1) + 1
        if "status" in stored:
            result["status"] = stored["status"]
        if not dry_run:
            self.objects[request.path] = result
            self.owners[request.path] = owners
        return 200, copy.deepcopy(result)

    def _delete(self, request: Request, target: Target) -> tuple[int, Any]:
        stored = self.objects.get(request.path)
        if stored is None:
            return self._not_found(target)
        if request.param("dryRun") != "All":
            del self.objects[request.path]
            if target.kind == "Namespace":  # its contents go with it
                inside = [p for p, o in self.objects.items() if o["metadata"].get("namespace") == target.name]
                for path in inside:
                    del self.objects[path]
        return self.status(
            "status_delete_success",
            name=target.name or "",
            group=target.group,
            plural=target.plural,
            uid=stored["metadata"].get("uid", ""),
        )

    def watch_lines(self) -> Iterator[bytes]:
        for event in self.watch_events:
            yield json.dumps(event).encode() + b"\n"
