"""`commons k8s apply`: the rendered policy written to a cluster with server-side apply.

Steps, each a function below:
1. `check_kueue`: one discovery call; without Kueue's v1beta2 API nothing is written.
2. A server-side dry run of every object (`dryRun=All`), in dependency order (`kinds.apply_order`):
   the API server and Kueue's webhooks check everything before the first write, so a policy that the
   cluster refuses leaves the cluster as it was. With `--dry-run` we stop here.
3. The same applies for real (field manager `gpucommons`; `force` only when asked).
4. With `prune`, objects labelled `app.kubernetes.io/managed-by: gpucommons` that the policy no
   longer renders are deleted (also dry-run first), children before what they refer to.

Each object is reported `created`, `configured` or `unchanged` by comparing the live object with what
the server answered to the apply, ignoring what the server maintains itself (resourceVersion,
generation, managedFields, status): the same answer for a dry run and a real apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpucommons.backends.kubernetes.connection import ApiStatus, KubeApi, KubeError
from gpucommons.backends.kubernetes.kinds import (
    KINDS,
    KUEUE_GROUP_VERSION,
    KUEUE_PLURALS,
    Kind,
    Manifest,
    UnknownKind,
    apply_order,
    kind_of,
    object_key,
)
from gpucommons.backends.kubernetes.names import MANAGED_BY

FIELD_MANAGER = "gpucommons"
APPLY_PATCH = "application/apply-patch+yaml"
#: The Kueue release the rendered objects are tested against (docs/kubernetes.md).
KUEUE_RELEASE = "v0.19.2"
MANAGED_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
#: Kinds that `prune` may delete: the ones `render` writes. Never Jobs or Workloads (tasks).
PRUNABLE = (
    "LocalQueue",
    "NetworkPolicy",
    "RoleBinding",
    "ClusterRoleBinding",
    "ClusterQueue",
    "AdmissionCheck",
    "Cohort",
    "WorkloadPriorityClass",
    "ResourceFlavor",
    "ClusterRole",
    "Namespace",
)
#: Fields the API server writes on every object; they never make an object "configured".
_SERVER_METADATA = ("resourceVersion", "generation", "managedFields", "creationTimestamp", "uid", "selfLink")


class Action(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    PRUNED = "pruned"


class KueueMissing(KubeError):
    pass


class Forbidden(KubeError):
    pass


class FieldConflict(KubeError):
    pass


class Refused(KubeError):
    pass


class PartiallyApplied(KubeError):
    """A write failed after the dry run passed (the cluster changed in between, or a webhook
    disagrees with its own dry run): some objects are applied. Applying again is safe."""


@dataclass(frozen=True, slots=True)
class ApplyOptions:
    dry_run: bool = False
    prune: bool = False
    #: Take over fields another field manager owns (server-side apply `force=true`).
    force: bool = False
    field_manager: str = FIELD_MANAGER


@dataclass(frozen=True, slots=True)
class ObjectResult:
    kind: str
    namespace: str
    name: str
    action: Action
    #: Why the result is what it is when that is not obvious (e.g. not checked by the server).
    note: str = ""


@dataclass(frozen=True, slots=True)
class ApplyReport:
    results: tuple[ObjectResult, ...]
    dry_run: bool

    def count(self, action: Action) -> int:
        return sum(1 for r in self.results if r.action is action)


@dataclass(frozen=True, slots=True)
class _Planned:
    obj: Manifest
    kind: Kind
    live: Manifest | None
    result: ObjectResult


# --- 1. is Kueue there? -------------------------------------------------------------------------------


def check_kueue(api: KubeApi) -> None:
    """Refuse to write anything unless the cluster serves every Kueue resource the policy needs."""
    install = (
        f"install Kueue {KUEUE_RELEASE} or later first (it serves {KUEUE_GROUP_VERSION}): "
        "https://kueue.sigs.k8s.io/docs/installation/"
    )
    try:
        listing = api.request("GET", f"/apis/{KUEUE_GROUP_VERSION}").body
    except ApiStatus as status:
        if status.code == 404:
            raise KueueMissing(
                f"the cluster at {api.server} does not serve {KUEUE_GROUP_VERSION}: {install}"
            ) from None
        raise explain(status, api) from None
    served = {r.get("name") for r in listing.get("resources", [])}
    missing = [p for p in KUEUE_PLURALS if p not in served]
    if missing:
        raise KueueMissing(
            f"the cluster at {api.server} serves {KUEUE_GROUP_VERSION} "
            f"without {', '.join(missing)}: {install}"
        )


# --- errors the person can act on --------------------------------------------------------------------


def explain(status: ApiStatus, api: KubeApi, obj: Manifest | None = None) -> KubeError:
    """A refusal from the API server, as a message that says what to do about it."""
    what = _describe(obj) if obj is not None else status.path
    if status.code == 401:
        return Refused(
            f"the API server at {api.server} refused the credentials of {api.description} "
            "(401 Unauthorized): log in again; the token may have expired"
        )
    if status.code == 403:
        return Forbidden(
            f"forbidden by the cluster's RBAC: {status.message}. Applying the policy needs a platform "
            "admin's rights (get, patch, list and delete on namespaces, RBAC, network policies and Kueue "
            "objects); ask a cluster admin or use another --context"
        )
    if status.code == 409 and status.reason == "Conflict":
        causes = status.details.get("causes") or []
        fields = "\n".join(f"  - {c.get('field', '?')}: {c.get('message', '')}" for c in causes)
        return FieldConflict(
            f"{what}: another field manager owns fields this apply would change:\n"
            f"{fields or '  ' + status.message}\n"
            "Re-run with --force to take them over (the other manager loses them), "
            "or stop the other tool from managing them"
        )
    if status.code == 404 and obj is not None and kind_of(obj).api_version == KUEUE_GROUP_VERSION:
        return KueueMissing(f"{what}: {status.message}; install Kueue {KUEUE_RELEASE} or later first")
    if status.code in (400, 422):
        return Refused(f"{what}: the cluster refused it: {status.message}")
    return Refused(f"{what}: {status.code} {status.reason or 'error'}: {status.message}")


def _describe(obj: Manifest) -> str:
    kind, namespace, name = object_key(obj)
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


# --- 2./3. server-side apply ---------------------------------------------------------------------------


def _comparable(obj: Manifest) -> Manifest:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in _SERVER_METADATA}
    return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "metadata": meta}


def _item(path: str, index: int, before: Any, after: Any) -> str:
    """`flavors[h100]` for list items that carry the same name, else `flavors[0]`."""
    name = before.get("name") if isinstance(before, dict) else None
    same = name is not None and isinstance(after, dict) and after.get("name") == name
    return f"{path}[{name if same else index}]"


def changes(before: Any, after: Any, path: str = "") -> list[str]:
    """`spec...flavors[h100].resources[nvidia.com/gpu].nominalQuota: 16 → 20` for each leaf that
    differs (lists of equal length item by item)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in [*before, *(k for k in after if k not in before)]:
            if before.get(key) != after.get(key):
                out += changes(before.get(key), after.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            c
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for c in changes(b, a, _item(path, i, b, a))
        ]
    if before is None:
        return [f"{path}: added"]
    if after is None:
        return [f"{path}: removed"]
    if isinstance(before, dict | list) or isinstance(after, dict | list):
        return [f"{path}: changed"]
    return [f"{path}: {before} → {after}"]


def change_note(live: Manifest | None, applied: Manifest, limit: int = 3) -> str:
    """What a `configured` object changes, short enough for a table cell."""
    if live is None:
        return ""
    found = changes(_comparable(live), _comparable(applied))
    more = f" (+{len(found) - limit} more)" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more


def classify(live: Manifest | None, applied: Manifest) -> Action:
    """Created when nothing was there; unchanged when only server-maintained fields differ."""
    if live is None:
        return Action.CREATED
    return Action.UNCHANGED if _comparable(live) == _comparable(applied) else Action.CONFIGURED


def get_live(api: KubeApi, obj: Manifest) -> Manifest | None:
    kind, namespace, name = kind_of(obj), obj["metadata"].get("namespace"), obj["metadata"]["name"]
    try:
        return api.request("GET", kind.object_path(name, namespace)).body
    except ApiStatus as status:
        if status.code == 404 and status.reason == "NotFound":
            return None
        raise explain(status, api, obj) from None


def server_side_apply(api: KubeApi, obj: Manifest, options: ApplyOptions, dry_run: bool) -> Manifest:
    """PATCH with `application/apply-patch+yaml` (a JSON body is valid YAML): the server merges our
    fields, records `fieldManager` as their owner, and with `dryRun=All` persists nothing."""
    kind, namespace, name = kind_of(obj), obj["metadata"].get("namespace"), obj["metadata"]["name"]
    query = [("fieldManager", options.field_manager)]
    if options.force:
        query.append(("force", "true"))
    if dry_run:
        query.append(("dryRun", "All"))
    try:
        return api.request("PATCH", kind.object_path(name, namespace), query, obj, APPLY_PATCH).body
    except ApiStatus as status:
        raise explain(status, api, obj) from None


def _result(obj: Manifest, action: Action, note: str = "") -> ObjectResult:
    kind, namespace, name = object_key(obj)
    return ObjectResult(kind, namespace, name, action, note)


def dry_run_all(api: KubeApi, objects: Sequence[Manifest], options: ApplyOptions) -> list[_Planned]:
    """Step 2. Objects inside a namespace that does not exist yet cannot be dry-run (the server
    answers 404 for the namespace): they are `created`, and the server checks them at the real apply."""
    planned: list[_Planned] = []
    new_namespaces: set[str] = set()
    for obj in apply_order(objects):
        kind = kind_of(obj)
        namespace = obj["metadata"].get("namespace")
        if namespace in new_namespaces:
            note = "new namespace: checked by the server at apply"
            planned.append(_Planned(obj, kind, None, _result(obj, Action.CREATED, note)))
            continue
        live = get_live(api, obj)
        answer = server_side_apply(api, obj, options, dry_run=True)
        action = classify(live, answer)
        if kind.kind == "Namespace" and action is Action.CREATED:
            new_namespaces.add(obj["metadata"]["name"])
        planned.append(_Planned(obj, kind, live, _result(obj, action, change_note(live, answer))))
    return planned


def apply_all(api: KubeApi, planned: Sequence[_Planned], options: ApplyOptions) -> list[ObjectResult]:
    """Step 3, in the same order as the dry run. What the dry run found unchanged is not sent again:
    the server would not write it either (a no-op apply), and it saves a third of the requests."""
    results: list[ObjectResult] = []
    for plan in planned:
        if plan.result.action is Action.UNCHANGED:
            results.append(plan.result)
            continue
        try:
            answer = server_side_apply(api, plan.obj, options, dry_run=False)
        except KubeError as error:
            raise PartiallyApplied(
                f"{error}\n{len(results)} of {len(planned)} objects were applied before this error; "
                "fix it and apply again (applying is idempotent)"
            ) from None
        results.append(_result(plan.obj, classify(plan.live, answer), change_note(plan.live, answer)))
    return results


# --- 4. prune ------------------------------------------------------------------------------------------


def prune_candidates(api: KubeApi, objects: Sequence[Manifest]) -> list[tuple[Kind, Manifest]]:
    """Our objects (by label) that the policy no longer renders, dependants first. Objects inside a
    namespace that is itself pruned go with it and are not listed separately."""
    desired = {object_key(o) for o in objects}
    found: list[tuple[Kind, Manifest]] = []
    for kind_name in PRUNABLE:
        kind = KINDS[kind_name]
        try:
            listing = api.request("GET", kind.collection_path(), [("labelSelector", MANAGED_SELECTOR)]).body
        except ApiStatus as status:
            raise explain(status, api) from None
        for item in listing.get("items", []):
            item = {"apiVersion": kind.api_version, "kind": kind.kind, **item}
            if object_key(item) not in desired:
                found.append((kind, item))
    doomed_namespaces = {o["metadata"]["name"] for k, o in found if k.kind == "Namespace"}
    return [(k, o) for k, o in found if o["metadata"].get("namespace") not in doomed_namespaces]


def delete(api: KubeApi, kind: Kind, obj: Manifest, dry_run: bool) -> None:
    query = [("propagationPolicy", "Background")]
    if dry_run:
        query.append(("dryRun", "All"))
    path = kind.object_path(obj["metadata"]["name"], obj["metadata"].get("namespace"))
    try:
        api.request("DELETE", path, query)
    except ApiStatus as status:
        if status.code == 404:  # already gone: what prune wanted
            return
        raise explain(status, api, obj) from None


# --- the whole command ---------------------------------------------------------------------------------


def apply_manifests(api: KubeApi, objects: Sequence[Manifest], options: ApplyOptions) -> ApplyReport:
    """Dry run everything, then (unless `options.dry_run`) apply and prune for real."""
    try:
        for obj in objects:
            kind_of(obj)
    except UnknownKind as exc:
        raise Refused(str(exc)) from None
    check_kueue(api)
    planned = dry_run_all(api, objects, options)
    doomed = prune_candidates(api, objects) if options.prune else []
    for kind, obj in doomed:
        delete(api, kind, obj, dry_run=True)
    pruned = [_result(obj, Action.PRUNED) for _, obj in doomed]
    if options.dry_run:
        return ApplyReport((*(p.result for p in planned), *pruned), dry_run=True)
    results = apply_all(api, planned, options)
    for kind, obj in doomed:
        delete(api, kind, obj, dry_run=False)
    return ApplyReport((*results, *pruned), dry_run=False)


def summary(report: ApplyReport) -> dict[str, Any]:
    """Counts per action, for the CLI's last line and for JSON output."""
    return {a.value: report.count(a) for a in Action}
