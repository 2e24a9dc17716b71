"""The engine's view of the cluster: queues, admitted tasks, usage. Mutable, owned by the caller.

The simulator keeps one `ClusterState` up to date event by event; the live server rebuilds one from
the database each cycle. Either way the caller changes it only through the methods below, and
`engine.decide()` only reads it (its what-if changes are undone before it returns).

Everything `decide()` needs per cycle is kept incrementally so that a cycle costs what it examines,
not what the cluster holds: per-team queues sorted by `queue_key`, usage per (team, pool) pushed up
the cohort tree, free GPUs per node in buckets, and which pending task waits for which victims.

Lifecycle, as the caller applies `Decisions`:

    add_pending ──> admit ──> finish                       (succeeded, failed, cancelled)
        │             └──> mark_preempting ──> requeue ──> (pending again, queued_at = now)
        └──> remove_pending                                 (cancelled while waiting)
"""

from __future__ import annotations

import contextlib
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from gpucommons.domain.model import Policy, PriorityClass
from gpucommons.domain.resources import ZERO, Resources
from gpucommons.engine.placement import OUT_OF_SERVICE, NodeMap
from gpucommons.engine.quota import QuotaTree
from gpucommons.engine.types import Admission, Pending, RunningTask, TaskRequest

QueueKey = tuple[int, float, int]

#: The queue of a team with nothing queued (`queue_entries`).
_NO_QUEUE: list[tuple[int, float, int, str]] = []


def queue_key(task: TaskRequest) -> QueueKey:
    """Order within a team's queue: higher priority first, then earlier `queued_at`, then `seq`."""
    return (-task.priority, task.queued_at, task.seq)


def pending_key(task: TaskRequest) -> tuple[str, str]:
    """How the views group a pending task: its team and the one pool it asked for ("" = any)."""
    return task.team, task.pools[0] if len(task.pools) == 1 else ""


def _counter(counters: dict[str, Counter[int]], team: str) -> Counter[int]:
    """The team's counter, made on first use: `setdefault(team, Counter())` would build (in
    Python, `Counter` is not compiled) a counter thrown away at every admission and queued task."""
    found = counters.get(team)
    if found is None:
        found = counters[team] = Counter()
    return found


class ClusterState:
    """Pending and admitted tasks under one policy, with the indexes the engine reads."""

    def __init__(self, policy: Policy) -> None:
        self._pending: dict[str, TaskRequest] = {}
        self._queues: dict[str, list[tuple[int, float, int, str]]] = {}
        self._queue_gpus: dict[str, Counter[int]] = {}
        #: The least of each team's `_queue_gpus` (absent: nothing queued), kept as they change:
        #: a cycle asks it for every head that fails.
        self._min_queue_gpus: dict[str, int] = {}
        self._exempt_pending: Counter[str] = Counter()
        self._explicit_pools: Counter[str] = Counter()
        #: (team, the pool asked for or "" for any of the team's) -> [pending tasks, their GPUs]:
        #: what the published views show, kept here so they need not walk the queue every cycle.
        self._pending_totals: dict[tuple[str, str], list[int]] = {}
        self._running: dict[str, RunningTask] = {}
        self._running_by_team: dict[str, dict[str, None]] = {}
        #: Priorities of each team's admitted tasks (with counts): lets preemption skip a team
        #: none of whose tasks ranks low enough to be a victim, without walking them.
        self._running_priorities: dict[str, Counter[int]] = {}
        #: The least of each team's `_running_priorities` (absent: it runs nothing), kept as they
        #: change: preemption asks it several times for every head that fails, every cycle.
        self._lowest_running: dict[str, int] = {}
        self._victims_of: dict[str, set[str]] = {}
        self._preemptor_of: dict[str, str] = {}
        self._waiting: dict[str, str] = {}  # preemptor id -> pool its victims are in
        self._preemptions: Counter[str] = Counter()
        self._spend: dict[str, int] = {}
        self._decayed: dict[str, tuple[float, float, float]] = {}
        self._decayed_at: float | None = None
        #: Pool → nodes that take no new work (a backend's inventory: down, drained).
        self._out_of_service: dict[str, frozenset[int]] = {}
        #: Bumped on every change to a team's queue, admitted tasks, usage or spend (`team_version`).
        self._team_versions: dict[str, int] = {}
        self.policy = policy
        self._build(policy)

    # --- policy ----------------------------------------------------------------------------------

    def _build(self, policy: Policy) -> None:
        self.policy = policy
        self.quota = QuotaTree(policy)
        self.nodes = NodeMap(policy)
        self._classes: dict[str, PriorityClass] = {c.name: c for c in policy.priority_classes}
        self._clear_derived()
        self._exempt_pending.clear()
        for task in self._pending.values():
            if self._is_budget_exempt(task):
                self._exempt_pending[task.team] += 1
        for rt in self._running.values():
            self.quota.add_usage(rt.task.team, rt.admission.pool, rt.task.resources)
            # A policy with fewer nodes: the task keeps running, unplaced.
            with contextlib.suppress(ValueError):
                self.nodes.take(rt.admission.pool, rt.admission.placement)
        for pool, nodes in self._out_of_service.items():
            self.nodes.set_out_of_service(pool, nodes)

    def _clear_derived(self) -> None:
        #: Answers that depend on the policy and the nodes in service alone, kept across cycles
        #: (a cycle asks them for every head it examines): `Cycle.most_ever` by (isolated, node
        #: placement), then (team, pool); `Cycle.pools_for` by (team, requested pools), and by team
        #: alone for a task that names no pool.
        self.most_ever_cache: dict[tuple[bool, bool], dict[tuple[str, str], Resources]] = {}
        self.pools_cache: dict[tuple[str, tuple[str, ...]], tuple[list[str], list[str]]] = {}
        self.team_pools_cache: dict[str, tuple[list[str], list[str]]] = {}
        #: The policy's lookups a `Cycle` builds (`engine.context.PolicyLookups`).
        self.cycle_lookups: object = None
        #: Under `static`, a team whose every head failed on its own quota alone: the reasons its
        #: tasks were given, with the `team_version` and the `EngineConfig` they were decided at.
        #: While both are the same the next cycle gives them again (engine/cycle.py, `_Scheduler.run`).
        self.failed_teams: dict[str, tuple[int, object, dict[str, Pending]]] = {}

    def set_policy(self, policy: Policy) -> None:
        """Switch to a new policy. Running tasks keep running; their usage is re-counted under it."""
        self._build(policy)

    def set_out_of_service(self, pool: str, nodes: frozenset[int]) -> None:
        """Exactly `nodes` of `pool` take no new work until called again without them (a node that
        is down or drained). Tasks on them keep their GPUs until they end; quotas are unchanged, so a
        task that would fit but for these nodes waits with `no_node_fits`."""
        if nodes:
            self._out_of_service[pool] = frozenset(nodes)
        else:
            self._out_of_service.pop(pool, None)
        self.nodes.set_out_of_service(pool, frozenset(nodes))
        self._clear_derived()

    def out_of_service(self, pool: str) -> frozenset[int]:
        return self._out_of_service.get(pool, frozenset())

    def priority_class(self, name: str) -> PriorityClass | None:
        return self._classes.get(name)

    def team_version(self, team: str) -> int:
        """Changes whenever the team's queue, admitted tasks, usage, preemptions or spend change:
        what a cycle reads of the team when it is confined to its own quota (`static`)."""
        return self._team_versions.get(team, 0)

    def _touch(self, team: str) -> None:
        self._team_versions[team] = self._team_versions.get(team, 0) + 1

    def _is_budget_exempt(self, task: TaskRequest) -> bool:
        cls = self._classes.get(task.priority_class)
        return cls is not None and cls.budget_exempt

    # --- pending ---------------------------------------------------------------------------------

    def add_pending(self, task: TaskRequest) -> None:
        """Queue a task. Its team must be in the policy; its id must be new."""
        if not self.policy.has_team(task.team):
            raise ValueError(f"task {task.id}: unknown team {task.team!r}")
        if task.id in self._pending or task.id in self._running:
            raise ValueError(f"task {task.id} is already known to the engine")
        self._pending[task.id] = task
        self._touch(task.team)
        insort(self._queues.setdefault(task.team, []), (*queue_key(task), task.id))
        _counter(self._queue_gpus, task.team)[task.resources.gpus] += 1
        least = self._min_queue_gpus.get(task.team)
        if least is None or task.resources.gpus < least:
            self._min_queue_gpus[task.team] = task.resources.gpus
        if self._is_budget_exempt(task):
            self._exempt_pending[task.team] += 1
        if task.pools:
            self._explicit_pools[task.team] += 1
        totals = self._pending_totals.setdefault(pending_key(task), [0, 0])
        totals[0] += 1
        totals[1] += task.resources.gpus

    def remove_pending(self, task_id: str) -> TaskRequest:
        """Take a pending task out of its queue (cancelled, or about to be admitted)."""
        task = self._pending.pop(task_id, None)
        if task is None:
            raise KeyError(f"task {task_id} is not pending")
        self._touch(task.team)
        queue = self._queues[task.team]
        entry = (*queue_key(task), task.id)
        del queue[bisect_left(queue, entry)]
        gpus = self._queue_gpus[task.team]
        gpus[task.resources.gpus] -= 1
        if gpus[task.resources.gpus] == 0:
            del gpus[task.resources.gpus]
            if gpus:
                self._min_queue_gpus[task.team] = min(gpus)
            else:
                self._min_queue_gpus.pop(task.team, None)
        if self._is_budget_exempt(task):
            self._exempt_pending[task.team] -= 1
        if task.pools:
            self._explicit_pools[task.team] -= 1
        key = pending_key(task)
        totals = self._pending_totals[key]
        totals[0] -= 1
        totals[1] -= task.resources.gpus
        if totals[0] == 0:
            del self._pending_totals[key]
        self._drop_reservation(task_id)
        return task

    # --- running ---------------------------------------------------------------------------------

    def admit(self, task_id: str, admission: Admission, now: float) -> RunningTask:
        """Pending -> running: the task holds `admission` from `now` on."""
        if task_id not in self._pending:
            raise KeyError(f"task {task_id} is not pending")
        task = self._pending[task_id]
        if self.quota.quota(task.team, admission.pool) is None:
            raise ValueError(f"task {task_id}: team {task.team} has no quota in pool {admission.pool!r}")
        self.nodes.take(admission.pool, admission.placement)  # raises before any change on a clash
        self.advance_usage(now)
        self.remove_pending(task_id)
        rt = RunningTask(task=task, admission=admission, admitted_at=now)
        self._running[task_id] = rt
        self._running_by_team.setdefault(task.team, {})[task_id] = None
        _counter(self._running_priorities, task.team)[task.priority] += 1
        lowest = self._lowest_running.get(task.team)
        if lowest is None or task.priority < lowest:
            self._lowest_running[task.team] = task.priority
        self.quota.add_usage(task.team, admission.pool, task.resources)
        return rt

    def mark_preempting(self, task_id: str, preemptor_id: str | None = None) -> None:
        """A preemption was issued: the task still holds its resources but is never a victim again.

        Pass the `Preempt.preemptor_id` so the engine keeps the preemptor's claim on what the victim
        frees (docs/design.md, trap 1); without it the freed GPUs are open to whoever is first in the
        next cycle.
        """
        rt = self._running.get(task_id)
        if rt is None:
            raise KeyError(f"task {task_id} is not running")
        self._touch(rt.task.team)
        if not rt.preempting:
            self._running[task_id] = rt.marked_preempting()
        if preemptor_id is not None and preemptor_id in self._pending:
            self._touch(self._pending[preemptor_id].team)
            self._preemptor_of[task_id] = preemptor_id
            self._victims_of.setdefault(preemptor_id, set()).add(task_id)
            self._waiting[preemptor_id] = rt.admission.pool

    def _release(self, task_id: str, now: float | None) -> RunningTask:
        rt = self._running.pop(task_id, None)
        if rt is None:
            raise KeyError(f"task {task_id} is not running")
        if now is not None:
            self.advance_usage(now)
        self._touch(rt.task.team)
        del self._running_by_team[rt.task.team][task_id]
        priorities = self._running_priorities[rt.task.team]
        priorities[rt.task.priority] -= 1
        if priorities[rt.task.priority] == 0:
            del priorities[rt.task.priority]
            if priorities:
                self._lowest_running[rt.task.team] = min(priorities)
            else:
                self._lowest_running.pop(rt.task.team, None)
        self.quota.add_usage(rt.task.team, rt.admission.pool, ZERO - rt.task.resources)
        self.nodes.give_back(rt.admission.pool, rt.admission.placement)
        preemptor = self._preemptor_of.pop(task_id, None)
        if preemptor is not None:
            self._victims_of.get(preemptor, set()).discard(task_id)
            waiting = self._pending.get(preemptor)
            if waiting is not None:
                self._touch(waiting.team)
        self._drop_reservation(task_id)
        return rt

    def requeue(self, task_id: str, now: float) -> TaskRequest:
        """Running/preempting -> pending again, queued at `now` (a stopped victim, a lost node)."""
        rt = self._release(task_id, now)
        if rt.preempting:
            self._preemptions[task_id] += 1
        task = rt.task.queued_again(now)
        self.add_pending(task)
        return task

    def finish(self, task_id: str, now: float | None = None) -> RunningTask:
        """Running/preempting -> gone (succeeded, failed, cancelled)."""
        rt = self._release(task_id, now)
        self._preemptions.pop(task_id, None)
        return rt

    def set_unsaved_work(self, task_id: str, unsaved_gpu_s: float) -> None:
        """Record GPU-seconds of work since the task's last saved state (checkpoint-aware victims)."""
        rt = self._running.get(task_id)
        if rt is None:
            raise KeyError(f"task {task_id} is not running")
        self._touch(rt.task.team)
        self._running[task_id] = rt.with_unsaved_work(unsaved_gpu_s)

    def set_preemption_count(self, task_id: str, count: int) -> None:
        """Restore how many times a known task was preempted (a server rebuilding its state after a
        restart), so min-runtime protection still knows it needs progress before the next one."""
        if task_id not in self._pending and task_id not in self._running:
            raise KeyError(f"task {task_id} is neither pending nor running")
        known = self._pending.get(task_id)
        self._touch(known.team if known is not None else self._running[task_id].task.team)
        if count > 0:
            self._preemptions[task_id] = count
        else:
            self._preemptions.pop(task_id, None)

    def set_team_spend(self, team: str, spent_cents: int) -> None:
        """What the team has spent this month, for hard budgets."""
        self._touch(team)
        self._spend[team] = spent_cents

    def _drop_reservation(self, task_id: str) -> None:
        self._waiting.pop(task_id, None)
        for victim in self._victims_of.pop(task_id, set()):
            self._preemptor_of.pop(victim, None)

    # --- decayed usage (fair share with a half-life) -------------------------------------------

    def advance_usage(self, now: float) -> None:
        """Decay each team's remembered usage up to `now` (no-op without a usage half-life).

        The remembered usage is an exponential moving average of GPU/CPU/memory held, exact for
        usage that is constant between calls: U(t1) = u + (U(t0) − u)·2^(−(t1−t0)/half_life).
        Called by `admit`/`requeue`/`finish(now=…)`; callers may call it before `decide` too.
        """
        half_life = self.policy.scheduling.usage_half_life_s
        if half_life <= 0:
            return
        if self._decayed_at is None:
            self._decayed_at = now
            for team in self.policy.team_names:
                u = self.team_usage(team)
                self._decayed[team] = (float(u.gpus), float(u.cpu_milli), float(u.memory_mib))
            return
        dt = now - self._decayed_at
        if dt <= 0:
            return
        factor = 0.5 ** (dt / half_life)
        for team in self.policy.team_names:
            u = self.team_usage(team)
            old = self._decayed.get(team, (0.0, 0.0, 0.0))
            cur = (float(u.gpus), float(u.cpu_milli), float(u.memory_mib))
            self._decayed[team] = (
                cur[0] + (old[0] - cur[0]) * factor,
                cur[1] + (old[1] - cur[1]) * factor,
                cur[2] + (old[2] - cur[2]) * factor,
            )
        self._decayed_at = now

    def usage_memory(self) -> tuple[float | None, dict[str, tuple[float, float, float]]]:
        """When the decayed usage was last brought up to date, and each team's then: what a copy
        of this state must carry over to order teams alike (`None`: nothing remembered yet)."""
        return self._decayed_at, dict(self._decayed)

    def restore_usage_memory(self, at: float, decayed: Mapping[str, tuple[float, float, float]]) -> None:
        """Take each team's decayed usage as of `at`, replacing what admissions remembered so far.

        For a state built again from what it holds (a replica; a restarted server, from its ledger:
        `decayed_usage_from_history`): re-admitting the running tasks alone would forget who used
        the cluster lately, and fair-share order with a half-life would change across a restart."""
        if self.policy.scheduling.usage_half_life_s <= 0:
            return
        self._decayed = {team: decayed.get(team, (0.0, 0.0, 0.0)) for team in self.policy.team_names}
        self._decayed_at = at
        for team in self.policy.team_names:
            self._touch(team)

    def decayed_usage(self, team: str) -> tuple[float, float, float]:
        """The team's usage for fair-share ordering: decayed if a half-life is set, else current."""
        if self.policy.scheduling.usage_half_life_s > 0 and team in self._decayed:
            return self._decayed[team]
        u = self.team_usage(team)
        return (float(u.gpus), float(u.cpu_milli), float(u.memory_mib))

    # --- read side -------------------------------------------------------------------------------

    def pending(self, task_id: str) -> TaskRequest | None:
        return self._pending.get(task_id)

    def running(self, task_id: str) -> RunningTask | None:
        return self._running.get(task_id)

    def iter_pending(self, team: str | None = None) -> Iterator[TaskRequest]:
        """Pending tasks, each team's in queue order (teams in policy order)."""
        teams = [team] if team is not None else list(self.policy.team_names)
        for t in teams:
            for entry in self._queues.get(t, ()):
                yield self._pending[entry[3]]

    def iter_running(self, team: str | None = None) -> Iterator[RunningTask]:
        """Admitted tasks (running or being preempted), in admission order."""
        if team is None:
            yield from self._running.values()
            return
        for task_id in self._running_by_team.get(team, ()):
            yield self._running[task_id]

    def queue_ids(self, team: str) -> list[str]:
        """The team's pending task ids in queue order (a copy)."""
        return [e[3] for e in self._queues.get(team, ())]

    def queue_entry(self, team: str, index: int) -> TaskRequest | None:
        queue = self._queues.get(team)
        if not queue or index >= len(queue):
            return None
        return self._pending[queue[index][3]]

    def queue_entries(self, team: str) -> list[tuple[int, float, int, str]]:
        """The team's queue itself, in order: (−priority, queued_at, seq, task id) per task, the id
        to look up with `pending_tasks`. Shared, not copied: callers must not change it (a cycle
        walks it for every team, where a generator cost more than the walk)."""
        return self._queues.get(team, _NO_QUEUE)

    def pending_tasks(self) -> dict[str, TaskRequest]:
        """Pending tasks by id. Shared, not copied: callers must not change it."""
        return self._pending

    def queue_length(self, team: str) -> int:
        return len(self._queues.get(team, ()))

    def pending_count(self, team: str | None = None) -> int:
        if team is None:
            return len(self._pending)
        return len(self._queues.get(team, ()))

    def running_count(self, team: str | None = None) -> int:
        if team is None:
            return len(self._running)
        return len(self._running_by_team.get(team, ()))

    def min_running_priority(self, team: str) -> int | None:
        """The lowest priority among the team's admitted tasks; None if it runs nothing."""
        return self._lowest_running.get(team)

    def min_pending_gpus(self, team: str) -> int:
        return self._min_queue_gpus.get(team, 0)

    def exempt_pending(self, team: str) -> int:
        """Pending tasks of the team whose class is exempt from budgets."""
        return self._exempt_pending.get(team, 0)

    def pending_totals(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(team, pool asked for; "" = any of the team's pools) -> (pending tasks, their GPUs)."""
        return {key: (n, gpus) for key, (n, gpus) in self._pending_totals.items()}

    def explicit_pool_pending(self, team: str) -> int:
        """Pending tasks of the team that name their own pools."""
        return self._explicit_pools.get(team, 0)

    def usage(self, team: str, pool: str) -> Resources:
        """What the team holds in the pool (admitted and preempting tasks)."""
        return self.quota.usage.get((team, pool), ZERO)

    def team_usage(self, team: str) -> Resources:
        total = ZERO
        for pool in self.quota.team_pools.get(team, ()):
            total = total + self.quota.usage[(team, pool)]
        return total

    def borrowed(self, team: str, pool: str) -> Resources:
        """Usage above nominal quota in the pool."""
        return self.quota.borrowing(team, pool)

    def free_gpus(self, pool: str) -> int:
        """Free GPUs on the pool's nodes (placement view; all partitions)."""
        nodes = self.nodes.pools.get(pool)
        if nodes is None:
            return 0
        return sum(nodes.free_in(part) for part in nodes.buckets if not part.startswith(OUT_OF_SERVICE))

    def team_spend(self, team: str) -> int:
        return self._spend.get(team, 0)

    def waiting_preemptors(self) -> dict[str, str]:
        """Pending tasks that preempted others and keep a claim on what they free: id -> pool."""
        return dict(self._waiting)

    def victims_of(self, preemptor_id: str) -> frozenset[str]:
        """Victims still stopping for this preemptor."""
        return frozenset(self._victims_of.get(preemptor_id, ()))

    def preemptor_of(self, victim_id: str) -> str | None:
        return self._preemptor_of.get(victim_id)

    def preempted_before(self) -> Mapping[str, int]:
        """Task id -> times preempted, for tasks preempted at least once (read-only view)."""
        return MappingProxyType(self._preemptions)

    def preemption_count(self, task_id: str) -> int:
        """How many times the task was preempted (and requeued) so far."""
        return self._preemptions.get(task_id, 0)

    def fingerprint(self) -> tuple[object, ...]:
        """A value that changes whenever anything `decide()` reads changes (tests compare it)."""
        return (
            self.policy,
            tuple(sorted(self._pending.items())),
            tuple((k, tuple(v)) for k, v in sorted(self._queues.items())),
            tuple(sorted(self._running.items())),
            tuple(sorted(self.quota.usage.items())),
            tuple(sorted(self.quota.cohort_usage.items())),
            tuple((p, tuple(n.free_mask), repr(n.buckets)) for p, n in sorted(self.nodes.pools.items())),
            tuple(sorted((k, tuple(sorted(v))) for k, v in self._victims_of.items())),
            tuple(sorted(self._waiting.items())),
            tuple(sorted(self._preemptions.items())),
            tuple(sorted(self._spend.items())),
            tuple(sorted(self._decayed.items())),
            tuple(sorted(self._out_of_service.items())),
        )


def decayed_usage_from_history(
    spans: Iterable[tuple[str, float, float | None, Resources]], now: float, half_life_s: float
) -> dict[str, tuple[float, float, float]]:
    """Each team's decayed usage at `now` from what it held and when: `(team, start, end or None
    while held, resources)`.

    The closed form of `ClusterState.advance_usage` from a state that remembered nothing: usage `u`
    held over [a, b] weighs u·(2^(−(now−b)/h) − 2^(−(now−a)/h)) at `now`. A server keeps no
    decayed figure in its store; this rebuilds it from the ledger after a restart."""
    totals: dict[str, list[float]] = {}
    for team, start, end, res in spans:
        stop = now if end is None else min(end, now)
        if stop <= start:
            continue
        weight = 0.5 ** ((now - stop) / half_life_s) - 0.5 ** ((now - start) / half_life_s)
        acc = totals.setdefault(team, [0.0, 0.0, 0.0])
        acc[0] += res.gpus * weight
        acc[1] += res.cpu_milli * weight
        acc[2] += res.memory_mib * weight
    return {team: (acc[0], acc[1], acc[2]) for team, acc in totals.items()}
