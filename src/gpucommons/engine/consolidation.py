"""Consolidation: free a node for a head that waits on fragmentation alone, by moving cheap tasks.

A head whose quota allows it, but for which no node has its GPUs free together (or not enough whole
nodes are free for a gang), waits while the GPUs it needs sit idle in pieces. Under Kueue's rules a
borrower may preempt nobody outside its team, so nothing else in the cycle can unblock it. KAI
scheduler's `consolidation` action is the reference (docs/engine.md, "Consolidation"); ours differs:

- a move is a preemption followed by a requeue, not a live migration, so only tasks that lose little
  are moved (`movable`): preemptible, checkpointed (a task that declared no way to save its state
  would start again from nothing), not leaving already, on one node, at most
  `EngineConfig.consolidation_max_unsaved_gpu_s` of unsaved work (a task that saves on its stop signal
  has none), and running for at least its class's `min_runtime` and `consolidation_min_run_s` since
  its last admission, so no task is moved again before it made progress and moves cannot ping-pong;
- as in KAI, a plan is kept only if, with the head placed, every moved task fits again at once in the
  GPUs left free: a move costs no team quota, so it is never a preemption in disguise;
- it is a step of the same pure cycle on the what-if log: every trial is rolled back, and the cycle
  issues the plan as preemptions for the head (`PreemptReason.CONSOLIDATION`), which then waits for
  its victims like any preemptor.

Of the plans that work, the cheapest is taken: least unsaved work, then fewest GPUs moved, then
fewest tasks, then the lowest node index (deterministic).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpucommons.engine.context import Cycle
from gpucommons.engine.placement import PoolNodes
from gpucommons.engine.types import Placement, RunningTask, TaskRequest

#: Plans tried with the what-if log per head, cheapest first; each trial re-places every moved task.
#: On Philly October (704 / 528 GPUs) 1, 2, 3 and 8 trials gave mean team p95 waits of 0.45 / 19.4,
#: 0.43 / 17.5, 0.47 / 20.3 and 0.46 h: 2 was best at both sizes (docs/benchmarks.md, "Consolidation").
MAX_TRIALS = 2

Cost = tuple[float, int, int, int]


@dataclass(frozen=True, slots=True)
class MovePlan:
    """Tasks to move so that the head fits in `pool`."""

    pool: str
    moved: tuple[RunningTask, ...]


def movable(cy: Cycle, rt: RunningTask) -> bool:
    """Whether a move would cost the task little (module docstring)."""
    task = rt.task
    if rt.preempting or not task.preemptible or not task.checkpointed or task.id in cy.taken:
        return False
    if task.priority_class in cy.never_preempted_classes or len(rt.admission.placement) != 1:
        return False
    if rt.unsaved_gpu_s > cy.config.consolidation_max_unsaved_gpu_s:
        return False
    ran = cy.now - rt.admitted_at
    return ran >= cy.config.consolidation_min_run_s and ran >= cy.min_runtime_s(rt)


def tasks_by_node(cy: Cycle, pool: str) -> dict[int, list[RunningTask]]:
    """The running tasks of `pool` on each node (a gang on several nodes is on each of them), in
    admission order: the cycle's view of who sits where."""
    by_node: dict[int, list[RunningTask]] = {}
    for rt in cy.state.iter_running():
        if rt.admission.pool == pool:
            for sl in rt.admission.placement:
                by_node.setdefault(sl.node, []).append(rt)
    return by_node


def plan_consolidation(
    cy: Cycle, task: TaskRequest, pool: str, by_node: dict[int, list[RunningTask]]
) -> MovePlan | None:
    """The cheapest plan that makes room for `task` in `pool` by moving tasks, or None.

    The caller has checked that the team's quota allows the task there and that no placement exists
    now. Leaves the state as it found it."""
    nodes = cy.state.nodes.pools.get(pool)
    if nodes is None or not cy.config.node_placement:
        return None
    part = cy.state.nodes.partition.get(task.team, "")
    gpus = task.resources.gpus
    if gpus <= 0 or nodes.free_in(part) < gpus:
        return None  # moved tasks need room too: without the GPUs free in all, nothing can work
    candidates = (
        _node_choices(cy, nodes, part, gpus, by_node)
        if gpus <= nodes.gpus_per_node
        else _gang_choices(cy, nodes, part, gpus, by_node)
    )
    for _, moved in sorted(candidates, key=lambda c: c[0])[:MAX_TRIALS]:
        if _replaces(cy, task, pool, moved):
            return MovePlan(pool, moved)
    return None


def _owned(nodes: PoolNodes, part: str) -> Iterable[int]:
    return (n for n, owner in enumerate(nodes.owner) if owner == part)


def _cost(moved: tuple[RunningTask, ...], first_node: int) -> Cost:
    return (
        sum(rt.unsaved_gpu_s for rt in moved),
        sum(rt.task.resources.gpus for rt in moved),
        len(moved),
        first_node,
    )


def _room_elsewhere(nodes: PoolNodes, part: str, emptied: list[int], moved: tuple[RunningTask, ...]) -> bool:
    """What a plan needs before it is worth a trial: the GPUs free outside the nodes it empties hold
    the moved tasks' GPUs, and no moved task is larger than the largest free block (else it could
    only go back where it was: moving an 8-GPU task off a full node for an 8-GPU head is a swap)."""
    outside = nodes.free_in(part) - sum(nodes.free_count(n) for n in emptied)
    largest = nodes.largest_free_block(part)
    return sum(rt.task.resources.gpus for rt in moved) <= outside and all(
        rt.task.resources.gpus <= largest for rt in moved
    )


def _node_choices(
    cy: Cycle, nodes: PoolNodes, part: str, gpus: int, by_node: dict[int, list[RunningTask]]
) -> list[tuple[Cost, tuple[RunningTask, ...]]]:
    """For a head that fits on one node: per node, tasks whose GPUs, with the node's free ones, hold
    it — the smallest one task that is enough, and the fewest tasks (largest first) that are."""
    out: list[tuple[Cost, tuple[RunningTask, ...]]] = []
    for node in _owned(nodes, part):
        short = gpus - nodes.free_count(node)
        if short <= 0:
            continue
        cheap = sorted(
            (rt for rt in by_node.get(node, ()) if movable(cy, rt)),
            key=lambda rt: (rt.unsaved_gpu_s, -rt.task.resources.gpus, rt.task.seq),
        )
        # At most two choices, kept in a list (not a set: hashing running tasks was 4 % of a
        # `commons` replay, and a set's order is the hash's, not a rule's).
        choices: list[tuple[RunningTask, ...]] = []
        enough = [rt for rt in cheap if rt.task.resources.gpus >= short]
        if enough:
            choices.append(
                (min(enough, key=lambda rt: (rt.unsaved_gpu_s, rt.task.resources.gpus, rt.task.seq)),)
            )
        chosen: list[RunningTask] = []
        left = short
        for rt in cheap:
            chosen.append(rt)
            left -= rt.task.resources.gpus
            if left <= 0:
                if not choices or len(chosen) != 1 or chosen[0] is not choices[0][0]:
                    choices.append(tuple(chosen))
                break
        for moved in choices:
            if _room_elsewhere(nodes, part, [node], moved):
                out.append((_cost(moved, node), moved))
    return out


def _gang_choices(
    cy: Cycle, nodes: PoolNodes, part: str, gpus: int, by_node: dict[int, list[RunningTask]]
) -> list[tuple[Cost, tuple[RunningTask, ...]]]:
    """For a gang on several whole nodes: the cheapest nodes to empty, as one choice."""
    gpn = nodes.gpus_per_node
    need = -(-gpus // gpn) - sum(1 for n in _owned(nodes, part) if nodes.free_count(n) == gpn)
    emptiable: list[tuple[Cost, int, tuple[RunningTask, ...]]] = []
    for node in _owned(nodes, part):
        free = nodes.free_count(node)
        if free == gpn:
            continue
        on_node = by_node.get(node, [])
        if free + sum(rt.task.resources.gpus for rt in on_node) != gpn:
            continue  # GPUs held by this cycle's own admissions or claims: not ours to free
        if all(movable(cy, rt) for rt in on_node):
            moved = tuple(on_node)
            emptiable.append((_cost(moved, node), node, moved))
    if need <= 0 or len(emptiable) < need:
        return []
    picked = sorted(emptiable)[:need]
    moved = tuple(rt for _, _, tasks in picked for rt in tasks)
    if not _room_elsewhere(nodes, part, [node for _, node, _ in picked], moved):
        return []
    return [(_cost(moved, picked[0][1]), moved)]


def _replaces(cy: Cycle, task: TaskRequest, pool: str, moved: tuple[RunningTask, ...]) -> bool:
    """With `moved` gone, the head placed, then every moved task placed again (largest first): does
    everything fit? Rolled back either way."""
    whatif = cy.whatif
    mark = whatif.mark()
    spread = cy.config.placement is Placement.SPREAD
    try:
        for rt in moved:
            cy.release(rt)
        placement = cy.state.nodes.find(task.team, pool, task.resources.gpus, spread)
        if placement is None:
            return False
        cy.hold(task.team, pool, task.resources, placement)
        for rt in sorted(moved, key=lambda rt: (-rt.task.resources.gpus, rt.task.seq)):
            again = cy.state.nodes.find(rt.task.team, pool, rt.task.resources.gpus, spread)
            if again is None:
                return False
            cy.hold(rt.task.team, pool, rt.task.resources, again)
        return True
    finally:
        whatif.rollback(mark)
