"""The engine's inputs and outputs: the contract between the engine and its two callers.

The live scheduler (server) and the simulator (sim) both build an `engine.state.ClusterState`,
call `engine.decide(state, now, config)` and apply the `Decisions` they get back. `decide` never
mutates the state; callers apply decisions through the state's own methods.

Fields may be added (with defaults); none may be renamed: sim and server rely on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from gpucommons.domain.resources import ZERO, Resources


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What the engine needs to know of a task that wants (or holds) resources."""

    id: str
    team: str
    resources: Resources
    priority: int
    priority_class: str
    #: Global submission sequence number: breaks every tie, so decisions are reproducible.
    seq: int
    #: When the task (re)entered its queue, in seconds on the caller's clock. Queue order within a
    #: team is priority (high first), then `queued_at`, then `seq`.
    queued_at: float
    #: Pools the task may run in; empty = the team's pools in the order the team lists them.
    pools: tuple[str, ...] = ()
    #: False for classes that are never preempted (e.g. production).
    preemptible: bool = True
    #: Whether the task saves its state (on its stop signal or every so often), so that stopping it
    #: loses only the work since its last save. Consolidation moves only such tasks: a task that
    #: never saves would start again from nothing.
    checkpointed: bool = False

    def __init__(
        self,
        id: str,
        team: str,
        resources: Resources,
        priority: int,
        priority_class: str,
        seq: int,
        queued_at: float,
        pools: tuple[str, ...] = (),
        preemptible: bool = True,
        checkpointed: bool = False,
    ) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "team", team)
        object.__setattr__(self, "resources", resources)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "priority_class", priority_class)
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "queued_at", queued_at)
        object.__setattr__(self, "pools", pools)
        object.__setattr__(self, "preemptible", preemptible)
        object.__setattr__(self, "checkpointed", checkpointed)

    # The copies the state makes, written out rather than `dataclasses.replace`, which inspects the
    # fields in Python at every call (each preemption, each requeue). Every field is passed on.

    def queued_again(self, queued_at: float) -> TaskRequest:
        """The same task, back in its queue at `queued_at`."""
        return TaskRequest(
            self.id,
            self.team,
            self.resources,
            self.priority,
            self.priority_class,
            self.seq,
            queued_at,
            self.pools,
            self.preemptible,
            self.checkpointed,
        )


@dataclass(frozen=True, slots=True)
class NodeSlice:
    """The part of one node that an admission holds.

    `node` is the node's index in its pool; `gpu_indices` number GPUs across the whole pool, not
    within the node: node n's local GPU i is `n × gpus_per_node + i` (so node 1 of an 8-GPU pool
    holds 8..15). Every consumer uses these pool-wide numbers as they are.
    """

    node: int
    gpu_indices: tuple[int, ...]

    def __init__(self, node: int, gpu_indices: tuple[int, ...]) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "gpu_indices", gpu_indices)


@dataclass(frozen=True, slots=True)
class Admission:
    """Where a task was admitted: pool, placement (empty when node placement is off), borrowing."""

    pool: str
    placement: tuple[NodeSlice, ...] = ()
    #: The part of the request above the team's nominal quota at the moment of admission.
    borrowed: Resources = ZERO

    def __init__(self, pool: str, placement: tuple[NodeSlice, ...] = (), borrowed: Resources = ZERO) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "pool", pool)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "borrowed", borrowed)


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task that holds resources: admitted, running, or being preempted (still holding them)."""

    task: TaskRequest
    admission: Admission
    admitted_at: float
    #: True once a preemption was issued: it holds its resources until it stops, and is never
    #: chosen as a victim again.
    preempting: bool = False
    #: GPU-seconds of work since its last saved state (checkpoint-aware victim choice).
    unsaved_gpu_s: float = 0.0

    def __init__(
        self,
        task: TaskRequest,
        admission: Admission,
        admitted_at: float,
        preempting: bool = False,
        unsaved_gpu_s: float = 0.0,
    ) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "admission", admission)
        object.__setattr__(self, "admitted_at", admitted_at)
        object.__setattr__(self, "preempting", preempting)
        object.__setattr__(self, "unsaved_gpu_s", unsaved_gpu_s)

    # Copies written out rather than `dataclasses.replace` (see `TaskRequest.queued_again`).

    def marked_preempting(self) -> RunningTask:
        """The same task, being preempted."""
        return RunningTask(self.task, self.admission, self.admitted_at, True, self.unsaved_gpu_s)

    def with_unsaved_work(self, unsaved_gpu_s: float) -> RunningTask:
        """The same task with `unsaved_gpu_s` of work since its last saved state."""
        return RunningTask(self.task, self.admission, self.admitted_at, self.preempting, unsaved_gpu_s)


class PreemptReason(StrEnum):
    WITHIN_TEAM = "within_team"
    RECLAIM = "reclaim"
    BORROW_WITHIN_COHORT = "borrow_within_cohort"
    FAIR_SHARE = "fair_share"
    #: Moved off a node so that a task waiting on fragmentation alone fits (engine/consolidation.py).
    CONSOLIDATION = "consolidation"


@dataclass(frozen=True, slots=True)
class Admit:
    task_id: str
    admission: Admission
    message: str = ""

    def __init__(self, task_id: str, admission: Admission, message: str = "") -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "task_id", task_id)
        object.__setattr__(self, "admission", admission)
        object.__setattr__(self, "message", message)


@dataclass(frozen=True, slots=True)
class Preempt:
    victim_id: str
    preemptor_id: str
    reason: PreemptReason
    message: str = ""

    def __init__(self, victim_id: str, preemptor_id: str, reason: PreemptReason, message: str = "") -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "victim_id", victim_id)
        object.__setattr__(self, "preemptor_id", preemptor_id)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "message", message)


class PendingCode(StrEnum):
    """Why a task waits. The message says the same for a person."""

    QUOTA_EXHAUSTED = "quota_exhausted"  # at nominal + borrow limit
    NO_IDLE_TO_BORROW = "no_idle_to_borrow"  # cohort has nothing lendable left
    NEVER_FITS = "never_fits"  # request above the most the team may ever hold
    NO_NODE_FITS = "no_node_fits"  # quota would allow it, but no node placement exists now
    WAITING_FOR_PREEMPTION = "waiting_for_preemption"  # victims are being evicted for it
    BEHIND_HEAD = "behind_head"  # strict FIFO: waits behind an older task of its team
    NOT_CONSIDERED = "not_considered"  # not reached in this cycle (one admission per team per cycle)
    BUDGET_EXHAUSTED = "budget_exhausted"
    UNKNOWN_POOL = "unknown_pool"
    #: The cluster's own admission (Kueue) decides; the message is what it says.
    CLUSTER_ADMISSION = "cluster_admission"


class Pending:
    """Why a task waits: a code, and the same in a sentence for a person (`message`).

    The sentence is given ready-made, or (`Pending.later`) as a function and the values it needs,
    formatted the first time `message` is read. A cycle writes a reason for every head that fails
    (a replay of the Philly trace a million of them) and almost none is ever read: the simulator
    reports only the last ones, the server those it shows. The values are captured when the reason
    is written (numbers, names, immutable `Resources`, other reasons), never live state, so the
    sentence is the one formatting at once would have given. Immutable; equal and hashed by
    (code, message), as the frozen dataclass it replaces.
    """

    code: PendingCode
    _message: str | None
    _render: Callable[..., str] | None
    _args: tuple[object, ...]

    def __init__(self, code: PendingCode, message: str) -> None:
        self.code = code
        self._message = message
        self._render = None
        self._args = ()

    @staticmethod
    def later(code: PendingCode, render: Callable[..., str], args: tuple[object, ...]) -> Pending:
        """A reason whose sentence is `render(*args)`, formatted when first read."""
        reason = Pending(code, "")
        reason._message = None
        reason._render = render
        reason._args = args
        return reason

    @property
    def message(self) -> str:
        text = self._message
        if text is None:
            render = self._render
            assert render is not None
            text = self._message = render(*self._args)
            self._render, self._args = None, ()  # the values are no longer needed
        return text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pending):
            return NotImplemented
        return self.code == other.code and self.message == other.message

    def __hash__(self) -> int:
        return hash((self.code, self.message))

    def __repr__(self) -> str:
        return f"Pending(code={self.code!r}, message={self.message!r})"


@dataclass(frozen=True, slots=True)
class Decisions:
    """The outcome of one scheduling cycle."""

    admit: tuple[Admit, ...] = ()
    preempt: tuple[Preempt, ...] = ()
    pending: dict[str, Pending] = field(default_factory=dict)

    def __init__(
        self,
        admit: tuple[Admit, ...] = (),
        preempt: tuple[Preempt, ...] = (),
        pending: dict[str, Pending] | None = None,
    ) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted): one per cycle.
        object.__setattr__(self, "admit", admit)
        object.__setattr__(self, "preempt", preempt)
        object.__setattr__(self, "pending", {} if pending is None else pending)

    @property
    def empty(self) -> bool:
        return not self.admit and not self.preempt


class FairShareStrategy(StrEnum):
    """Kueue's fair-sharing preemption strategies (KEP-1714, `fairsharing/strategy.go`)."""

    #: S2-a: preempt if the preemptor's share with the new task ≤ the target's share without the victim.
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    #: S2-b: preempt if the preemptor's share with the new task < the target's share before preemption.
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


#: Kueue's default: try S2-a, then fall back to S2-b.
DEFAULT_FAIR_SHARE_STRATEGIES = (
    FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairShareStrategy.LESS_THAN_INITIAL_SHARE,
)


class Placement(StrEnum):
    """Where admitted tasks land on nodes (`engine.placement`)."""

    #: Quota only: no nodes, as Kueue alone counts (a bound no real cluster reaches).
    NONE = "none"
    #: kube-scheduler's default scoring (LeastAllocated): the node with the most free GPUs.
    SPREAD = "spread"
    #: Best fit (MostAllocated): the fullest node that still holds the task.
    PACK = "pack"


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Switches for our extensions; `kueue()` turns them all off so the engine behaves as Kueue."""

    #: Several admissions per team per cycle (Kueue admits one head per ClusterQueue per cycle).
    multi_admit: bool = True
    #: Among victims of equal priority, the least unsaved work goes first (Kueue: most recent first).
    checkpoint_aware: bool = True
    #: Borrowed capacity runs at least its class's min_runtime before borrow-within-cohort or
    #: fair-share preemption may take it; no task is preempted twice without progress.
    min_runtime_protection: bool = True
    #: Where tasks land on concrete nodes/GPUs (a task that fits on one node lands on one node);
    #: `none` counts quota alone.
    placement: Placement = Placement.PACK
    #: No sharing at all: each team confined to its nominal quota (the `static` baseline).
    static: bool = False
    #: Admission holds dollar budgets (`hard` budgets); the caller supplies what each team has spent.
    enforce_budgets: bool = True
    #: Fair-share mode: the preemption strategies, tried in order (Kueue's default pair).
    fair_share_strategies: tuple[FairShareStrategy, ...] = DEFAULT_FAIR_SHARE_STRATEGIES
    #: Move cheap tasks off a node when a head waits on fragmentation alone (engine/consolidation.py);
    #: needs node placement. Off in Kueue (it has no such step) and in the `static` baseline.
    consolidation: bool = True
    #: The most unsaved work (GPU-seconds) a task may lose by a move: 15 GPU-minutes.
    consolidation_max_unsaved_gpu_s: float = 900.0
    #: A task is moved only after running this long since its last admission (and its class's
    #: min_runtime): no task moves twice without progress, and moves cannot ping-pong.
    consolidation_min_run_s: float = 300.0

    @property
    def node_placement(self) -> bool:
        """Whether tasks are placed on concrete nodes at all (any mode but `none`)."""
        return self.placement is not Placement.NONE

    @classmethod
    def commons(cls) -> EngineConfig:
        return cls()

    @classmethod
    def kueue(cls) -> EngineConfig:
        return cls(
            multi_admit=False,
            checkpoint_aware=False,
            min_runtime_protection=False,
            placement=Placement.NONE,
            enforce_budgets=False,
            consolidation=False,
        )

    @classmethod
    def static_partition(cls) -> EngineConfig:
        return cls(static=True, consolidation=False)

    @classmethod
    def named(cls, name: str) -> EngineConfig:
        """`commons`, `kueue` or `static`, as `commons simulate --engine` names them, optionally
        with a placement mode after a `+` (`kueue+spread`: Kueue as kube-scheduler places it)."""
        factories = {"commons": cls.commons, "kueue": cls.kueue, "static": cls.static_partition}
        base, plus, mode = name.partition("+")
        if base not in factories:
            raise ValueError(f"unknown engine {base!r}; choose one of: {', '.join(factories)}")
        config = factories[base]()
        if plus:
            config = replace(config, placement=parse_placement(mode))
        return config


def parse_placement(mode: str) -> Placement:
    """A placement mode by name, or a ValueError naming the choices."""
    try:
        return Placement(mode)
    except ValueError:
        choices = ", ".join(m.value for m in Placement)
        raise ValueError(f"unknown placement {mode!r}; choose one of: {choices}") from None
