"""Label and field selectors as the API server parses them (`k8s.io/apimachinery/pkg/labels`,
`pkg/fields`): `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`; fields `f=v`, `f!=v`.

Field selectors are served for `metadata.name` and `metadata.namespace` on every kind, the fields
Kubernetes declares for Pods (`status.phase`, `spec.nodeName`) and the CRD `selectableFields` of
Kueue's Workload (`status.admission.clusterQueue`, tests/data/kueue/shapes/README.md §11). Any other
field is refused with the API server's 400 message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: kind → selectable fields beyond metadata.name / metadata.namespace.
SELECTABLE_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName"),
    "Workload": ("status.admission.clusterQueue",),
    "Event": ("involvedObject.name", "involvedObject.uid", "involvedObject.kind", "reason", "type"),
}


class SelectorError(ValueError):
    """A selector the API server would refuse (400 BadRequest)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        if self.operator in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label too
        return labels.get(self.key) not in self.values


_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def parse_label_selector(text: str | None) -> list[Requirement]:
    requirements: list[Requirement] = []
    for part in _split_top(text or ""):
        part = part.strip()
        if not part:
            continue
        set_match = _SET.match(part)
        if set_match:
            values = tuple(v.strip() for v in set_match.group(3).split(",") if v.strip())
            requirements.append(Requirement(set_match.group(1), set_match.group(2), values))
        elif "!=" in part:
            key, value = part.split("!=", 1)
            requirements.append(Requirement(key.strip(), "!=", (value.strip(),)))
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            requirements.append(Requirement(key.strip(), "=", (value.strip(),)))
        elif part.startswith("!"):
            requirements.append(Requirement(part[1:].strip(), "!", ()))
        elif re.match(r"^[A-Za-z0-9./_-]+$", part):
            requirements.append(Requirement(part, "exists", ()))
        else:
            raise SelectorError(f"unable to parse requirement: {part!r}")
    return requirements


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def parse_field_selector(text: str | None, kind: str) -> Callable[[dict[str, Any]], bool]:
    checks: list[tuple[str, bool, str]] = []
    allowed = ("metadata.name", "metadata.namespace", *SELECTABLE_FIELDS.get(kind, ()))
    for part in _split_top(text or ""):
        part = part.strip()
        if not part:
            continue
        negate = "!=" in part
        key, value = (
            part.replace("==", "=").split("!=" if negate else "=", 1)
            if (negate or "=" in part)
            else (part, "")
        )
        key = key.strip()
        if key not in allowed:
            raise SelectorError(f"field label not supported: {key}")
        checks.append((key, negate, value.strip()))

    def matches(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, key) == value) != negate for key, negate, value in checks)

    return matches


def matches_labels(requirements: list[Requirement], obj: dict[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)
