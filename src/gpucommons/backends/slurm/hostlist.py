"""Slurm host lists: `n[1-4,7],gpu-a[01-02]` ⇄ the node names they stand for.

Slurm prints node sets in this compressed form (`NodeList=n[2-3]` in squeue, scontrol and sacct) and
accepts it in `--nodelist`. Only the last run of digits of a name is ranged, as Slurm does; zero
padding is kept (`[08-10]` → n08, n09, n10). Multi-dimensional brackets (`rack[1-2]-n[1-4]`) are
expanded too, since some sites name nodes that way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What Slurm prints for a job that holds no nodes yet.
EMPTY = frozenset({"", "(null)", "None assigned", "N/A"})
#: Far above any real cluster: a typo such as `n[1-99999999]` is refused, not expanded.
MAX_HOSTS = 100_000
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


class HostlistError(ValueError):
    """A host list Slurm would not print; the message names the part that is wrong."""


def expand(hostlist: str) -> tuple[str, ...]:
    """`n[1-3],x` → ("n1", "n2", "n3", "x"), in order, duplicates kept once."""
    text = hostlist.strip()
    if text in EMPTY:
        return ()
    names: list[str] = []
    for part in _split_top_level(text):
        names.extend(_expand_one(part, hostlist))
        if len(names) > MAX_HOSTS:
            raise HostlistError(f"host list {hostlist!r} names more than {MAX_HOSTS} hosts")
    return tuple(dict.fromkeys(names))


def compress(names: Iterable[str]) -> str:
    """("n1", "n2", "n3", "x") → `n[1-3],x`: the form `--nodelist` and Slurm's own output use.

    Names are grouped by their prefix and the width of their number; groups keep the order in which
    their first name appears, and numbers are sorted within a group.
    """
    groups: dict[tuple[str, int], list[int]] = {}
    plain: dict[str, None] = {}
    order: list[tuple[str, int] | str] = []
    for name in dict.fromkeys(names):
        match = _TRAILING_NUMBER.match(name)
        if match is None:
            plain[name] = None
            order.append(name)
            continue
        prefix, digits = match.groups()
        # "n01" and "n1" are different hosts: the width is part of the group.
        key = (prefix, len(digits) if digits.startswith("0") else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
        else:
            parts.append(f"{prefix}[{_ranges(numbers, width)}]")
    return ",".join(parts)


def _ranges(numbers: list[int], width: int) -> str:
    out: list[str] = []
    start = previous = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == previous + 1:
            previous = n
            continue
        out.append(f"{start:0{width}d}" if start == previous else f"{start:0{width}d}-{previous:0{width}d}")
        if n is not None:
            start = previous = n
    return ",".join(out)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets: `a[1,3],b` → [`a[1,3]`, `b`]."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"host list {text!r} closes a bracket it never opened")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise HostlistError(f"host list {text!r} leaves a bracket open")
    parts.append("".join(current))
    for part in parts:
        if not part.strip():
            raise HostlistError(f"host list {text!r} has an empty name")
    return [p.strip() for p in parts]


def _expand_one(part: str, whole: str) -> list[str]:
    start = part.find("[")
    if start < 0:
        return [part]
    end = part.index("]", start)
    head, body, tail = part[:start], part[start + 1 : end], part[end + 1 :]
    rest = _expand_one(tail, whole) if tail else [""]
    out: list[str] = []
    for number in _numbers(body, whole):
        out.extend(f"{head}{number}{suffix}" for suffix in rest)
        if len(out) > MAX_HOSTS:
            raise HostlistError(f"host list {whole!r} names more than {MAX_HOSTS} hosts")
    return out


def _numbers(body: str, whole: str) -> list[str]:
    numbers: list[str] = []
    for item in body.split(","):
        low, dash, high = item.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise HostlistError(f"host list {whole!r}: {item!r} is not a number or a range of numbers")
        if not dash:
            numbers.append(low)
            continue
        first, last = int(low), int(high)
        if last < first:
            raise HostlistError(f"host list {whole!r}: the range {item!r} runs backwards")
        if last - first >= MAX_HOSTS:
            raise HostlistError(f"host list {whole!r} names more than {MAX_HOSTS} hosts")
        width = len(low) if low.startswith("0") else 0
        numbers.extend(f"{n:0{width}d}" for n in range(first, last + 1))
    return numbers
