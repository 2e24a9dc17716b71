"""Server-side apply of one applied configuration onto a live object (rules in `fields`)."""

from __future__ import annotations

import copy
from typing import Any

from gpucommons.testing.fake_k8s import statuses
from gpucommons.testing.fake_k8s.fields import (
    Path,
    apply_merge,
    leaves,
    owned_content,
    path_text,
    remove_path,
)
from gpucommons.testing.fake_k8s.resources import ResourceType
from gpucommons.testing.fake_k8s.store import _MISSING, Store, _Ownership


def _scope(resource: ResourceType, subresource: str) -> str:
    if subresource == "status":
        return "status"
    return "main" if resource.status else "all"


def conflict_error(conflicts: list[tuple[Path, str]], api_version: str) -> statuses.ApiError:
    """errors.NewApplyConflict as `k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go`
    words it: one conflict on one line, several grouped by manager."""
    if len(conflicts) == 1:
        path, manager = conflicts[0]
        return statuses.recorded(
            "status_apply_conflict", manager=manager, apiVersion=api_version, field=path_text(path)
        )
    by_manager: dict[str, list[str]] = {}
    for path, manager in conflicts:
        by_manager.setdefault(manager, []).append(path_text(path))
    message = f"Apply failed with {len(conflicts)} conflicts: "
    message += "\n".join(
        f'conflicts with "{manager}" using {api_version}:\n' + "\n".join(f"- {f}" for f in fields)
        for manager, fields in by_manager.items()
    )
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{m}" using {api_version}',
            "field": path_text(p),
        }
        for p, m in conflicts
    ]
    error = statuses.status(409, "Conflict", message, {"causes": causes})
    return error


def apply(
    store: Store,
    resource: ResourceType,
    live: dict[str, Any],
    applied: dict[str, Any],
    manager: str,
    force: bool,
    subresource: str,
) -> tuple[dict[str, Any], _Ownership]:
    """The object after the apply and its new field owners; raises the 409 of a conflict."""
    scope = _scope(resource, subresource)
    me = (manager, subresource)
    meta = live["metadata"]
    key = (resource.plural, meta.get("namespace", ""), meta["name"])
    ownership = store.ownership(key)
    wanted = leaves(owned_content(applied, scope))
    current = leaves(owned_content(live, scope))
    conflicts: list[tuple[Path, str]] = []
    for path, value in wanted.items():
        others = ownership.paths.get(path, set()) - {me}
        if others and current.get(path, _MISSING) != value:
            conflicts.append((path, sorted(others)[0][0]))
    if conflicts and not force:
        raise conflict_error(conflicts, resource.group_version)

    result = copy.deepcopy(live)
    dropped = [
        p for p, owners in ownership.paths.items() if me in owners and p not in wanted and _in(scope, p)
    ]
    for path in sorted(dropped, key=len, reverse=True):
        owners = ownership.paths[path]
        owners.discard(me)
        if not owners:
            del ownership.paths[path]
            remove_path(result, path)
    part = owned_content(applied, scope)
    merged_meta = apply_merge(result.get("metadata", {}), part.pop("metadata", {}), "metadata")
    result = apply_merge(result, part)
    result["metadata"] = merged_meta
    for path, value in wanted.items():
        if current.get(path, _MISSING) == value and path in ownership.paths:
            ownership.paths[path].add(me)
        else:
            ownership.paths[path] = {me}
    present = leaves(owned_content(result, "all"))
    ownership.paths = {p: o for p, o in ownership.paths.items() if p in present}
    ownership.managers[me] = ("Apply", store_time(store))
    return result, ownership


def _in(scope: str, path: Path) -> bool:
    is_status = path[:1] == (("f", "status"),)
    return is_status if scope == "status" else (not is_status if scope == "main" else True)


def store_time(store: Store) -> str:
    from gpucommons.testing.fake_k8s.clock import timestamp

    return timestamp(store.clock.now())


def ownership_for_create(
    resource: ResourceType, obj: dict[str, Any], manager: str, subresource: str
) -> _Ownership:
    ownership = _Ownership()
    me = (manager, subresource)
    for path in leaves(owned_content(obj, _scope(resource, subresource))):
        ownership.paths[path] = {me}
    return ownership
