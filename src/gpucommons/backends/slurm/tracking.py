"""Pure decisions of the Slurm executor: engine nodes ↔ Slurm nodes, job → exit status, handles.

The engine numbers a pool's nodes 0..N-1 (`NodeSlice.node`); Slurm names them. The mapping is the
pool's claimed nodes (usable or not) in Slurm's order, so a node going down does not renumber the
others: it becomes out of service under its own index. A pool that declares more nodes than Slurm has
gets its missing indices out of service too, so the engine never places on a node that does not exist.

A handle stores what a restarted server needs: the job id (as the handle's `pid`) and a marker
`slurm:<job id>:<nodes>` (the node count decides how the job is signalled: docs/slurm.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from gpucommons.backends.ports import ExitStatus, ForeignWork, Handle
from gpucommons.backends.slurm.inventory import SlurmInventory
from gpucommons.backends.slurm.jobs import JobPhase, SlurmJob
from gpucommons.backends.slurm.nodes import SlurmNode
from gpucommons.backends.slurm.submit import parse_job_name

_MARKER = re.compile(r"^slurm:(?P<job>\d+):(?P<nodes>\d+)$")


class PlacementError(ValueError):
    """The engine's placement cannot be expressed to Slurm; the message says which node and why."""


def pool_nodes(nodes: Sequence[SlurmNode], inventory: SlurmInventory) -> dict[str, tuple[str, ...]]:
    """Pool → its nodes' names, the engine's node i being the i-th (Slurm's order)."""
    owner: dict[str, str] = {}
    for pool, usable in inventory.usable.items():
        owner.update((n.name, pool) for n in usable)
    for pool, unusable in inventory.unusable.items():
        owner.update((u.node.name, pool) for u in unusable)
    order: dict[str, list[str]] = {pool: [] for pool in inventory.usable}
    for node in nodes:
        if node.name in owner:
            order[owner[node.name]].append(node.name)
    return {pool: tuple(names) for pool, names in order.items()}


def out_of_service(
    inventory: SlurmInventory, order: Mapping[str, Sequence[str]], declared: Mapping[str, int]
) -> dict[str, dict[int, str]]:
    """Pool → engine node index → why it takes no new work (`n2 down`, `n3 drained: maintenance`).

    `declared`: the policy's node count per pool; indices Slurm has no node for are out of service."""
    out: dict[str, dict[int, str]] = {}
    for pool, count in declared.items():
        names = list(order.get(pool, ()))
        index = {name: i for i, name in enumerate(names)}
        bad: dict[int, str] = {}
        for unusable in inventory.unusable.get(pool, ()):
            i = index.get(unusable.node.name)
            if i is not None and i < count:
                reason = f": {unusable.node.reason}" if unusable.node.reason else ""
                bad[i] = f"{unusable.node.name} {unusable.why}{reason}"
        for i in range(len(names), count):
            bad[i] = f"node {i} of pool {pool} has no Slurm node (the policy declares {count})"
        if bad:
            out[pool] = bad
    return out


def placement_nodes(
    pool: str, placement: Sequence[tuple[int, int]], order: Mapping[str, Sequence[str]]
) -> tuple[tuple[str, ...], int]:
    """The Slurm nodes of an engine placement and the GPUs on each (one number: `--gres=gpu:N` is
    per node, so a gang must hold the same count on every node — whole nodes, as the engine gives)."""
    if not placement:
        raise PlacementError(f"pool {pool!r}: the engine gave no node (a task with no GPU has none)")
    names = order.get(pool)
    if names is None:
        raise PlacementError(f"pool {pool!r} has no Slurm nodes (check its `slurm` key and --partition)")
    chosen = []
    for node, _ in placement:
        if not 0 <= node < len(names):
            raise PlacementError(
                f"pool {pool!r} has {len(names)} Slurm nodes; the engine placed on node {node}"
            )
        chosen.append(names[node])
    counts = {gpus for _, gpus in placement}
    if len(counts) != 1:
        raise PlacementError(
            f"a gang over several nodes needs the same GPUs on each, not {[g for _, g in placement]} "
            f"(ask for a multiple of the nodes' GPUs)"
        )
    return tuple(chosen), counts.pop()


def handle_for(task_id: str, job_id: str, nodes: int) -> Handle:
    return Handle(task_id=task_id, pid=int(job_id), start_marker=f"slurm:{job_id}:{nodes}")


def job_of(handle: Handle) -> tuple[str, bool] | None:
    """(job id, several nodes?) of a Slurm handle; None for a handle some other backend made."""
    match = _MARKER.match(handle.start_marker)
    if match is None or int(match["job"]) != handle.pid:
        return None
    return match["job"], int(match["nodes"]) > 1


def exit_status(job: SlurmJob, lost_nodes: Iterable[str] = ()) -> ExitStatus | None:
    """None while the job may still run; how it ended otherwise (COMPLETING with an exit code counts
    as ended: `SlurmJob.script_ended`).

    A job on a node that is down or does not answer is reported lost at once (Slurm would end it in
    NODE_FAIL only after SlurmdTimeout); a job Slurm ended in NODE_FAIL or BOOT_FAIL is lost too."""
    lost = sorted(set(job.nodes) & set(lost_nodes))
    if not job.script_ended:
        if lost and job.phase is JobPhase.RUNNING:
            return ExitStatus(
                code=None, signal=9, lost=f"node {', '.join(lost)} went down under job {job.job_id}"
            )
        return None
    ended = float(job.end_time) if job.end_time is not None else None
    if job.lost_to_the_machine:
        where = ", ".join(job.nodes) or "its node"
        return ExitStatus(
            code=None, signal=9, ended_at=ended, lost=f"Slurm job {job.job_id} ended {job.state} on {where}"
        )
    if job.exit is None:
        return ExitStatus(code=None, signal=9, ended_at=ended)
    if job.exit.signal:
        return ExitStatus(code=None, signal=job.exit.signal, ended_at=ended)
    return ExitStatus(code=job.exit.code, ended_at=ended)


def ours(job: SlurmJob) -> str | None:
    """The task id of a job GPU Commons submitted, None for anyone else's."""
    parsed = parse_job_name(job.name)
    return parsed[0] if parsed else None


def latest_attempt(jobs: Iterable[SlurmJob], task_id: str) -> SlurmJob | None:
    """The newest job GPU Commons submitted for `task_id` (a restarted server re-adopts it)."""
    mine = [j for j in jobs if ours(j) == task_id]
    return max(mine, key=lambda j: int(j.job_id.split("_", 1)[0])) if mine else None


def foreign_work(
    jobs: Iterable[SlurmJob],
    order: Mapping[str, Sequence[str]],
    team_of_account: Mapping[str, str],
    platform_team: str,
    now: float,
) -> tuple[ForeignWork, ...]:
    """Running jobs GPU Commons did not submit that hold GPUs of a pool, as the usage of the team whose
    Slurm account they run under (`platform_team` for an account no team has)."""
    where = {name: (pool, i) for pool, names in order.items() for i, name in enumerate(names)}
    found = []
    for job in jobs:
        if job.phase is not JobPhase.RUNNING or ours(job) is not None or job.gpus <= 0 or not job.nodes:
            continue
        placed = [where[n] for n in job.nodes if n in where]
        pools = {pool for pool, _ in placed}
        if len(pools) != 1 or len(placed) != len(job.nodes):
            continue  # outside every pool, or across pools: not ours to count
        per_node = max(1, job.gpus // len(job.nodes))
        found.append(
            ForeignWork(
                ref=f"slurm:{job.job_id}",
                team=team_of_account.get((job.account or "").lower(), platform_team),
                pool=pools.pop(),
                placement=tuple((i, per_node) for _, i in placed),
                started_at=float(job.start_time) if job.start_time is not None else now,
                name=job.name,
                user=job.user or "",
            )
        )
    return tuple(found)
