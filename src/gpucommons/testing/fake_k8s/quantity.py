"""Kubernetes resource quantities, exactly: parse to a Fraction, print as Kueue prints them.

Parsing follows `k8s.io/apimachinery/pkg/api/resource` (decimal suffixes m, k, M, G, T, P, E; binary
Ki … Ei; plain and exponent numbers). Printing follows Kueue's messages and `resourceUsage`
(tests/data/kueue/shapes/README.md §3.2, `pkg/resources/resource_formatter.go`): CPU from
millicores (`32`, `500m`), memory in the largest binary unit that divides it (`256Gi`), anything else
as a plain number (`8`).
"""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIX = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?)$")
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def parse_quantity(value: object) -> Fraction:
    """`"256Gi"`, `"500m"`, `8`, `"1e3"` → an exact number; ValueError names a malformed one."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match or match.group(1) in ("", ".", "+", "-"):
        raise ValueError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    number = Fraction(match.group(1))
    if match.group(2) is not None:
        return number * Fraction(10) ** int(match.group(2))
    return number * _SUFFIX[match.group(3) or ""]


def format_quantity(resource: str, amount: Fraction) -> str:
    """How Kueue prints `amount` of `resource` in messages and `resourceUsage`."""
    if resource == "cpu":
        milli = amount * 1000
        if amount.denominator == 1:
            return str(amount.numerator)
        return f"{int(milli)}m"
    if resource == "memory" or resource.startswith("hugepages-") or resource == "ephemeral-storage":
        if amount.denominator == 1 and amount:
            for suffix, size in _BINARY:
                if amount.numerator % size == 0:
                    return f"{amount.numerator // size}{suffix}"
        return str(int(amount)) if amount.denominator == 1 else str(float(amount))
    if amount.denominator == 1:
        return str(amount.numerator)
    return f"{int(amount * 1000)}m"


def pod_requests(pod_spec: dict[str, object]) -> dict[str, Fraction]:
    """What one pod asks for: each container's requests (a limit alone counts as the request, as
    the API server defaults it), summed; init containers count by their maximum (Kubernetes'
    effective request)."""
    total: dict[str, Fraction] = {}
    for container in _dicts(pod_spec.get("containers")):
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Fraction(0)) + amount
    for container in _dicts(pod_spec.get("initContainers")):
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, Fraction(0)), amount)
    return total


def _container_requests(container: dict[str, object]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    assert isinstance(resources, dict)
    requests = dict(resources.get("limits") or {})
    requests.update(resources.get("requests") or {})
    return {str(name): parse_quantity(amount) for name, amount in requests.items()}


def _dicts(value: object) -> list[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
