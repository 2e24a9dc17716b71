"""Cross-checks of who may use each priority class (`priority_classes[].teams` and `.roles`).

- every team a class names exists (with a did-you-mean);
- an empty list is a mistake, not a way to close a class: it would let nobody use it;
- the default class is open to every member of every team, because a task that names no class gets
  it: a default restricted to some teams or roles would refuse their members' plain submissions.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from gpucommons.policy.salvage import Parts
from gpucommons.policy.yaml_source import Path

Finding = tuple[Path, str]


def _unknown_team(name: str, teams: list[str]) -> str:
    close = difflib.get_close_matches(name, teams, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    defined = f" (defined teams: {', '.join(teams)})" if teams else " (no teams are defined)"
    return f"unknown team {name!r}{hint}{defined}"


def _default_class(parts: Parts) -> str | None:
    if parts.default_priority_class is not None:
        return parts.default_priority_class
    classes = [c for _, c in parts.priority_classes]
    return min(classes, key=lambda c: c.value).name if classes else None


def class_access_rules(parts: Parts) -> Iterator[Finding]:
    """The teams and roles a class is reserved to are real, non-empty, and leave the default open."""
    teams = [t.name for _, t in parts.teams]
    default = _default_class(parts)
    for index, cls in parts.priority_classes:
        where: Path = ("priority_classes", index)
        for key, chosen in (("teams", cls.teams), ("roles", cls.roles)):
            if chosen is not None and not chosen:
                yield (*where, key), f"an empty {key} list lets nobody use class {cls.name!r}: leave it out"
        for position, team in enumerate(cls.teams or ()):
            if team not in teams:
                yield (*where, "teams", position), _unknown_team(team, teams)
        if cls.name != default:
            continue
        left_out = [t for t in teams if cls.teams and t not in cls.teams]
        if left_out:
            yield (
                (*where, "teams"),
                f"{cls.name!r} is the default class, which every team's tasks get when they name none: "
                f"it cannot leave out {', '.join(left_out)} (make another class the default, or open it)",
            )
        if cls.roles and "team_member" not in cls.roles:
            yield (
                (*where, "roles"),
                f"{cls.name!r} is the default class, which every member's tasks get when they name none: "
                "its roles must include team_member (make another class the default, or open this one)",
            )
