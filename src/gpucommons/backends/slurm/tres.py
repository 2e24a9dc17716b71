"""GPU counts out of Slurm's two notations: Gres (`gpu:h100:8(S:0-1)`) and TRES (`gres/gpu=4`).

A node's `Gres=` says what it has, one entry per GPU type; a TRES list (`CfgTRES`, `AllocTRES`, a
job's `TRES=` or sacct's `AllocTRES`) counts what is configured or held. A TRES list may count GPUs
twice, once in total (`gres/gpu=8`) and once per type (`gres/gpu:h100=8`): the total wins.

A TRES list counts GPUs only where slurm.conf has `AccountingStorageTRES=gres/gpu` (which needs
slurmdbd); elsewhere a job's GPUs are read from its request (`TresPerNode=gres:gpu:4`, `requested_gpus`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: `gpu`, `gpu:8`, `gpu:h100:8`, `gpu:h100:8(S:0-1)`, `gpu:8(IDX:0-3)`; a count may carry K/M/G.
_GRES = re.compile(r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))??(?::(?P<count>\d+[KMG]?))?(?:\(.*\))?$")
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


class TresError(ValueError):
    """A Gres or TRES string that does not parse; the message quotes it."""


@dataclass(frozen=True, slots=True)
class Gres:
    """One entry of a Gres list: `gpu:h100:8` → Gres("gpu", "h100", 8)."""

    name: str
    type: str | None
    count: int


def parse_gres(text: str) -> tuple[Gres, ...]:
    """`gpu:h100:4(S:0),gpu:a100:2,shard:8` → its entries; `(null)` or empty → ()."""
    value = text.strip()
    if value in ("", "(null)", "N/A"):
        return ()
    entries = []
    for item in _split_outside_parentheses(value):
        match = _GRES.match(item)
        if match is None:
            raise TresError(f"Gres entry {item!r} (in {text!r}) is not name[:type][:count]")
        count_text = match["count"]
        if count_text is None:
            # `gpu:h100` (a type, no count) and `gpu` alone both mean one.
            count = 1
        else:
            count = int(count_text.rstrip("KMG")) * _SUFFIX[count_text[-1] if count_text[-1] in "KMG" else ""]
        entries.append(Gres(match["name"], match["type"], count))
    return tuple(entries)


def gres_gpus(text: str) -> int:
    """GPUs a Gres list holds, over every GPU type."""
    return sum(g.count for g in parse_gres(text) if g.name == "gpu")


def gres_gpu_types(text: str) -> tuple[str, ...]:
    """The GPU types a Gres list names (`gpu:h100:8` → ("h100",)); untyped GPUs name none."""
    return tuple(dict.fromkeys(g.type for g in parse_gres(text) if g.name == "gpu" and g.type))


def parse_tres(text: str) -> dict[str, str]:
    """`cpu=2,mem=200M,gres/gpu=16` → {"cpu": "2", "mem": "200M", "gres/gpu": "16"}."""
    value = text.strip()
    if value in ("", "(null)", "N/A"):
        return {}
    out: dict[str, str] = {}
    for item in value.split(","):
        key, eq, amount = item.partition("=")
        if not eq or not key:
            raise TresError(f"TRES entry {item!r} (in {text!r}) is not name=amount")
        out[key.strip()] = amount.strip()
    return out


def tres_gpus(text: str) -> int:
    """GPUs a TRES list counts: `gres/gpu` when present, else the sum of `gres/gpu:TYPE`."""
    tres = parse_tres(text)
    if "gres/gpu" in tres:
        return _count(tres["gres/gpu"], text)
    return sum(_count(v, text) for k, v in tres.items() if k.startswith("gres/gpu:"))


def requested_gpus(text: str) -> int:
    """GPUs of a job's request as squeue and scontrol print it: `gres:gpu:3`, `gres/gpu:h100:2`,
    `gres:gpu:2,gres:shard:1`; empty, `N/A` or `(null)` → 0."""
    value = text.strip()
    if value in ("", "(null)", "N/A"):
        return 0
    entries = [e.strip().removeprefix("gres:").removeprefix("gres/") for e in value.split(",")]
    return gres_gpus(",".join(e for e in entries if e))


def _count(amount: str, whole: str) -> int:
    if not amount.isdigit():
        raise TresError(f"GPU count {amount!r} (in {whole!r}) is not a whole number")
    return int(amount)


def _split_outside_parentheses(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]
