"""Node-level placement: which GPUs of which nodes a task gets.

Rules (docs/design.md: node-level placement):
- a task that fits on one node lands on one node: best fit (`pack`: the node with the fewest free
  GPUs that still holds it, lowest index on ties), which keeps whole nodes free for big gangs; or
  (`spread`, kube-scheduler's default LeastAllocated score) the node with the most free GPUs;
- a task larger than a node takes whole free nodes (lowest indices first): all GPUs of each but the
  last, and the rest on the last; all-or-nothing;
- GPU indices are global within the pool: `node * gpus_per_node + local index`;
- dedicated teams get their own nodes (the highest indices of the pool, enough to hold their
  nominal quota); shared teams never land there.

Free nodes are kept in buckets by free-GPU count, so a placement costs O(gpus_per_node), not
O(nodes). Only GPUs are placed; CPU and memory are held by the quota arithmetic alone.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from gpucommons.domain.model import Isolation, Policy
from gpucommons.engine.types import NodeSlice

#: The partition that holds every node not given to a dedicated team.
SHARED = ""
#: Prefix of the partition a node out of service is moved to (its own partition follows): no team
#: places there, and the node's held GPUs stay accounted until their tasks end.
OUT_OF_SERVICE = "\0out-of-service:"


class PlacementError(ValueError):
    """A placement that names GPUs that do not exist or are already held."""


class PoolNodes:
    """The free GPUs of one pool's nodes, by partition."""

    def __init__(self, nodes: int, gpus_per_node: int, owners: list[str]) -> None:
        self.gpus_per_node = gpus_per_node
        self.owner = owners  # partition of each node
        full = (1 << gpus_per_node) - 1
        self.free_mask = [full] * nodes
        self.buckets: dict[str, list[list[int]]] = {}
        for node, part in enumerate(owners):
            self._bucket(part)[gpus_per_node].append(node)
        #: A copy kept in step with this one (`follow`): every take and give back is applied to it
        #: too, except on the GPUs of `mirror_skip`. A cycle's preemption-plan view lives there
        #: (engine/cycle.py).
        self.mirror: PoolNodes | None = None
        self.mirror_skip: set[int] = set()

    def follow(self, skip: set[int]) -> PoolNodes:
        """A copy of the free GPUs now, to which every later take and give back of this one is
        applied too, until `unfollow()` — except on the GPUs in `skip` (the caller's set, read at
        each change: GPUs whose state in the copy the caller sets itself)."""
        # Through the constructor: a compiled class (gpucommons._native) has no bare `__new__`.
        copy = PoolNodes(0, self.gpus_per_node, [])
        copy.owner = self.owner
        copy.free_mask = list(self.free_mask)
        copy.buckets = {part: [list(b) for b in bs] for part, bs in self.buckets.items()}
        copy.mirror = None
        copy.mirror_skip = set()
        self.mirror = copy
        self.mirror_skip = skip
        return copy

    def unfollow(self) -> None:
        self.mirror = None
        self.mirror_skip = set()

    def _mirrored(self, placement: tuple[NodeSlice, ...]) -> tuple[NodeSlice, ...]:
        skip = self.mirror_skip
        if not skip:
            return placement
        out = []
        for s in placement:
            kept = tuple(g for g in s.gpu_indices if g not in skip)
            if kept:
                out.append(s if len(kept) == len(s.gpu_indices) else NodeSlice(s.node, kept))
        return tuple(out)

    def _bucket(self, part: str) -> list[list[int]]:
        b = self.buckets.get(part)
        if b is None:
            b = [[] for _ in range(self.gpus_per_node + 1)]
            self.buckets[part] = b
        return b

    def set_out_of_service(self, nodes: frozenset[int]) -> None:
        """Exactly `nodes` take no new work (a backend says they are down or drained); indices
        outside the pool are ignored. Their tasks keep their GPUs until they end."""
        for node, part in enumerate(self.owner):
            blocked = part.startswith(OUT_OF_SERVICE)
            if (node in nodes) == blocked:
                continue
            count = self.free_mask[node].bit_count()
            bucket = self._bucket(part)[count]
            del bucket[bisect_left(bucket, node)]
            self.owner[node] = part.removeprefix(OUT_OF_SERVICE) if blocked else OUT_OF_SERVICE + part
            insort(self._bucket(self.owner[node])[count], node)

    def free_count(self, node: int) -> int:
        return self.free_mask[node].bit_count()

    def _move(self, node: int, old_mask: int, new_mask: int) -> None:
        b = self._bucket(self.owner[node])
        old_list = b[old_mask.bit_count()]
        del old_list[bisect_left(old_list, node)]
        insort(b[new_mask.bit_count()], node)
        self.free_mask[node] = new_mask

    def take(self, placement: tuple[NodeSlice, ...]) -> None:
        gpn = self.gpus_per_node
        for s in placement:
            if not 0 <= s.node < len(self.free_mask):
                raise PlacementError(f"node {s.node} does not exist")
            mask = 0
            for g in s.gpu_indices:
                local = g - s.node * gpn
                if not 0 <= local < gpn:
                    raise PlacementError(f"GPU {g} is not on node {s.node}")
                mask |= 1 << local
            old = self.free_mask[s.node]
            if old & mask != mask:
                raise PlacementError(f"GPUs {list(s.gpu_indices)} of node {s.node} are already held")
            self._move(s.node, old, old & ~mask)
        if self.mirror is not None:
            self.mirror.take(self._mirrored(placement))

    def give_back(self, placement: tuple[NodeSlice, ...]) -> None:
        gpn = self.gpus_per_node
        for s in placement:
            mask = 0
            for g in s.gpu_indices:
                mask |= 1 << (g - s.node * gpn)
            old = self.free_mask[s.node]
            self._move(s.node, old, old | mask)
        if self.mirror is not None:
            self.mirror.give_back(self._mirrored(placement))

    def find(self, gpus: int, part: str, spread: bool = False) -> tuple[NodeSlice, ...] | None:
        """A placement for `gpus` GPUs in the partition, or None. Does not take it.

        `spread` picks, for a task that fits on one node, the node with the most free GPUs
        (kube-scheduler's default LeastAllocated score) instead of the fullest that holds it."""
        if gpus <= 0:
            return ()
        gpn = self.gpus_per_node
        buckets = self.buckets.get(part)
        if buckets is None or gpn <= 0:
            return None
        if gpus <= gpn:
            for k in range(gpn, gpus - 1, -1) if spread else range(gpus, gpn + 1):
                if buckets[k]:
                    node = buckets[k][0]
                    return (NodeSlice(node, self._lowest_free(node, gpus)),)
            return None
        whole = buckets[gpn]
        need = -(-gpus // gpn)
        if len(whole) < need:
            return None
        slices = []
        left = gpus
        for node in whole[:need]:
            n = min(gpn, left)
            slices.append(NodeSlice(node, self._lowest_free(node, n)))
            left -= n
        return tuple(slices)

    def _lowest_free(self, node: int, n: int) -> tuple[int, ...]:
        mask = self.free_mask[node]
        base = node * self.gpus_per_node
        out: list[int] = []
        local = 0
        while len(out) < n:
            if mask >> local & 1:
                out.append(base + local)
            local += 1
        return tuple(out)

    def capacity_of(self, part: str) -> int:
        """GPUs on the partition's nodes, free or not."""
        return self.owner.count(part) * self.gpus_per_node

    def free_in(self, part: str) -> int:
        b = self.buckets.get(part)
        if b is None:
            return 0
        return sum(k * len(nodes) for k, nodes in enumerate(b))

    def largest_free_block(self, part: str) -> int:
        b = self.buckets.get(part)
        if b is None:
            return 0
        for k in range(self.gpus_per_node, 0, -1):
            if b[k]:
                return k
        return 0


class NodeMap:
    """Every pool's nodes, and which partition (dedicated team or shared) each team places in."""

    def __init__(self, policy: Policy) -> None:
        self.pools: dict[str, PoolNodes] = {}
        self.partition: dict[str, str] = {}
        #: GPUs on each (pool, partition)'s nodes.
        self.capacity: dict[tuple[str, str], int] = {}
        for team in policy.teams:
            self.partition[team.name] = team.name if team.isolation is Isolation.DEDICATED else SHARED
        for pool in policy.pools:
            owners = [SHARED] * pool.nodes
            next_node = pool.nodes - 1
            for team in policy.teams:
                if team.isolation is not Isolation.DEDICATED:
                    continue
                nominal = team.nominal(pool.name).gpus
                need = -(-nominal // pool.gpus_per_node) if pool.gpus_per_node else 0
                while need > 0 and next_node >= 0:
                    owners[next_node] = team.name
                    next_node -= 1
                    need -= 1
            nodes = PoolNodes(pool.nodes, pool.gpus_per_node, owners)
            self.pools[pool.name] = nodes
            for part in set(owners):
                self.capacity[(pool.name, part)] = nodes.capacity_of(part)

    def find(self, team: str, pool: str, gpus: int, spread: bool = False) -> tuple[NodeSlice, ...] | None:
        nodes = self.pools.get(pool)
        if nodes is None:
            return None
        return nodes.find(gpus, self.partition.get(team, SHARED), spread)

    def take(self, pool: str, placement: tuple[NodeSlice, ...]) -> None:
        if placement and pool in self.pools:
            self.pools[pool].take(placement)

    def give_back(self, pool: str, placement: tuple[NodeSlice, ...]) -> None:
        if placement and pool in self.pools:
            self.pools[pool].give_back(placement)

    def set_out_of_service(self, pool: str, nodes: frozenset[int]) -> None:
        if pool in self.pools:
            self.pools[pool].set_out_of_service(nodes)

    def partition_capacity(self, team: str, pool: str) -> int:
        """GPUs on the nodes the team may land on in the pool (its own nodes if dedicated)."""
        return self.capacity.get((pool, self.partition.get(team, SHARED)), 0)

    def free_gpus(self, team: str, pool: str) -> int:
        nodes = self.pools.get(pool)
        return nodes.free_in(self.partition.get(team, SHARED)) if nodes else 0

    def largest_free_block(self, team: str, pool: str) -> int:
        nodes = self.pools.get(pool)
        return nodes.largest_free_block(self.partition.get(team, SHARED)) if nodes else 0
