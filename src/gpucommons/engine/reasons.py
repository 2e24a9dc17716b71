"""Why a task waits, and why a task was admitted or preempted: in sentences a person understands.

The server shows these in the queue view and the simulator in its reports, so each names the team,
the pool's GPU type, the numbers, and the rule that applied.
"""

from __future__ import annotations

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


def pending_reason(cy: Cycle, task: TaskRequest, pool: str) -> Pending:
    """Why `task` cannot be admitted in `pool` right now (without preemption)."""
    team, req, gpu = task.team, task.resources, cy.gpu_type(pool)
    q = cy.quota.quota(team, pool)
    if q is None:
        return Pending(PendingCode.UNKNOWN_POOL, f"team {team} has no quota in pool {pool}")
    most = never_fits_limit(cy, task, pool)
    if most is not None:
        return Pending(
            PendingCode.NEVER_FITS,
            f"needs {_res(req)} but the most team {team} may ever hold in pool {pool} is {_res(most)}",
        )
    used = cy.quota.usage[(team, pool)]
    if cy.quota.allows(team, pool, req, cy.isolated):
        pool_obj = cy.pool(pool)
        gpn = pool_obj.gpus_per_node if pool_obj is not None else 0
        if gpn and req.gpus > gpn:
            need = -(-req.gpus // gpn)
            return Pending(
                PendingCode.NO_NODE_FITS,
                f"quota allows it, but it needs {need} whole free {gpu} nodes and fewer are free",
            )
        block = cy.state.nodes.largest_free_block(team, pool)
        return Pending(
            PendingCode.NO_NODE_FITS,
            f"quota allows it, but no {gpu} node has {_gpus(req.gpus)} free together "
            f"(the largest free block is {block})",
        )
    uses = f"team {team} uses {used.gpus}/{q.nominal.gpus} {gpu} GPUs"
    if cy.isolated or cy.quota.team_parent.get(team) is None:
        why = "the static engine" if cy.isolated else "a dedicated team"
        return Pending(
            PendingCode.QUOTA_EXHAUSTED,
            f"{uses} and needs {_gpus(req.gpus)}; {why} never borrows beyond its nominal quota",
        )
    bl = q.borrow_limit
    over_limit = not (used + req).fits_in(q.nominal + bl)
    if over_limit:
        if bl.gpus == 0:
            tail = "and may not borrow"
        elif bl.gpus >= UNLIMITED:
            tail = "and has reached its borrow limit"
        else:
            tail = f"and has reached its borrow limit of {bl.gpus}"
        return Pending(PendingCode.QUOTA_EXHAUSTED, f"{uses} {tail}; needs {_gpus(req.gpus)} more")
    cohort = cy.quota.team_parent.get(team)
    idle = cy.quota.cohort_idle(team, pool)
    if (used + req).fits_in(q.nominal):
        return Pending(
            PendingCode.NO_IDLE_TO_BORROW,
            f"{uses}; the rest of its quota is lent out and cohort {cohort} has only "
            f"{max(0, idle.gpus)} idle {gpu} GPUs for a request of {req.gpus}",
        )
    return Pending(
        PendingCode.NO_IDLE_TO_BORROW,
        f"no idle {gpu} left to borrow in cohort {cohort} ({uses}, needs {_gpus(req.gpus)}, "
        f"{max(0, idle.gpus)} idle)",
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


def gate_sentence(cy: Cycle, task: TaskRequest, pool: str, component: str) -> str:
    """Why a task above its team's nominal quota may not preempt (Kueue's flavor-assigner gate)."""
    q = cy.quota.quota(task.team, pool)
    nominal = q.nominal.describe() if q is not None else "0"
    return (
        f"it asks for {_res(task.resources)}, more {_COMPONENT_NAMES.get(component, component)} than "
        f"team {task.team}'s nominal quota of {nominal} in pool {pool}, so it may not preempt "
        "(borrow_within_cohort is never"
        + (" and so is reclaim)" if cy.policy.scheduling.mode is SchedulingMode.FAIR_SHARE else ")")
    )


def deferred_message(victims: list[str]) -> str:
    shown = ", ".join(sorted(victims)[:5]) + (" …" if len(victims) > 5 else "")
    return f"fits once {len(victims)} task(s) preempted for others stop: {shown}"


def waiting_message(victims: list[str]) -> str:
    shown = ", ".join(sorted(victims)[:5]) + (" …" if len(victims) > 5 else "")
    return f"waiting for {len(victims)} preempted task(s) to stop: {shown}"


#: How an inherited reason begins (`inherited_reason`): the server's reader recognises it by this.
INHERITED = "waits like "


def inherited_reason(task_id: str, why: Pending) -> Pending:
    """The reason of a task that asks at least what `task_id` asked and so waits for its cause."""
    return Pending(why.code, f"{INHERITED}{task_id}, which asks no more: {why.message}")
