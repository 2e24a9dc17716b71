"""Field paths, patches and server-side apply, to the depth the recorded objects need.

Server-side apply (https://kubernetes.io/docs/reference/using-api/server-side-apply/): every field
is owned by a set of field managers. An apply that sets a field another manager owns to a different
value is a conflict (409) unless `force=true`, which moves the field to the applier; applying the same
value shares ownership; a field the applier owned before and no longer sends is removed when nobody
else owns it. Other writes (create, update, patch) give their manager the fields they changed.

Lists are associative where Kubernetes and Kueue declare them so (`+listType=map` with the keys
below: conditions by `type`, admission checks and pod sets by `name`, ...), sets where declared
`+listType=set` (finalizers), atomic otherwise. Field paths print as the API server prints them in
conflicts: `.spec.queueingStrategy`, `.status.conditions[type="Admitted"].status`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

Segment = tuple[str, str]  # ("f", field) | ("k", '{"type":"Admitted"}') | ("v", '"finalizer"')
Path = tuple[Segment, ...]

#: list field name → the keys of its items (`+listMapKey`), in Kubernetes' and Kueue's API types.
KEYED_LISTS: dict[str, tuple[str, ...]] = {
    "conditions": ("type",),
    "admissionChecks": ("name",),
    "podSets": ("name",),
    "podSetAssignments": ("name",),
    "podSetUpdates": ("name",),
    "resourceRequests": ("name",),
    "containers": ("name",),
    "initContainers": ("name",),
    "containerStatuses": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "ownerReferences": ("uid",),
    "flavors": ("name",),
}
#: `+listType=set` lists of scalars.
SET_LISTS = frozenset({"finalizers"})
#: Fields the server maintains: nobody owns them and an apply never sets them.
SERVER_FIELDS = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    }
)
ITEM = "."


def _item_key(field: str, item: Any) -> str | None:
    keys = KEYED_LISTS.get(field)
    if not keys or not isinstance(item, dict) or keys[0] not in item:
        return None
    return json.dumps({k: item[k] for k in keys if k in item}, separators=(",", ":"))


def _is_keyed(field: str, value: Any) -> bool:
    return (
        isinstance(value, list) and all(_item_key(field, item) is not None for item in value) and bool(value)
    )


def leaves(obj: Any, prefix: Path = (), field: str = "") -> dict[Path, Any]:
    """Every owned leaf of `obj` → its value (maps recursed, keyed lists per item, sets per value)."""
    out: dict[Path, Any] = {}
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            out.update(leaves(value, (*prefix, ("f", key)), key))
    elif field in SET_LISTS and isinstance(obj, list) and obj:
        for value in obj:
            out[(*prefix, ("v", json.dumps(value)))] = value
    elif _is_keyed(field, obj):
        for item in obj:
            key = _item_key(field, item)
            assert key is not None
            item_path = (*prefix, ("k", key))
            out[item_path] = ITEM
            out.update(leaves(item, item_path))
    else:
        out[prefix] = obj
    return out


def owned_content(obj: dict[str, Any], scope: str) -> dict[str, Any]:
    """The part of `obj` a write in `scope` touches: "main" (all but status and the server's
    fields), "status" (status only) or "all" (kinds without a status subresource)."""
    if scope == "status":
        return {"status": copy.deepcopy(obj["status"])} if "status" in obj else {}
    content = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    if scope == "main":
        content.pop("status", None)
    meta = {
        k: copy.deepcopy(v)
        for k, v in (obj.get("metadata") or {}).items()
        if k not in SERVER_FIELDS and k not in ("name", "namespace", "generateName")
    }
    if meta:
        content["metadata"] = meta
    return content


def path_text(path: Path) -> str:
    text = ""
    for kind, value in path:
        if kind == "f":
            text += f".{value}"
        elif kind == "k":
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(value).items()) + "]"
        else:
            text += f"[{value}]"
    return text


def fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The `managedFields[].fieldsV1` tree of a set of owned paths."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for kind, value in path:
            node = node.setdefault(f"{kind}:{value}", {})
        if path and path[-1][0] == "k":
            node.setdefault(ITEM, {})
    return tree


# --- reading and changing an object by path ------------------------------------------------------


def _find_item(items: list[Any], field: str, key: str) -> int | None:
    for index, item in enumerate(items):
        if _item_key(field, item) == key:
            return index
    return None


def remove_path(obj: dict[str, Any], path: Path) -> None:
    """Delete the field, keyed item or set value at `path`; empty maps left behind go too."""
    parents: list[tuple[Any, Segment, str, Any]] = []  # (container, segment, its field, the child)
    node: Any = obj
    field = ""
    for segment in path[:-1]:
        kind, value = segment
        parent, parent_field = node, field
        if kind == "f":
            if not isinstance(node, dict) or value not in node:
                return
            node, field = node[value], value
        elif kind == "k":
            if not isinstance(node, list):
                return
            index = _find_item(node, field, value)
            if index is None:
                return
            node = node[index]
        else:
            return
        parents.append((parent, segment, parent_field, node))
    kind, value = path[-1]
    if kind == "f" and isinstance(node, dict):
        node.pop(value, None)
    elif kind == "k" and isinstance(node, list):
        index = _find_item(node, field, value)
        if index is not None:
            del node[index]
    elif kind == "v" and isinstance(node, list):
        decoded = json.loads(value)
        if decoded in node:
            node.remove(decoded)
    # prune maps and lists this left empty (but keep the top-level sections)
    for parent, (pkind, pvalue), pfield, child in reversed(parents):
        if pkind == "f" and isinstance(parent, dict) and child in ({}, []) and len(parents) > 1:
            del parent[pvalue]
        elif pkind == "k" and isinstance(parent, list):
            # By identity: an item whose key field was just removed no longer matches its key.
            index = next((i for i, item in enumerate(parent) if item is child), None)
            if index is not None and set(child) <= set(KEYED_LISTS.get(pfield, ())):
                del parent[index]
        else:
            break


def apply_merge(live: Any, applied: Any, field: str = "") -> Any:
    """Server-side apply's merge of an applied configuration into the live object."""
    if isinstance(applied, dict) and isinstance(live, dict):
        merged = dict(live)
        for key, value in applied.items():
            merged[key] = apply_merge(live.get(key), value, key)
        return merged
    if field in SET_LISTS and isinstance(applied, list) and isinstance(live, list):
        return list(live) + [v for v in applied if v not in live]
    if _is_keyed(field, applied) and isinstance(live, list):
        merged_list = list(live)
        for item in applied:
            index = _find_item(merged_list, field, _item_key(field, item) or "")
            if index is None:
                merged_list.append(copy.deepcopy(item))
            else:
                merged_list[index] = apply_merge(merged_list[index], item)
        return merged_list
    return copy.deepcopy(applied)


# --- patches ---------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, `null` deletes, lists are replaced whole."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


#: Strategic merge patch keys of built-in types (`patchMergeKey` tags in k8s.io/api).
_SMP_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "containerStatuses": "name",
}


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge patch for built-in kinds: like a merge patch, but lists with a patch merge
    key merge item by item (`$patch: delete` removes one), and `finalizers` merge as a set."""
    if isinstance(patch, list):
        if field == "finalizers" and isinstance(target, list):
            return list(target) + [v for v in patch if v not in target]
        key = _SMP_KEYS.get(field)
        if key is None or not isinstance(target, list):
            return [p for p in copy.deepcopy(patch) if not (isinstance(p, dict) and p.get("$patch"))]
        merged = [copy.deepcopy(t) for t in target]
        for item in patch:
            if not isinstance(item, dict):
                continue
            index = next((i for i, t in enumerate(merged) if t.get(key) == item.get(key)), None)
            if item.get("$patch") == "delete":
                if index is not None:
                    del merged[index]
            elif index is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[index] = strategic_merge_patch(merged[index], item)
        return merged
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if name.startswith("$deleteFromPrimitiveList/"):
            listed = name.split("/", 1)[1]
            result[listed] = [v for v in result.get(listed, []) if v not in value]
        elif name.startswith("$"):
            continue
        elif value is None:
            result.pop(name, None)
        else:
            result[name] = strategic_merge_patch(result.get(name), value, name)
    return result


class PatchError(ValueError):
    """A patch the API server cannot apply; the message is the server's."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test, move, copy)."""
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)

    def parent_of(parts: list[str]) -> tuple[Any, str]:
        node = doc
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node, parts[-1]

    def get(parts: list[str]) -> Any:
        node = doc
        for part in parts:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    for op in operations:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        try:
            if kind == "test":
                if get(parts) != op.get("value"):
                    raise PatchError(f"testing value {op.get('path')} failed")
                continue
            if kind in ("move", "copy"):
                value = copy.deepcopy(get(_pointer(op["from"])))
                if kind == "move":
                    src_parent, src_last = parent_of(_pointer(op["from"]))
                    del src_parent[int(src_last) if isinstance(src_parent, list) else src_last]
                kind, op = "add", {**op, "value": value}
            parent, last = parent_of(parts)
            if kind == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
                else:
                    parent[last] = copy.deepcopy(op["value"])
            elif kind == "replace":
                if isinstance(parent, list):
                    parent[int(last)] = copy.deepcopy(op["value"])
                else:
                    if last not in parent:
                        raise PatchError(
                            f"replace operation does not apply: doc is missing key: {op['path']}"
                        )
                    parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    if last not in parent:
                        raise PatchError(
                            f"remove operation does not apply: doc is missing path: {op['path']}"
                        )
                    del parent[last]
            else:
                raise PatchError(f"Unexpected kind: {kind}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            if isinstance(exc, PatchError):
                raise
            raise PatchError(
                f"{kind} operation does not apply: doc is missing path: {op.get('path')}"
            ) from None
    return doc
