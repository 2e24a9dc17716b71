"""Slurm nodes → the policy's pools: which nodes each pool has, and which may take new work now.

A pool takes the nodes its `slurm` key names (a partition, features, or both: docs/policy.md). A pool
without the key takes the partition named like itself; a policy with a single pool and no `slurm`
key anywhere takes every node, which is what a small cluster with one partition wants.

A node claimed by two pools belongs to neither (it is reported: placing a task there would charge one
pool for GPUs another owns); a node no pool claims is reported and left alone. A claimed node that is
down, drained or not responding is out of the pool's usable nodes, with the reason Slurm gives; its
GPUs leave the pool's capacity until it comes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpucommons.backends.slurm.nodes import SlurmNode
from gpucommons.domain.model import Pool, SlurmNodeMatch


def node_match(pool: Pool, pools: Sequence[Pool]) -> SlurmNodeMatch:
    """The nodes `pool` takes: its `slurm` key, else the default rule (see the module docstring)."""
    if pool.slurm is not None:
        return pool.slurm
    if len(pools) == 1:
        return SlurmNodeMatch()
    return SlurmNodeMatch(partition=pool.name)


def matches(node: SlurmNode, match: SlurmNodeMatch) -> bool:
    if match.partition is not None and match.partition not in node.partitions:
        return False
    return set(match.features) <= set(node.features)


@dataclass(frozen=True, slots=True)
class UnusableNode:
    """A node of a pool that may not take new work now, and why (`down`, `draining`, ...)."""

    node: SlurmNode
    why: str

    @property
    def lost(self) -> bool:
        """Its jobs will not finish (down, failed, not responding), as opposed to draining."""
        return self.node.state.lost


@dataclass(frozen=True, slots=True)
class SlurmInventory:
    """The cluster as the engine sees it: usable nodes per pool, and what was left out and why."""

    #: Pool name → its nodes that may take new work, in Slurm's order. Every pool has an entry.
    usable: Mapping[str, tuple[SlurmNode, ...]]
    #: Pool name → its nodes that may not (down, drained, draining, not responding, ...).
    unusable: Mapping[str, tuple[UnusableNode, ...]]
    #: Nodes no pool claims (in the partition looked at).
    unclaimed: tuple[str, ...] = ()
    #: Node → the pools that all claim it; such a node is in no pool.
    contested: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Sentences for the operator: a node whose GPU count differs from its pool's, a pool with no node.
    notes: tuple[str, ...] = ()

    def pool_of(self, node_name: str) -> str | None:
        """The pool a usable or unusable node belongs to, None for unclaimed and contested nodes."""
        for pool, nodes in self.usable.items():
            if any(n.name == node_name for n in nodes):
                return pool
        for pool, bad in self.unusable.items():
            if any(u.node.name == node_name for u in bad):
                return pool
        return None

    def gpus(self, pool: str) -> int:
        """GPUs of the pool's usable nodes (held or free)."""
        return sum(n.gpus for n in self.usable.get(pool, ()))

    def lost_nodes(self) -> tuple[str, ...]:
        """Nodes whose jobs will not finish there: the adapter requeues the tasks it placed on them."""
        return tuple(u.node.name for bad in self.unusable.values() for u in bad if u.lost)


def build_inventory(
    nodes: Iterable[SlurmNode], pools: Sequence[Pool], partition: str | None = None
) -> SlurmInventory:
    """Sort `nodes` into `pools`; with `partition`, nodes outside that partition are not looked at."""
    considered = [n for n in nodes if partition is None or partition in n.partitions]
    rules = [(pool, node_match(pool, pools)) for pool in pools]
    usable: dict[str, list[SlurmNode]] = {p.name: [] for p in pools}
    unusable: dict[str, list[UnusableNode]] = {p.name: [] for p in pools}
    unclaimed: list[str] = []
    contested: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    for node in considered:
        claimants = [pool for pool, rule in rules if matches(node, rule)]
        if not claimants:
            unclaimed.append(node.name)
            continue
        if len(claimants) > 1:
            contested[node.name] = tuple(p.name for p in claimants)
            notes.append(
                f"node {node.name} is claimed by pools {', '.join(p.name for p in claimants)}: "
                "it is left out until their `slurm` keys tell them apart"
            )
            continue
        pool = claimants[0]
        why = node.state.why_not_schedulable
        if why is not None:
            unusable[pool.name].append(UnusableNode(node, why))
        else:
            usable[pool.name].append(node)
        if node.gpus != pool.gpus_per_node:
            notes.append(
                f"node {node.name} has {node.gpus} GPUs; pool {pool.name} declares {pool.gpus_per_node} "
                "per node (the node's own count is used)"
            )
    for pool, rule in rules:
        if not usable[pool.name] and not unusable[pool.name]:
            notes.append(f"pool {pool.name} has no Slurm node ({_describe(rule)})")
    return SlurmInventory(
        usable={k: tuple(v) for k, v in usable.items()},
        unusable={k: tuple(v) for k, v in unusable.items()},
        unclaimed=tuple(unclaimed),
        contested=contested,
        notes=tuple(notes),
    )


def _describe(rule: SlurmNodeMatch) -> str:
    parts = []
    if rule.partition is not None:
        parts.append(f"partition {rule.partition}")
    if rule.features:
        parts.append("features " + ",".join(rule.features))
    return " and ".join(parts) if parts else "every node"
