"""Turning pydantic's validation errors into plain sentences at the user's paths and lines."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpucommons.policy.errors import PolicyIssue
from gpucommons.policy.schema import NAME_HELP, SLURM_WORD_HELP, UNION_TAGS, PolicyFile
from gpucommons.policy.yaml_source import Path, YamlDocument, format_path


def user_path(loc: Iterable[str | int]) -> Path:
    """Pydantic's error location without the union tags it inserts (`limit:number`, ...).

    A bad mapping *key* comes as `(..., 1, "[key]")`: the key is a key, not a list index, so it is
    shown as `quota.1`, not `quota[1]`.
    """
    parts = [part for part in loc if not (isinstance(part, str) and part in UNION_TAGS)]
    if parts and parts[-1] == "[key]":
        parts = [*parts[:-2], str(parts[-2])] if len(parts) > 1 else []
    return tuple(parts)


def schema_issues(error: ValidationError, doc: YamlDocument) -> list[PolicyIssue]:
    """One issue per pydantic error, each with its path, a sentence and the line of its key."""
    issues: list[PolicyIssue] = []
    for detail in error.errors(include_url=False):
        path = user_path(detail["loc"])
        issues.append(PolicyIssue(format_path(path), _sentence(detail, path), doc.line_of(path)))
    return issues


def _sentence(detail: ErrorDetails, path: Path) -> str:
    kind = detail["type"]
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    shown = _show(value)
    if kind == "missing":
        return f"required key {path[-1]!r} is missing" if path else "a required key is missing"
    if kind == "extra_forbidden":
        return _unknown_key(path)
    if kind in ("int_type", "int_parsing"):
        return f"must be a whole number, not {shown}"
    if kind == "int_from_float":
        return f"must be a whole number, not {shown}"
    if kind in ("decimal_type", "decimal_parsing", "float_type", "float_parsing"):
        return f"must be a number, not {shown}"
    if kind in ("finite_number", "decimal_max_digits", "decimal_max_places", "decimal_whole_digits"):
        return f"must be a finite number, not {shown}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, not {shown}"
    if kind == "string_type":
        if detail["loc"] and detail["loc"][-1] == "[key]":
            return f"a key must be text, not {shown} (put it in quotes)"
        return f"must be text, not {shown} (put it in quotes)"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        if path and path[-1] == "currency":
            return f"{shown} is not a currency code: use three capital letters such as USD or EUR"
        if "slurm" in path:
            return f"{shown} is not a valid Slurm name: {SLURM_WORD_HELP}"
        return f"{shown} is not a valid name: {NAME_HELP}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return _bound_sentence(kind, ctx, shown, path)
    if kind in ("literal_error", "enum"):
        return f"{shown} is not allowed here: use {ctx.get('expected', 'one of the documented words')}"
    if kind in ("list_type",):
        return f"must be a list, not {shown}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping of keys to values, not {shown}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "value_error":
        return str(ctx.get("error") or detail["msg"]).removeprefix("Value error, ")
    if kind == "recursion_loop":
        return "a YAML alias refers to itself"
    return detail["msg"][:1].lower() + detail["msg"][1:]


def _bound_sentence(kind: str, ctx: dict[str, Any], shown: str, path: Path) -> str:
    if path and path[-1] == "borrowed_rate":
        return f"must be above 0 and at most 1 (a price multiplier for borrowed GPU-hours), not {shown}"
    if kind == "greater_than_equal" and str(ctx.get("ge")) == "0":
        return f"cannot be negative (got {shown})"
    words = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("above", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("below", "lt"),
    }[kind]
    return f"must be {words[0]} {ctx.get(words[1])}, not {shown}"


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "empty (null)"
    return repr(value) if isinstance(value, str) else str(value)


def _unknown_key(path: Path) -> str:
    key = str(path[-1])
    allowed = allowed_keys(path[:-1])
    if not allowed:
        return f"unknown key {key!r}"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key {key!r}{hint} (allowed here: {', '.join(allowed)})"


def allowed_keys(path: Path) -> list[str]:
    """The keys the schema allows at `path` (empty when `path` is not a mapping of fixed keys)."""
    model = _model_at(path)
    return list(model.model_fields) if model is not None else []


def _model_at(path: Path) -> type[BaseModel] | None:
    current: Any = PolicyFile
    for part in path:
        current = _unwrap(current, part)
        if current is None:
            return None
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is list and isinstance(part, int):
            current = get_args(current)[0]
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
    current = _unwrap(current, None)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any, part: str | int | None) -> Any:
    """Strip Annotated and Optional; of a union, keep the member the next path step can enter."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            members = [_unwrap(arg, part) for arg in get_args(annotation) if arg is not type(None)]
            wanted = [m for m in members if _enters(m, part)]
            annotation = (wanted or members or [None])[0]
        else:
            return annotation


def _enters(annotation: Any, part: str | int | None) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return part is None or isinstance(part, str)
    origin = get_origin(annotation)
    if origin is list:
        return isinstance(part, int)
    return origin is dict
