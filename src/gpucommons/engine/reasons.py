"""Why a task waits, and why a task was admitted or preempted: in sentences a person understands.

The server shows these in the queue view and the simulator in its reports, so each names the team,
the pool's GPU type, the numbers, and the rule that applied.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucommons.domain.model import SchedulingMode
from gpucommons.domain.money import format_cents
from gpucommons.domain.resources import UNLIMITED, Resources
from gpucommons.engine.context import Cycle
from gpucommons.engine.types import Admission, Pending, PendingCode, PreemptReason, RunningTask, TaskRequest


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def _res(r: Resources) -> str:
    return r.describe()


def never_fits_limit(cy: Cycle, task: TaskRequest, pool: str) -> Resources | None:
    """The most the team may ever hold in the pool, if the task's request is above it; else None."""
    most = cy.most_ever(task.team, pool)
    return None if task.resources.fits_in(most) else most


def pending_reason(cy: Cycle, task: TaskRequest, pool: str, allowed: bool | None = None) -> Pending:
    """Why `task` cannot be admitted in `pool` right now (without preemption). `allowed`: whether
    quota allows the request there, if the caller has just asked.

    The code is decided here; the sentence is formatted only if read (`Pending.later`), from the
    numbers as they are now."""
    team, req = task.team, task.resources
    q = cy.quota.quota(team, pool)
    if q is None:
        return Pending.later(PendingCode.UNKNOWN_POOL, _no_quota_text, (team, pool))
    most = never_fits_limit(cy, task, pool)
    if most is not None:
        return Pending.later(PendingCode.NEVER_FITS, _never_fits_text, (team, pool, req, most))
    gpu = cy.gpu_type(pool)
    if allowed is None:
        allowed = cy.quota.allows(team, pool, req, cy.isolated)
    if allowed:
        pool_obj = cy.pool(pool)
        gpn = pool_obj.gpus_per_node if pool_obj is not None else 0
        if gpn and req.gpus > gpn:
            return Pending.later(PendingCode.NO_NODE_FITS, _whole_nodes_text, (-(-req.gpus // gpn), gpu))
        block = cy.state.nodes.largest_free_block(team, pool)
        return Pending.later(PendingCode.NO_NODE_FITS, _fragmented_text, (gpu, req.gpus, block))
    used = cy.quota.usage[(team, pool)]
    uses = (team, used.gpus, q.nominal.gpus, gpu)
    if cy.isolated or cy.quota.team_parent.get(team) is None:
        return Pending.later(PendingCode.QUOTA_EXHAUSTED, _no_borrowing_text, (uses, req.gpus, cy.isolated))
    # `(used + req).fits_in(limit)` in integers: a head that fails gets here every cycle.
    bl, n = q.borrow_limit, q.nominal
    g, c, m = used.gpus + req.gpus, used.cpu_milli + req.cpu_milli, used.memory_mib + req.memory_mib
    if not (g <= n.gpus + bl.gpus and c <= n.cpu_milli + bl.cpu_milli and m <= n.memory_mib + bl.memory_mib):
        return Pending.later(PendingCode.QUOTA_EXHAUSTED, _borrow_limit_text, (uses, req.gpus, bl.gpus))
    cohort = cy.quota.team_parent.get(team)
    idle = max(0, cy.quota.cohort_idle_gpus(team, pool))
    if g <= n.gpus and c <= n.cpu_milli and m <= n.memory_mib:
        return Pending.later(PendingCode.NO_IDLE_TO_BORROW, _quota_lent_text, (uses, cohort, idle, req.gpus))
    return Pending.later(PendingCode.NO_IDLE_TO_BORROW, _no_idle_text, (uses, cohort, idle, req.gpus))


# The sentences of `pending_reason`, one function each, given the values it captured.


def _no_quota_text(team: str, pool: str) -> str:
    return f"team {team} has no quota in pool {pool}"


def _never_fits_text(team: str, pool: str, req: Resources, most: Resources) -> str:
    return f"needs {_res(req)} but the most team {team} may ever hold in pool {pool} is {_res(most)}"


def _whole_nodes_text(need: int, gpu: str) -> str:
    return f"quota allows it, but it needs {need} whole free {gpu} nodes and fewer are free"


def _fragmented_text(gpu: str, gpus: int, block: int) -> str:
    return (
        f"quota allows it, but no {gpu} node has {_gpus(gpus)} free together "
        f"(the largest free block is {block})"
    )


def _uses_text(uses: tuple[str, int, int, str]) -> str:
    team, used, nominal, gpu = uses
    return f"team {team} uses {used}/{nominal} {gpu} GPUs"


def _no_borrowing_text(uses: tuple[str, int, int, str], gpus: int, isolated: bool) -> str:
    why = "the static engine" if isolated else "a dedicated team"
    return f"{_uses_text(uses)} and needs {_gpus(gpus)}; {why} never borrows beyond its nominal quota"


def _borrow_limit_text(uses: tuple[str, int, int, str], gpus: int, limit: int) -> str:
    if limit == 0:
        tail = "and may not borrow"
    elif limit >= UNLIMITED:
        tail = "and has reached its borrow limit"
    else:
        tail = f"and has reached its borrow limit of {limit}"
    return f"{_uses_text(uses)} {tail}; needs {_gpus(gpus)} more"


def _quota_lent_text(uses: tuple[str, int, int, str], cohort: str | None, idle: int, gpus: int) -> str:
    return (
        f"{_uses_text(uses)}; the rest of its quota is lent out and cohort {cohort} has only "
        f"{idle} idle {uses[3]} GPUs for a request of {gpus}"
    )


def _no_idle_text(uses: tuple[str, int, int, str], cohort: str | None, idle: int, gpus: int) -> str:
    return (
        f"no idle {uses[3]} left to borrow in cohort {cohort} ({_uses_text(uses)}, needs {_gpus(gpus)}, "
        f"{idle} idle)"
    )


def budget_sentence(team: str, spent: int, budget_cents: int, currency: str) -> str:
    """Why a team's new tasks wait; the Kubernetes admission check says the same of Jobs."""
    return (
        f"team {team} has spent {format_cents(spent, currency)} of its hard monthly budget of "
        f"{format_cents(budget_cents, currency)}"
    )


def budget_reason(cy: Cycle, team: str, spent: int, budget_cents: int) -> Pending:
    sentence = budget_sentence(team, spent, budget_cents, cy.policy.chargeback.currency)
    return Pending(PendingCode.BUDGET_EXHAUSTED, sentence)


def admitted_message(cy: Cycle, admission: Admission, req: Resources) -> str:
    gpu = cy.gpu_type(admission.pool)
    text = f"admitted to pool {admission.pool} ({_gpus(req.gpus)} {gpu})"
    if admission.placement:
        nodes = ", ".join(str(s.node) for s in admission.placement)
        text += f" on node{'s' if len(admission.placement) > 1 else ''} {nodes}"
    if admission.borrowed.gpus:
        text += f", borrowing {admission.borrowed.gpus} from the cohort"
    return text


def preempt_message(cy: Cycle, victim: RunningTask, preemptor: TaskRequest, reason: PreemptReason) -> str:
    v, gpu = victim.task, cy.gpu_type(victim.admission.pool)
    who = f"{preemptor.id} (team {preemptor.team}, priority {preemptor.priority})"
    size = f"{_gpus(v.resources.gpus)} {gpu}"
    if reason is PreemptReason.WITHIN_TEAM:
        return f"within team {v.team}: {who} outranks it (priority {v.priority}); frees {size}"
    borrowed = cy.quota.borrowing(v.team, victim.admission.pool).gpus
    if reason is PreemptReason.RECLAIM:
        own = cy.quota.quota(preemptor.team, victim.admission.pool)
        # Above its own nominal quota, a preemptor reclaims what a cohort of its holds (Kueue's
        # hierarchical reclaim), not what it lent itself.
        what = (
            "its lent quota"
            if own is not None and preemptor.resources.fits_in(own.nominal)
            else "quota of its own cohort"
        )
        return (
            f"reclaim: team {v.team} borrows {borrowed} {gpu} GPUs above its nominal quota and "
            f"team {preemptor.team} takes back {what} for {who}; frees {size}"
        )
    if reason is PreemptReason.BORROW_WITHIN_COHORT:
        return (
            f"borrow within cohort: team {v.team} borrows {borrowed} {gpu} GPUs and {who} "
            f"outranks it (priority {v.priority}); frees {size}"
        )
    if reason is PreemptReason.CONSOLIDATION:
        return (
            f"consolidation: moved off node {victim.admission.placement[0].node} so that {who}, "
            f"which waits on fragmented GPUs alone, fits; it fits again elsewhere at once; frees {size}"
            if victim.admission.placement
            else f"consolidation: moved so that {who} fits; frees {size}"
        )
    return (
        f"fair share: team {v.team} holds a larger share of the cohort's lendable capacity than "
        f"team {preemptor.team} would with {who}; frees {size}"
    )


_COMPONENT_NAMES = {"gpus": "GPUs", "cpu_milli": "CPU", "memory_mib": "memory"}


def with_gate(cy: Cycle, task: TaskRequest, pool: str, component: str, reason: Pending) -> Pending:
    """`reason` followed by why a task above its team's nominal quota may not preempt (Kueue's
    flavor-assigner gate), formatted when read."""
    return Pending.later(reason.code, _with_gate_text, (reason, _gate_values(cy, task, pool, component)))


#: What the gate's sentence says, captured: request, component, team, pool, nominal quota, fair share.
_GateValues = tuple[Resources, str, str, str, Resources | None, bool]


def _gate_values(cy: Cycle, task: TaskRequest, pool: str, component: str) -> _GateValues:
    q = cy.quota.quota(task.team, pool)
    fair = cy.policy.scheduling.mode is SchedulingMode.FAIR_SHARE
    return (task.resources, component, task.team, pool, q.nominal if q is not None else None, fair)


def _gate_text(
    req: Resources, component: str, team: str, pool: str, nominal: Resources | None, fair: bool
) -> str:
    return (
        f"it asks for {_res(req)}, more {_COMPONENT_NAMES.get(component, component)} than "
        f"team {team}'s nominal quota of {nominal.describe() if nominal is not None else '0'} in pool "
        f"{pool}, so it may not preempt (borrow_within_cohort is never"
        + (" and so is reclaim)" if fair else ")")
    )


def _with_gate_text(reason: Pending, gate: _GateValues) -> str:
    return reason.message + "; " + _gate_text(*gate)


def deferred_message(victims: Sequence[str]) -> str:
    shown = ", ".join(sorted(victims)[:5]) + (" …" if len(victims) > 5 else "")
    return f"fits once {len(victims)} task(s) preempted for others stop: {shown}"


def waiting_message(victims: Sequence[str]) -> str:
    shown = ", ".join(sorted(victims)[:5]) + (" …" if len(victims) > 5 else "")
    return f"waiting for {len(victims)} preempted task(s) to stop: {shown}"


#: How an inherited reason begins (`inherited_reason`): the server's reader recognises it by this.
INHERITED = "waits like "


def inherited_reason(task_id: str, why: Pending) -> Pending:
    """The reason of a task that asks at least what `task_id` asked and so waits for its cause."""
    return Pending.later(why.code, _inherited_text, (task_id, why))


def _inherited_text(task_id: str, why: Pending) -> str:
    return f"{INHERITED}{task_id}, which asks no more: {why.message}"
