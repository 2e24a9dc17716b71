"""Keep the valid parts of a file with schema errors, so that the cross-checks still run on them.

A refused file must list *every* problem at once. When `teams[0]` has a typo, the cross-checks
(unknown pools, quota sums, lend limits) should still run on `teams[0]`'s other keys and on every
other team. So for each list item (pool, class, cohort, team) and each section we drop the keys
that pydantic complained about — for a team's quota only the offending pool entry — and validate
what is left; an item that still fails (a required key is missing or wrong) is left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from gpucommons.policy.issues import user_path
from gpucommons.policy.schema import (
    ChargebackSpec,
    CohortSpec,
    PolicyFile,
    PoolSpec,
    PriorityClassSpec,
    SchedulingSpec,
    TeamSpec,
)
from gpucommons.policy.yaml_source import Path

M = TypeVar("M", bound=BaseModel)


@dataclass
class Parts:
    """The validated items of a policy file, each with its index in the file."""

    pools: list[tuple[int, PoolSpec]] = field(default_factory=list)
    priority_classes: list[tuple[int, PriorityClassSpec]] = field(default_factory=list)
    cohorts: list[tuple[int, CohortSpec]] = field(default_factory=list)
    teams: list[tuple[int, TeamSpec]] = field(default_factory=list)
    default_priority_class: str | None = None
    chargeback: ChargebackSpec | None = None
    scheduling: SchedulingSpec | None = None
    #: Every name written in each list (`pools`, `priority_classes`, `cohorts`, `teams`), valid item
    #: or not, so that duplicates are found even among items with other errors.
    names: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, policy: PolicyFile) -> Parts:
        return cls(
            pools=list(enumerate(policy.cluster.pools)),
            priority_classes=list(enumerate(policy.priority_classes)),
            cohorts=list(enumerate(policy.cohorts)),
            teams=list(enumerate(policy.teams)),
            default_priority_class=policy.default_priority_class,
            chargeback=policy.chargeback,
            scheduling=policy.scheduling,
            names={
                "pools": [(i, p.name) for i, p in enumerate(policy.cluster.pools)],
                "priority_classes": [(i, c.name) for i, c in enumerate(policy.priority_classes)],
                "cohorts": [(i, c.name) for i, c in enumerate(policy.cohorts)],
                "teams": [(i, t.name) for i, t in enumerate(policy.teams)],
            },
        )


def salvage(data: dict[str, Any], error: ValidationError) -> Parts:
    """The parts of `data` that validate once the keys named in `error` are dropped."""
    bad: dict[Path, list[Path]] = defaultdict(list)
    bad_top: set[Path] = set()
    for detail in error.errors(include_url=False):
        path = user_path(detail["loc"])
        bad_top.add(path[:1])
        for prefix_len in (3, 2, 1):  # cluster.pools[i] / teams[i] / a section
            prefix = path[:prefix_len]
            if _is_item(prefix):
                bad[prefix].append(path[prefix_len:])
                break

    cluster = data.get("cluster")
    raw_pools = cluster.get("pools") if isinstance(cluster, dict) else None
    # A malformed default (`3`, `"bad name!"`) already has its schema error: no "unknown class" too.
    default_class = None if ("default_priority_class",) in bad_top else data.get("default_priority_class")
    parts = Parts(
        pools=_items(raw_pools, ("cluster", "pools"), PoolSpec, bad),
        priority_classes=_items(data.get("priority_classes"), ("priority_classes",), PriorityClassSpec, bad),
        cohorts=_items(data.get("cohorts"), ("cohorts",), CohortSpec, bad),
        teams=_items(data.get("teams"), ("teams",), TeamSpec, bad),
        default_priority_class=default_class if isinstance(default_class, str) else None,
        chargeback=_section(data.get("chargeback", {}), ChargebackSpec, bad.get(("chargeback",), [])),
        scheduling=_section(data.get("scheduling", {}), SchedulingSpec, bad.get(("scheduling",), [])),
        names={
            "pools": _raw_names(raw_pools),
            "priority_classes": _raw_names(data.get("priority_classes")),
            "cohorts": _raw_names(data.get("cohorts")),
            "teams": _raw_names(data.get("teams")),
        },
    )
    if "priority_classes" not in data:
        defaults = PolicyFile.model_fields["priority_classes"].get_default(call_default_factory=True)
        parts.priority_classes = list(enumerate(defaults))
    return parts


def _raw_names(raw: Any) -> list[tuple[int, str]]:
    if not isinstance(raw, list):
        return []
    return [
        (index, item["name"])
        for index, item in enumerate(raw)
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    ]


def _is_item(prefix: Path) -> bool:
    if len(prefix) == 3:
        return prefix[:2] == ("cluster", "pools") and isinstance(prefix[2], int)
    if len(prefix) == 2:
        return prefix[0] in ("priority_classes", "cohorts", "teams") and isinstance(prefix[1], int)
    return len(prefix) == 1 and prefix[0] in ("chargeback", "scheduling")


def _items(raw: Any, where: Path, model: type[M], bad: dict[Path, list[Path]]) -> list[tuple[int, M]]:
    if not isinstance(raw, list):
        return []
    out: list[tuple[int, M]] = []
    for index, item in enumerate(raw):
        kept = _section(item, model, bad.get((*where, index), []))
        if kept is not None:
            out.append((index, kept))
    return out


def _section(raw: Any, model: type[M], bad_paths: Sequence[Path]) -> M | None:
    if not isinstance(raw, dict):
        return None
    pruned = dict(raw)
    for rest in bad_paths:
        if not rest:
            continue
        key = rest[0]
        nested = pruned.get(key)
        if key == "quota" and len(rest) > 1 and isinstance(nested, dict):
            pruned[key] = {pool: q for pool, q in nested.items() if pool != rest[1]}
        else:
            pruned.pop(key, None)  # type: ignore[call-overload]
    try:
        return TypeAdapter(model).validate_python(pruned)
    except ValidationError:
        return None
