"""`scontrol show nodes --oneliner` → one `SlurmNode` per node: GPUs, state, partitions, features.

A node's state is a base state and flags joined by `+` (`IDLE+DRAIN`, `MIXED+COMPLETING`,
`DOWN+NOT_RESPONDING`); `sinfo`'s short forms end in `*` for "not responding" (`idle*`). What
matters to GPU Commons is whether new work may be placed on the node (`schedulable`) and whether the
work on it is lost (`lost`: the node is down or does not answer, so its jobs will not finish there).
A draining node is neither: its jobs run on, nothing new starts there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from gpucommons.backends.slurm.keyvalue import optional, parse_records
from gpucommons.backends.slurm.tres import TresError, gres_gpu_types, gres_gpus, tres_gpus


class NodeBase(StrEnum):
    """Slurm's base node states (slurm.h `node_states`); UNKNOWN also stands for states added later."""

    IDLE = "IDLE"
    MIXED = "MIXED"
    ALLOCATED = "ALLOCATED"
    DOWN = "DOWN"
    ERROR = "ERROR"
    FUTURE = "FUTURE"
    UNKNOWN = "UNKNOWN"


#: Flags under which nothing new may start on a node.
UNSCHEDULABLE_FLAGS = frozenset(
    {
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "FAIL",
        "FAILING",
        "NOT_RESPONDING",
        "MAINTENANCE",
        "RESERVED",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "POWER_DOWN",
        "INVALID_REG",
        "PLANNED",
    }
)
#: Flags under which the jobs on a node are lost (with a DOWN or ERROR base state).
LOST_FLAGS = frozenset({"NOT_RESPONDING", "FAIL"})
#: sinfo's short words → (base state, flag they imply).
_SHORT = {
    "MIX": ("MIXED", None),
    "ALLOC": ("ALLOCATED", None),
    "DRAIN": ("IDLE", "DRAIN"),
    "DRAINED": ("IDLE", "DRAIN"),
    "DRNG": ("MIXED", "DRAIN"),
    "DRAINING": ("MIXED", "DRAIN"),
    "COMP": ("IDLE", "COMPLETING"),
    "RESV": ("IDLE", "RESERVED"),
    "MAINT": ("IDLE", "MAINTENANCE"),
    "FAIL": ("DOWN", "FAIL"),
    "FAILG": ("MIXED", "FAILING"),
}


@dataclass(frozen=True, slots=True)
class NodeState:
    """`IDLE+DRAIN` → NodeState(IDLE, {"DRAIN"})."""

    base: NodeBase
    flags: frozenset[str]
    #: What Slurm printed, for messages.
    text: str

    @property
    def schedulable(self) -> bool:
        """New work may start here."""
        return self.base in (NodeBase.IDLE, NodeBase.MIXED, NodeBase.ALLOCATED) and not (
            self.flags & UNSCHEDULABLE_FLAGS
        )

    @property
    def draining(self) -> bool:
        return bool(self.flags & {"DRAIN", "DRAINING", "DRAINED"})

    @property
    def lost(self) -> bool:
        """The node's jobs will not finish there: it is down, failed, or does not answer."""
        return self.base in (NodeBase.DOWN, NodeBase.ERROR) or bool(self.flags & LOST_FLAGS)

    @property
    def why_not_schedulable(self) -> str | None:
        """A few words for `commons queue` and logs ("down", "draining", ...), None when schedulable."""
        if self.schedulable:
            return None
        if self.base is NodeBase.DOWN:
            return "down"
        if "NOT_RESPONDING" in self.flags:
            return "not responding"
        if self.flags & {"FAIL", "FAILING"}:
            return "failing"
        if self.draining:
            return "drained" if self.base is NodeBase.IDLE else "draining"
        named = sorted(self.flags & UNSCHEDULABLE_FLAGS)
        return (named[0].lower().replace("_", " ")) if named else self.base.value.lower()


def parse_state(text: str) -> NodeState:
    """`MIXED+DRAIN`, `DOWN*`, `idle~`, `drain` → a NodeState; an unknown base state is UNKNOWN."""
    raw = text.strip()
    words = raw.upper().split("+")
    base_word = words[0]
    flags = {w for w in words[1:] if w}
    # sinfo-style suffixes: * not responding, ~ powered down, # powering up, % powering down, ! pending
    # power down, $ maintenance, @ pending reboot, ^ rebooting, - planned.
    suffixes = {
        "*": "NOT_RESPONDING",
        "~": "POWERED_DOWN",
        "#": "POWERING_UP",
        "%": "POWERING_DOWN",
        "!": "POWER_DOWN",
        "$": "MAINTENANCE",
        "@": "REBOOT_REQUESTED",
        "^": "REBOOT_ISSUED",
        "-": "PLANNED",
    }
    while base_word and base_word[-1] in suffixes:
        flags.add(suffixes[base_word[-1]])
        base_word = base_word[:-1]
    if base_word in _SHORT:
        base_word, implied = _SHORT[base_word]
        if implied:
            flags.add(implied)
    try:
        base = NodeBase(base_word)
    except ValueError:
        base = NodeBase.UNKNOWN
    return NodeState(base, frozenset(flags), raw)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node as scontrol reports it."""

    name: str
    state: NodeState
    gpus: int
    gpus_allocated: int
    gpu_types: tuple[str, ...]
    cpus: int
    memory_mb: int
    partitions: tuple[str, ...]
    features: tuple[str, ...]
    #: Why an administrator (or Slurm) took the node out of service, when it says.
    reason: str | None = None

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpus - self.gpus_allocated)


class NodeParseError(ValueError):
    """A node record whose GPU, CPU or memory field does not parse; the message names node and field."""


def parse_nodes(text: str) -> tuple[SlurmNode, ...]:
    """Every node of `scontrol show nodes --oneliner`, in Slurm's order."""
    return tuple(node_from_fields(fields) for fields in parse_records(text, "NodeName"))


def node_from_fields(fields: dict[str, str]) -> SlurmNode:
    name = fields["NodeName"]
    try:
        gpus = gres_gpus(fields.get("Gres", ""))
        types = gres_gpu_types(fields.get("Gres", ""))
        allocated = tres_gpus(fields.get("AllocTRES", ""))
    except TresError as exc:
        raise NodeParseError(f"node {name}: {exc}") from None
    return SlurmNode(
        name=name,
        state=parse_state(fields.get("State", "UNKNOWN")),
        gpus=gpus,
        gpus_allocated=allocated,
        gpu_types=types,
        cpus=_integer(fields, "CPUTot", name),
        memory_mb=_integer(fields, "RealMemory", name),
        partitions=_words(fields.get("Partitions")),
        features=_words(fields.get("ActiveFeatures") or fields.get("AvailableFeatures")),
        reason=optional(fields.get("Reason")),
    )


def _integer(fields: dict[str, str], key: str, node: str) -> int:
    value = optional(fields.get(key))
    if value is None:
        return 0
    if not value.isdigit():
        raise NodeParseError(f"node {node}: {key}={value!r} is not a whole number")
    return int(value)


def _words(value: str | None) -> tuple[str, ...]:
    text = optional(value)
    if text is None:
        return ()
    return tuple(w for w in (part.strip() for part in text.split(",")) if w)


#: sinfo --Format fields for the GPUs in use per node (`gpu:5`, `gpu:h100:5(IDX:0-4)`), which Slurm
#: reports whether or not GPUs are counted as a TRES.
SINFO_GRES_USED = "NodeList:|,GresUsed:|"


def parse_gres_used(text: str) -> dict[str, int]:
    """`sinfo --Node --noheader --Format=<SINFO_GRES_USED>` → node → GPUs in use (a node listed once
    per partition counts once)."""
    used: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        node, _, rest = line.partition("|")
        gres = rest.removesuffix("|")
        try:
            used[node.strip()] = gres_gpus(gres)
        except TresError as exc:
            raise NodeParseError(f"node {node.strip()}: GresUsed {gres!r}: {exc}") from None
    return used


def with_gpus_in_use(nodes: tuple[SlurmNode, ...], used: dict[str, int]) -> tuple[SlurmNode, ...]:
    """The nodes with `gpus_allocated` from sinfo's GresUsed, where it names the node."""
    return tuple(replace(n, gpus_allocated=used[n.name]) if n.name in used else n for n in nodes)
