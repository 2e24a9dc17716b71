"""The HTTP face of the fake cluster: the Kubernetes REST API on 127.0.0.1 for the real client.

Served: discovery (`/version`, `/api`, `/apis`, each group/version), and for every resource of
`resources`: GET (get, list with label/field selectors and `limit`/`continue`, watch), POST (create,
`generateName`), PUT (update, optimistic concurrency on `resourceVersion`), PATCH (JSON merge patch,
strategic merge patch for built-in kinds, JSON patch, server-side apply with `fieldManager`,
`force`), DELETE (`propagationPolicy`, `gracePeriodSeconds`, finalizers), `dryRun=All` on writes,
the `/status` subresource, `pods/log` (with `follow=true`), and Kueue's visibility API. Errors are the
API server's `Status` objects (`statuses`). Bearer-token authentication; `forbidden` holds the
(verb, resource) pairs RBAC denies.
"""

from __future__ import annotations

import base64
import builtins
import copy
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import yaml

from gpucommons.testing.fake_k8s import ssa, statuses
from gpucommons.testing.fake_k8s.clock import FakeClock, timestamp
from gpucommons.testing.fake_k8s.faults import Faults
from gpucommons.testing.fake_k8s.fields import PatchError, json_patch, merge_patch, strategic_merge_patch
from gpucommons.testing.fake_k8s.resources import (
    KUEUE_GV,
    VISIBILITY_GV,
    ResourceType,
    by_plural,
    group_versions,
    resource_list,
)
from gpucommons.testing.fake_k8s.selectors import (
    SelectorError,
    matches_labels,
    parse_field_selector,
    parse_label_selector,
)
from gpucommons.testing.fake_k8s.statuses import ApiError
from gpucommons.testing.fake_k8s.store import Store

#: `/version` of the Kubernetes the recorded shapes model (tests/data/kueue/shapes/README.md §0).
VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2",
    "gitCommit": "fake",
    "gitTreeState": "clean",
    "buildDate": "2026-08-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, builtins.list[str]]
    headers: dict[str, str]
    body: Any

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass
class Target:
    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str = ""

    @property
    def plural(self) -> str:
        return self.resource.plural


@dataclass
class Answer:
    code: int
    body: Any
    content_type: str = "application/json"


@dataclass
class Stream:
    """Chunks to send; a None chunk is an idle tick (the writer checks the connection)."""

    chunks: Iterator[bytes | None]
    content_type: str = "application/json"


@dataclass
class Hang:
    seconds: float


class Admission(Protocol):
    """Defaulting, mutating webhooks and validation for a write (`operation` CREATE or UPDATE)."""

    def __call__(
        self,
        operation: str,
        resource: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        status: bool,
    ) -> dict[str, Any]: ...


class LogSource(Protocol):
    def pod_log(self, namespace: str, name: str, container: str | None) -> tuple[builtins.list[str], bool]:
        """(lines so far, whether the container has ended); raises ApiError."""
        ...


class Deleter(Protocol):
    def delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        propagation: str | None,
        grace: int | None,
        dry_run: bool,
    ) -> dict[str, Any]: ...


class Visibility(Protocol):
    def pending_workloads(
        self,
        cluster_queue: str | None,
        namespace: str | None,
        local_queue: str | None,
        limit: int,
        offset: int,
    ) -> dict[str, Any]: ...


@dataclass
class ApiServer:
    store: Store
    clock: FakeClock
    faults: Faults
    admission: Admission
    deleter: Deleter
    logs: LogSource
    visibility: Visibility
    kueue: bool = True
    user: str = "alice@example.com"
    token: str = "fake-token"
    #: (verb, plural) pairs RBAC denies: ("patch", "clusterqueues"), ("list", "namespaces"), ...
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    #: object path → (recording, values): answer writes to that object with this recorded refusal.
    refusals: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: The same, for real writes only: the dry run passes, the write fails (the cluster changed).
    write_refusals: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: Seconds between BOOKMARK events on a watch that asked for them.
    bookmark_interval: float = 1.0
    #: Longest a watch stays open when the client names no timeoutSeconds (real seconds).
    max_watch_seconds: float = 1800.0
    requests: builtins.list[Request] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _names: random.Random = field(default_factory=lambda: random.Random(42))

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        server = self

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
                    urllib.parse.parse_qs(url.query, keep_blank_values=True),
                    {k.lower(): v for k, v in self.headers.items()},
                    raw,
                )
                try:
                    answer = server.handle(request)
                except ApiError as error:
                    answer = Answer(error.code, error.body)
                except Exception as exc:  # a bug in the fake: answer, so the test fails with the reason
                    answer = Answer(500, statuses.internal_error(f"fake cluster: {exc!r}").body)
                if isinstance(answer, Hang):
                    server._stopping.wait(answer.seconds) or server.faults.released.wait(0)
                    self.close_connection = True
                    return
                if isinstance(answer, Stream):
                    self._stream(answer)
                    return
                data = (
                    answer.body.encode()
                    if isinstance(answer.body, str)
                    else json.dumps(answer.body, separators=(",", ":")).encode()
                )
                self.send_response(answer.code)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, stream: Stream) -> None:
                self.send_response(200)
                self.send_header("Content-Type", stream.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in stream.chunks:
                        if chunk is None:
                            continue
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                except _Abrupt:
                    self.close_connection = True
                    return
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")

            do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="fake-k8s-http",
        ).start()

    def stop(self) -> None:
        self._stopping.set()
        self.faults.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake API server is not started"
        return f"http://127.0.0.1:{self._server.server_port}"

    # --- routing ------------------------------------------------------------------------------------

    def parse(self, path: str) -> Target | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group_version, rest = "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        if group_version == KUEUE_GV and not self.kueue:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        resource = by_plural().get((group_version, rest[0]))
        if resource is None or (namespace is not None and not resource.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (subresource and subresource not in ("status", "log")):
            return None
        if subresource == "log" and resource.plural != "pods":
            return None
        return Target(resource, namespace, name, subresource)

    @staticmethod
    def _verb(request: Request, target: Target) -> str:
        if request.method == "GET":
            if request.param("watch") in ("1", "true"):
                return "watch"
            return "get" if target.name else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(
            request.method, "delete" if target.name else "deletecollection"
        )

    def handle(self, request: Request) -> Answer | Stream | Hang:
        self.requests.append(request)
        if request.headers.get("authorization") != f"Bearer {self.token}":
            raise statuses.recorded("status_unauthorized")
        discovery = self._discovery(request.path)
        if discovery is not None:
            return discovery
        if request.path.startswith(f"/apis/{VISIBILITY_GV}/"):
            return self._visibility(request)
        target = self.parse(request.path)
        if target is None:
            raise statuses.recorded("status_group_not_found")
        verb = self._verb(request, target)
        resource_name = target.plural + (f"/{target.subresource}" if target.subresource else "")
        if (verb, target.plural) in self.forbidden or (verb, resource_name) in self.forbidden:
            raise self._forbidden(target, verb)
        injected = self.faults.take(verb, resource_name)
        if injected is not None:
            if injected.action == "hang":
                return Hang(injected.seconds)
            if injected.action == "expired" and verb == "watch":
                return self._expired_stream(target)
            if injected.action == "expired":
                raise statuses.expired(
                    int(request.param("resourceVersion") or 0) or 1, self.store.resource_version
                )
            raise _injected_error(injected.code, verb, target)
        dry_run = request.param("dryRun") == "All"
        if request.method in ("PATCH", "PUT", "POST"):
            refusal = self.refusals.get(request.path) or (
                None if dry_run else self.write_refusals.get(request.path)
            )
            if refusal is not None:
                raise statuses.recorded(refusal[0], **refusal[1])
        if verb == "watch":
            return self._watch(request, target)
        if verb == "list":
            return self._list(request, target)
        if verb == "get":
            if target.subresource == "log":
                return self._log(request, target)
            return Answer(200, self._get(target))
        if verb == "create":
            return self._create(request, target, dry_run)
        if verb == "update":
            return self._update(request, target, dry_run)
        if verb == "patch":
            return self._patch(request, target, dry_run)
        if verb == "delete":
            return self._delete(request, target, dry_run)
        raise statuses.status(
            405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
        )

    def _forbidden(self, target: Target, verb: str) -> ApiError:
        scope = f'in the namespace "{target.namespace}"' if target.namespace else "at the cluster scope"
        subject = f'{target.resource.qualified} "{target.name}"' if target.name else target.resource.qualified
        return statuses.recorded(
            "status_forbidden",
            subject=subject,
            user=self.user,
            verb=verb,
            plural=target.plural,
            group=target.resource.group,
            scope=scope,
            name=target.name or "",
        )

    def _discovery(self, path: str) -> Answer | None:
        path = path.rstrip("/") or "/"
        if path == "/version":
            return Answer(200, VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return Answer(200, "ok", "text/plain")
        served = [
            gv for gv in group_versions() if self.kueue or not gv.startswith(("kueue.", "visibility.kueue"))
        ]
        if path == "/api":
            return Answer(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if path == "/apis":
            groups = [
                {
                    "name": gv.split("/")[0],
                    "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                    "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                }
                for gv in served
                if "/" in gv
            ]
            return Answer(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        if path == "/api/v1":
            return Answer(200, resource_list("v1"))
        if path.startswith("/apis/") and path.count("/") == 3:
            gv = path[len("/apis/") :]
            if gv not in served:
                raise statuses.recorded("status_group_not_found")
            return Answer(200, resource_list(gv))
        return None

    # --- reads --------------------------------------------------------------------------------------

    def _get(self, target: Target) -> dict[str, Any]:
        assert target.name is not None
        stored = self.store.get(target.plural, target.namespace or "", target.name)
        if stored is None:
            raise statuses.not_found(target.resource, target.name)
        return stored

    def _matcher(self, request: Request, target: Target) -> Callable[[dict[str, Any]], bool]:
        try:
            labels = parse_label_selector(request.param("labelSelector"))
            fields = parse_field_selector(request.param("fieldSelector"), target.resource.kind)
        except SelectorError as exc:
            raise statuses.bad_request(str(exc)) from None
        namespace = target.namespace

        def matches(obj: dict[str, Any]) -> bool:
            if namespace is not None and obj["metadata"].get("namespace") != namespace:
                return False
            return matches_labels(labels, obj) and fields(obj)

        return matches

    def _list(self, request: Request, target: Target) -> Answer:
        matches = self._matcher(request, target)
        version = request.param("resourceVersion")
        exact = request.param("resourceVersionMatch") == "Exact" and version
        if (
            exact
            and version
            and (self.store.too_old(int(version)) or int(version) != self.store.resource_version)
        ):
            raise statuses.expired(int(version), self.store.resource_version)
        with self.store.lock:
            current = self.store.resource_version
            items = sorted(
                (o for o in self.store.list(target.plural, target.namespace) if matches(o)),
                key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
            )
        meta: dict[str, Any] = {"resourceVersion": str(current)}
        token = request.param("continue")
        if token:
            try:
                start = json.loads(base64.urlsafe_b64decode(token.encode()))
            except ValueError:
                raise statuses.bad_request("continue key is not valid") from None
            if self.store.too_old(int(start["rv"])):
                raise statuses.status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can "
                    "start a new list without the continue parameter, or use the continue token in this "
                    "response to retrieve the remainder of the results. Continuing with the provided token "
                    "results in an inconsistent list - objects that were created, modified, or deleted "
                    "between the time the first chunk was returned and now may show up in the list.",
                )
            after = tuple(start["after"])
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after]
        limit = int(request.param("limit") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": current, "after": [last.get("namespace", ""), last["name"]]}).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if target.resource.group_version != KUEUE_GV:
            # typed lists of built-in kinds leave kind and apiVersion out of their items
            items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        return Answer(
            200,
            {
                "kind": f"{target.resource.kind}List",
                "apiVersion": target.resource.group_version,
                "metadata": meta,
                "items": items,
            },
        )

    def _expired_stream(self, target: Target) -> Stream:
        error = statuses.expired(max(self.store.compacted_rv - 1, 1), self.store.resource_version)

        def chunks() -> Iterator[bytes | None]:
            yield _line({"type": "ERROR", "object": error.body})

        return Stream(chunks())

    def _watch(self, request: Request, target: Target) -> Stream:
        matches = self._matcher(request, target)
        filtered = bool(request.param("labelSelector") or request.param("fieldSelector"))
        version = request.param("resourceVersion") or ""
        bookmarks = request.param("allowWatchBookmarks") in ("true", "1")
        timeout = float(request.param("timeoutSeconds") or self.max_watch_seconds)
        generation = self.faults.drop_generation
        store = self.store
        if version not in ("", "0"):
            start = int(version)
            if store.too_old(start):
                error = statuses.expired(start, store.resource_version)
                return Stream(iter([_line({"type": "ERROR", "object": error.body})]))
            initial: builtins.list[dict[str, Any]] = []
            visible = {_key(o) for o in store.list(target.plural, target.namespace) if matches(o)}
        else:
            with store.lock:
                start = store.resource_version
                initial = sorted(
                    (o for o in store.list(target.plural, target.namespace) if matches(o)),
                    key=lambda o: int(o["metadata"]["resourceVersion"]),
                )
            visible = {_key(o) for o in initial}
        resource = target.resource

        def chunks() -> Iterator[bytes | None]:
            for obj in initial:
                yield _line({"type": "ADDED", "object": obj})
            rv = start
            deadline = time.monotonic() + timeout
            last_bookmark = time.monotonic()
            while True:
                if self._stopping.is_set() or time.monotonic() >= deadline:
                    return
                if self.faults.drop_generation != generation:
                    if self.faults.abrupt_drop:
                        raise _Abrupt
                    return
                for event in store.events_after(rv):
                    rv = event.rv
                    if event.resource.plural != resource.plural:
                        continue
                    obj, kind = event.obj, event.type
                    if target.namespace is not None and obj["metadata"].get("namespace") != target.namespace:
                        continue
                    if filtered:
                        key, now_matches = _key(obj), kind != "DELETED" and matches(obj)
                        if now_matches:
                            kind = "MODIFIED" if key in visible else "ADDED"
                            visible.add(key)
                        elif key in visible:
                            kind = "DELETED"
                            visible.discard(key)
                        else:
                            continue
                    yield _line({"type": kind, "object": obj})
                if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                    last_bookmark = time.monotonic()
                    rv = max(rv, store.resource_version) if not store.events_after(rv) else rv
                    yield _line(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": resource.kind,
                                "apiVersion": resource.group_version,
                                "metadata": {"resourceVersion": str(rv)},
                            },
                        }
                    )
                yield None
                store.wait_after(rv, 0.1)

        return Stream(chunks())

    def _log(self, request: Request, target: Target) -> Answer | Stream:
        assert target.name is not None
        namespace = target.namespace or ""
        container = request.param("container")
        lines, ended = self.logs.pod_log(namespace, target.name, container)
        tail = request.param("tailLines")
        if tail is not None:
            lines = lines[-int(tail) :] if int(tail) > 0 else []
        stamps = request.param("timestamps") in ("true", "1")

        def text(line: str) -> str:
            return line if stamps else line.split(" ", 1)[1]

        if request.param("follow") not in ("true", "1") or ended:
            return Answer(200, "".join(text(line) + "\n" for line in lines), "text/plain")
        sent = len(self.logs.pod_log(namespace, target.name, container)[0])

        def chunks() -> Iterator[bytes | None]:
            nonlocal sent
            for line in lines:
                yield (text(line) + "\n").encode()
            while not self._stopping.is_set():
                try:
                    now, done = self.logs.pod_log(namespace, target.name or "", container)
                except ApiError:
                    return
                for line in now[sent:]:
                    yield (text(line) + "\n").encode()
                sent = len(now)
                if done:
                    return
                yield None
                time.sleep(0.05)

        return Stream(chunks(), "text/plain")

    def _visibility(self, request: Request) -> Answer:
        parts = [p for p in request.path.split("/") if p][3:]
        limit = int(request.param("limit") or 1000)
        offset = int(request.param("offset") or 0)
        if not self.kueue:
            raise statuses.recorded("status_group_not_found")
        if len(parts) == 3 and parts[0] == "clusterqueues" and parts[2] == "pendingworkloads":
            return Answer(200, self.visibility.pending_workloads(parts[1], None, None, limit, offset))
        if (
            len(parts) == 5
            and parts[0] == "namespaces"
            and parts[2] == "localqueues"
            and parts[4] == "pendingworkloads"
        ):
            return Answer(200, self.visibility.pending_workloads(None, parts[1], parts[3], limit, offset))
        raise statuses.recorded("status_group_not_found")

    # --- writes -------------------------------------------------------------------------------------

    def _body(self, request: Request) -> Any:
        raw: bytes = request.body
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            pass
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise statuses.bad_request(f"the body of the request cannot be decoded: {exc}") from None

    def _manager(self, request: Request) -> str:
        manager = request.param("fieldManager")
        if manager:
            return manager
        agent = request.headers.get("user-agent", "unknown")
        return agent.split("/", 1)[0] or "unknown"

    def _check_namespace(self, target: Target) -> None:
        if (
            target.resource.namespaced
            and target.namespace
            and self.store.get("namespaces", "", target.namespace) is None
        ):
            raise statuses.namespace_not_found(target.namespace)

    def _check_object(self, body: Any, target: Target, name: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise statuses.bad_request("the body of the request is not a Kubernetes object")
        meta = body.setdefault("metadata", {})
        if body.get("kind") not in (None, target.resource.kind) or body.get("apiVersion") not in (
            None,
            target.resource.group_version,
        ):
            raise statuses.bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the expected API "
                f"version ({target.resource.group_version})"
                if body.get("apiVersion") != target.resource.group_version
                else f"the kind in the data ({body.get('kind')}) does not match the expected kind "
                f"({target.resource.kind})"
            )
        if target.resource.namespaced:
            if meta.get("namespace") not in (None, target.namespace):
                raise statuses.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = target.namespace
        if name is not None and meta.get("name") not in (None, name):
            raise statuses.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if name is not None:
            meta["name"] = name
        return body

    def _create(self, request: Request, target: Target, dry_run: bool) -> Answer:
        if target.name is not None:
            raise statuses.status(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        obj = self._check_object(self._body(request), target, None)
        meta = obj["metadata"]
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise statuses.invalid(
                    target.resource, "", "metadata.name", "Required value: name or generateName is required"
                )
            meta["name"] = meta["generateName"] + "".join(self._names.choice(_NAME_CHARS) for _ in range(5))
        self._check_namespace(target)
        with self.store.lock:
            if self.store.get(target.plural, target.namespace or "", meta["name"]) is not None:
                raise statuses.already_exists(target.resource, meta["name"])
            obj = self.admission("CREATE", target.resource, obj, None, False)
            stored = self.store.create(target.resource, obj, self._manager(request), dry_run=dry_run)
        return Answer(201, stored)

    def _update(self, request: Request, target: Target, dry_run: bool) -> Answer:
        assert target.name is not None
        obj = self._check_object(self._body(request), target, target.name)
        with self.store.lock:
            live = self._get(target)
            wanted_rv = obj["metadata"].get("resourceVersion")
            if wanted_rv and wanted_rv != live["metadata"]["resourceVersion"]:
                raise statuses.modified_conflict(target.resource, target.name)
            new = self._scoped(target, live, obj)
            return Answer(200, self._write(request, target, live, new, dry_run))

    def _patch(self, request: Request, target: Target, dry_run: bool) -> Answer:
        assert target.name is not None
        kind = (request.headers.get("content-type") or "").split(";")[0].strip()
        body = self._body(request)
        builtin = target.resource.group_version != KUEUE_GV
        accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        if builtin:
            accepted += ", application/strategic-merge-patch+json"
        if kind == "application/apply-patch+yaml":
            return self._apply(request, target, body, dry_run)
        with self.store.lock:
            live = self._get(target)
            try:
                if kind == "application/merge-patch+json":
                    patched = merge_patch(live, body)
                elif kind == "application/strategic-merge-patch+json" and builtin:
                    patched = strategic_merge_patch(live, body)
                elif kind == "application/json-patch+json":
                    patched = json_patch(live, body)
                else:
                    raise statuses.unsupported_media_type(kind, accepted)
            except PatchError as exc:
                raise statuses.status(
                    400 if kind == "application/json-patch+json" else 422, "BadRequest", str(exc)
                ) from None
            if not isinstance(patched, dict):
                raise statuses.bad_request("the patch does not make an object")
            wanted_rv = (
                (body or {}).get("metadata", {}).get("resourceVersion") if isinstance(body, dict) else None
            )
            if wanted_rv and wanted_rv != live["metadata"]["resourceVersion"]:
                raise statuses.modified_conflict(target.resource, target.name)
            patched["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
            new = self._scoped(target, live, patched)
            return Answer(200, self._write(request, target, live, new, dry_run))

    def _scoped(self, target: Target, live: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """A main-resource write keeps the live status; a /status write keeps all but the status."""
        new = copy.deepcopy(new)
        new["apiVersion"], new["kind"] = target.resource.group_version, target.resource.kind
        if target.subresource == "status":
            scoped = copy.deepcopy(live)
            if "status" in new:
                scoped["status"] = new["status"]
            else:
                scoped.pop("status", None)
            return scoped
        if target.resource.status:
            if "status" in live:
                new["status"] = copy.deepcopy(live["status"])
            else:
                new.pop("status", None)
        for name in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if name in live["metadata"]:
                new["metadata"][name] = live["metadata"][name]
            else:
                new["metadata"].pop(name, None)
        return new

    def _write(
        self,
        request: Request,
        target: Target,
        live: dict[str, Any],
        new: dict[str, Any],
        dry_run: bool,
        ownership: Any = None,
        operation: str = "Update",
    ) -> dict[str, Any]:
        if target.subresource != "status":
            new = self.admission("UPDATE", target.resource, new, live, False)
        else:
            new = self.admission("UPDATE", target.resource, new, live, True)
        stored = self.store.replace(
            target.resource,
            new,
            self._manager(request),
            operation=operation,
            ownership=ownership,
            dry_run=dry_run,
        )
        meta = stored["metadata"]
        if not dry_run and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.store.remove(target.resource, meta.get("namespace", ""), meta["name"])
        return stored

    def _apply(self, request: Request, target: Target, body: Any, dry_run: bool) -> Answer:
        assert target.name is not None
        manager = request.param("fieldManager")
        if not manager:
            raise statuses.status(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch",
            )
        if not isinstance(body, dict) or body.get("kind") != target.resource.kind:
            raise statuses.bad_request(
                f"the kind in the data ({(body or {}).get('kind')}) does not match the expected kind "
                f"({target.resource.kind})"
            )
        applied = self._check_object(copy.deepcopy(body), target, target.name)
        force = request.param("force") == "true"
        self._check_namespace(target)
        with self.store.lock:
            live = self.store.get(target.plural, target.namespace or "", target.name)
            if live is None:
                if target.subresource == "status":
                    raise statuses.not_found(target.resource, target.name)
                if target.resource.status:
                    applied.pop("status", None)
                owners = ssa.ownership_for_create(target.resource, applied, manager, "")
                owners.managers[(manager, "")] = ("Apply", timestamp(self.clock.now()))
                applied = self.admission("CREATE", target.resource, applied, None, False)
                stored = self.store.create(
                    target.resource, applied, manager, operation="Apply", dry_run=dry_run, ownership=owners
                )
                return Answer(201, stored)
            merged, ownership = ssa.apply(
                self.store, target.resource, live, applied, manager, force, target.subresource
            )
            merged = self._scoped(target, live, merged) if target.subresource != "status" else merged
            return Answer(200, self._write(request, target, live, merged, dry_run, ownership, "Apply"))

    def _delete(self, request: Request, target: Target, dry_run: bool) -> Answer:
        assert target.name is not None
        options = self._body(request) or {}
        propagation = request.param("propagationPolicy") or options.get("propagationPolicy")
        grace_text = request.param("gracePeriodSeconds")
        grace = int(grace_text) if grace_text is not None else options.get("gracePeriodSeconds")
        dry_run = dry_run or options.get("dryRun") == ["All"]
        with self.store.lock:
            live = self._get(target)
            preconditions = options.get("preconditions") or {}
            if preconditions.get("uid") not in (None, live["metadata"]["uid"]):
                raise statuses.precondition_failed(
                    target.resource,
                    target.name,
                    f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in object meta: "
                    f"{live['metadata']['uid']}",
                )
            if preconditions.get("resourceVersion") not in (None, live["metadata"]["resourceVersion"]):
                raise statuses.modified_conflict(target.resource, target.name)
            result = self.deleter.delete(
                target.resource, target.namespace or "", target.name, propagation, grace, dry_run
            )
        return Answer(200, result)


class _Abrupt(Exception):
    """End a stream without its last chunk: the client sees a broken connection."""


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _injected_error(code: int, verb: str, target: Target) -> ApiError:
    what = f"{verb} {target.resource.qualified}"
    if code == 503:
        return statuses.service_unavailable("the server is currently unable to handle the request")
    if code == 504:
        return statuses.timeout_error(f"request did not complete within the allotted timeout ({what})")
    if code == 429:
        return statuses.too_many_requests()
    if code == 502:
        return statuses.status(502, "InternalError", "Bad Gateway")
    return statuses.internal_error(f"etcdserver: request timed out ({what})")
