"""Choosing victims: Kueue's classic and fair-sharing preemption, plus our protections.

Follows `pkg/scheduler/preemption/preemption.go` (`getTargets`, `findCandidates`,
`candidatesOrdering`, `minimalPreemptions`, `fillBackWorkloads`, `fairPreemptions`), behind the
flavor assigner's gate (`fitsResourceQuota`: `preemption_gate` below). Choosing is
pure: removals are what-ifs on the cycle's undo log, rolled back before returning. Issuing the
preemptions is the caller's job.

Our extensions, each behind an `EngineConfig` switch:
- checkpoint-aware order: among candidates of equal priority the least unsaved GPU-seconds go
  first (instead of the most recently admitted);
- min-runtime protection: a task admitted on borrowed capacity is not taken by borrow-within-cohort
  or fair-share preemption before its class's `min_runtime`, and a task preempted before is not
  preempted again (for any reason) until it has run its `min_runtime` since its readmission.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpucommons.domain.resources import ZERO, Resources
from gpucommons.engine.context import Cycle
from gpucommons.engine.fairshare import dominant_share, strategy_allows
from gpucommons.engine.types import PreemptReason, RunningTask, TaskRequest


@dataclass(frozen=True, slots=True)
class Target:
    victim: RunningTask
    reason: PreemptReason
    #: Already being preempted (no new preemption is issued; it is leaving anyway).
    leaving: bool = False

    def __init__(self, victim: RunningTask, reason: PreemptReason, leaving: bool = False) -> None:
        # By hand, as `Resources.__init__`: one per candidate of every victim search.
        object.__setattr__(self, "victim", victim)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "leaving", leaving)


@dataclass(frozen=True, slots=True)
class Reach:
    """How the preemptor reaches another team's tasks (Kueue `candidateElem`): through their lowest
    common cohort `lca`, and with or without hierarchical advantage — the preemptor's request fits
    in a subtree below `lca` that holds it but not the other team, so the other team uses quota
    that belongs to the preemptor's side of the tree."""

    advantage: bool
    lca: str

    def __init__(self, advantage: bool, lca: str) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted).
        object.__setattr__(self, "advantage", advantage)
        object.__setattr__(self, "lca", lca)


@dataclass(slots=True)
class Preemptor:
    """The task looking for room, and where."""

    task: TaskRequest
    pool: str
    #: Resource components that need room (1 where the request does not fit).
    needs: Resources
    #: Other teams whose tasks may be candidates, and how they are reached (`reach_other_teams`);
    #: None under fair sharing, which reaches every borrowing team of the root's subtree.
    reach: dict[str, Reach] | None = None

    def __init__(
        self, task: TaskRequest, pool: str, needs: Resources, reach: dict[str, Reach] | None = None
    ) -> None:
        # By hand (compiled, a generated `__init__` stays interpreted): one per victim search.
        self.task = task
        self.pool = pool
        self.needs = needs
        self.reach = reach


def needed_components(cy: Cycle, task: TaskRequest, pool: str) -> Resources:
    """Components where the request exceeds what is available; all requested ones if none do
    (then only node placement is short)."""
    gpus, cpu_milli, memory_mib = cy.quota.available_parts(task.team, pool, cy.isolated)
    req = task.resources
    short_g, short_c, short_m = req.gpus > gpus, req.cpu_milli > cpu_milli, req.memory_mib > memory_mib
    if short_g or short_c or short_m:
        return Resources(int(short_g), int(short_c), int(short_m))
    return Resources(int(req.gpus > 0), int(req.cpu_milli > 0), int(req.memory_mib > 0))


def _uses(rt: RunningTask, needs: Resources) -> bool:
    r = rt.task.resources
    return (
        (needs.gpus > 0 and r.gpus > 0)
        or (needs.cpu_milli > 0 and r.cpu_milli > 0)
        or (needs.memory_mib > 0 and r.memory_mib > 0)
    )


def _protected_from_repeat(cy: Cycle, rt: RunningTask) -> bool:
    """No task is preempted twice without progress: after a preemption it runs min_runtime first."""
    return (
        cy.config.min_runtime_protection
        and cy.state.preemption_count(rt.task.id) > 0
        and cy.now - rt.admitted_at < cy.min_runtime_s(rt)
    )


def protected_borrowed(cy: Cycle, rt: RunningTask) -> bool:
    """Borrowed capacity runs its class's min_runtime before borrow-within-cohort/fair share take it."""
    return (
        cy.config.min_runtime_protection
        and rt.admission.borrowed.any_positive()
        and cy.now - rt.admitted_at < cy.min_runtime_s(rt)
    )


def _eligible(cy: Cycle, rt: RunningTask, p: Preemptor) -> bool:
    """Checks common to every candidate, cheapest first (this runs for every running task examined)."""
    task = rt.task
    if rt.admission.pool != p.pool or not task.preemptible or task.id in cy.taken:
        return False
    if task.priority_class in cy.never_preempted_classes:
        return False  # the class says never, whatever the request said
    if rt.preempting and cy.state.preemptor_of(task.id) is not None:
        return False  # reserved for the preemptor that evicted it
    if not _uses(rt, p.needs):
        return False
    return not (
        cy.config.min_runtime_protection and task.id in cy.preempted_before and _protected_from_repeat(cy, rt)
    )


def _could_fit(cy: Cycle, p: Preemptor, candidates: list[RunningTask]) -> bool:
    """Necessary condition: removing a task frees at most its own request, so if even all of them
    together with what is available now fall short, no set of victims will do."""
    total = cy.quota.available(p.task.team, p.pool, cy.isolated)
    gpus, cpu, mem = total.gpus, total.cpu_milli, total.memory_mib
    for rt in candidates:  # summed as integers: this runs over every candidate of every plan
        r = rt.task.resources
        gpus += r.gpus
        cpu += r.cpu_milli
        mem += r.memory_mib
    req = p.task.resources
    return req.gpus <= gpus and req.cpu_milli <= cpu and req.memory_mib <= mem


def _own_team_may_yield(cy: Cycle, task: TaskRequest) -> bool:
    """Whether the team's `within_team` rule and its lowest running priority leave any own task
    a possible victim (by priority alone): on a cluster where everyone has the same priority that
    is never the case, and walking the team's running tasks would find nothing."""
    rules = cy.rules(task.team)
    if not rules.within_team:
        return False
    lowest = cy.state.min_running_priority(task.team)
    if lowest is None:
        return False
    return lowest < task.priority or (rules.newer_equal and lowest == task.priority)


def may_find_candidates(cy: Cycle, task: TaskRequest) -> bool:
    """A cheap necessary condition for `find_candidates` to find anyone: an own task may yield,
    or the team is in a cohort and may reclaim. False under `static` with one priority class."""
    if _own_team_may_yield(cy, task):
        return True
    return cy.root(task.team) is not None and cy.rules(task.team).reclaims


def _fits_where_asked(req: Resources, usage: Resources, quota: Resources) -> bool:
    """Kueue `QuantitiesFitInQuota`: `usage + req` within `quota` in every component `req` asks for."""
    return not (
        (req.gpus > 0 and usage.gpus + req.gpus > quota.gpus)
        or (req.cpu_milli > 0 and usage.cpu_milli + req.cpu_milli > quota.cpu_milli)
        or (req.memory_mib > 0 and usage.memory_mib + req.memory_mib > quota.memory_mib)
    )


def reach_other_teams(cy: Cycle, p: Preemptor) -> dict[str, Reach]:
    """Kueue `collectCandidatesForHierarchicalReclaim`: walk from the team's cohort up to the root;
    at each cohort, the teams of its subtree (less the subtree already walked) that use more than
    their quota — skipping sub-cohorts within their subtree quota, whose members use the sub-cohort's
    own quota — are reached through it. Once the request fits in the subtree walked so far, the
    preemptor has hierarchical advantage over every team reached from there on."""
    task, pool, tree = p.task, p.pool, cy.quota
    chain = () if cy.isolated else tree.ancestors(task.team)
    q = tree.quota(task.team, pool)
    if not chain or q is None:
        return {}
    req = task.resources
    used = tree.usage[(task.team, pool)]
    advantage = _fits_where_asked(req, used, q.nominal)
    remaining = (req - (q.guaranteed - used).clamp_nonnegative()).clamp_nonnegative()
    out: dict[str, Reach] = {}
    previous: str | None = None
    for cohort in chain:
        _collect_over_quota(cy, p, cohort, previous, Reach(advantage, cohort), out, set())
        key = (cohort, pool)
        usage = tree.cohort_usage.get(key, ZERO)
        advantage = advantage or _fits_where_asked(remaining, usage, tree.subtree_quota.get(key, ZERO))
        local_free = (tree.cohort_local.get(key, ZERO) - usage).clamp_nonnegative()
        remaining = (remaining - local_free).clamp_nonnegative()
        previous = cohort
    return out


def _may_have_advantage(cy: Cycle, p: Preemptor) -> bool:
    """False only if `reach_other_teams` would give no team hierarchical advantage: with the
    team's cohort as the root, every team is reached with the advantage the walk starts with
    (the request fits the team's nominal quota); deeper trees are not worked out here."""
    tree = cy.quota
    chain = tree.ancestors(p.task.team)
    q = tree.quota(p.task.team, p.pool)
    if not chain or q is None:
        return False
    if len(chain) > 1:
        return True
    return _fits_where_asked(p.task.resources, tree.usage[(p.task.team, p.pool)], q.nominal)


def _collect_over_quota(
    cy: Cycle,
    p: Preemptor,
    cohort: str,
    skip: str | None,
    reach: Reach,
    out: dict[str, Reach],
    seen: set[str],
) -> None:
    """Kueue `collectCandidatesInSubtree`."""
    seen.add(cohort)
    for child in cy.quota.child_cohorts.get(cohort, ()):
        if child == skip or child in seen or cy.cohort_within_quota(child, p.pool, p.needs):
            continue
        _collect_over_quota(cy, p, child, skip, reach, out, seen)
    for team in cy.quota.child_teams.get(cohort, ()):
        if team != p.task.team and cy.is_borrowing(team, p.pool, p.needs):
            out[team] = reach


def _still_over_quota(cy: Cycle, p: Preemptor, team: str) -> bool:
    """Kueue `candidateIsValid` for another team's task: the team, and every cohort between it and
    the lowest common cohort, still use more than their quota (earlier victims may have ended it)."""
    if not cy.is_borrowing(team, p.pool, p.needs):
        return False
    reach = (p.reach or {}).get(team)
    if reach is None:
        return True
    for cohort in cy.quota.ancestors(team):
        if cohort == reach.lca:
            break
        if cy.cohort_within_quota(cohort, p.pool, p.needs):
            return False
    return True


def find_candidates(cy: Cycle, p: Preemptor, others: bool = True) -> list[RunningTask]:
    """Kueue `findCandidates`: own team's per `within_team`, borrowing teams' per `reclaim`
    (`others=False` leaves the other teams out)."""
    task = p.task
    prio = task.priority
    rules = cy.rules(task.team)
    out: list[RunningTask] = []
    newer_equal = rules.newer_equal
    if _own_team_may_yield(cy, task):
        mine = (task.queued_at, task.seq)
        for rt in cy.state.iter_running(task.team):
            cp = rt.task.priority
            if cp > prio:
                continue
            if cp == prio and not (newer_equal and mine < (rt.task.queued_at, rt.task.seq)):
                continue
            if _eligible(cy, rt, p):
                out.append(rt)
    if others and cy.root(task.team) is not None and rules.reclaims:
        only_lower = rules.reclaim_lower_only
        # Classic preemption reaches other teams through the hierarchy (`reach_other_teams`); fair
        # sharing, as Kueue's `findCandidates`, takes every borrowing team of the root's subtree.
        reached = p.reach if p.reach is not None else cy.cohort_members(task.team)
        for other in reached:
            if other == task.team or not cy.is_borrowing(other, p.pool, p.needs):
                continue
            lowest_other = cy.state.min_running_priority(other)
            if lowest_other is None or (only_lower and lowest_other >= prio):
                continue  # it runs nothing, or nothing that ranks below the preemptor
            for rt in cy.state.iter_running(other):
                if only_lower and rt.task.priority >= prio:
                    continue
                if _eligible(cy, rt, p):
                    out.append(rt)
    return out


def order_candidates(cy: Cycle, team: str, candidates: list[RunningTask]) -> list[RunningTask]:
    """Kueue `candidatesOrdering`: already-leaving first, other teams before own, lower priority
    first, then most recently admitted first (checkpoint-aware: least unsaved work first)."""
    ckpt = cy.checkpoint_aware

    def key(rt: RunningTask) -> tuple[int, int, int, float, float, int]:
        return (
            0 if rt.preempting else 1,
            1 if rt.task.team == team else 0,
            rt.task.priority,
            rt.unsaved_gpu_s if ckpt else 0.0,
            -rt.admitted_at,
            -rt.task.seq,
        )

    return sorted(candidates, key=key)


def _borrow_threshold(cy: Cycle, task: TaskRequest) -> int | None:
    """Kueue `canBorrowWithinCohort`: None when not allowed; else victims must be below this."""
    if not cy.rules(task.team).borrows_within_cohort:
        return None
    # Kueue's `maxPriorityThreshold` is not in the policy file: the preemptor's priority is the bound.
    return task.priority


def _under_nominal(cy: Cycle, p: Preemptor) -> bool:
    """Kueue `queueUnderNominalInResourcesNeedingPreemption` (usage before the new task)."""
    q = cy.quota.quota(p.task.team, p.pool)
    if q is None:
        return False
    u = cy.quota.usage[(p.task.team, p.pool)]
    n = p.needs
    return not (
        (n.gpus and u.gpus >= q.nominal.gpus)
        or (n.cpu_milli and u.cpu_milli >= q.nominal.cpu_milli)
        or (n.memory_mib and u.memory_mib >= q.nominal.memory_mib)
    )


def _fits(cy: Cycle, p: Preemptor, allow_borrowing: bool) -> bool:
    return cy.fits(p.task.team, p.pool, p.task.resources, allow_borrowing) is not None


def _may_end_within_nominal(cy: Cycle, p: Preemptor, candidates: list[RunningTask]) -> bool:
    """Whether the preemptor could end within its nominal quota, as a search that may not borrow
    requires (`fits` with `allow_borrowing=False`), were every one of its own team's candidates
    removed: only those lower its team's usage, so if even that falls short no set of victims
    will do. Exact, and cheap next to the search it spares: a team below nominal with a request
    that would take it above nominal releases every other team's candidate, one fit check after
    each, before finding that none helps (at 528 GPUs most of a Kueue replay's victim search)."""
    team, pool = p.task.team, p.pool
    q = cy.quota.quota(team, pool)
    if q is None:
        return False
    used = cy.quota.usage[(team, pool)]
    gpus, cpu, mem = used.gpus, used.cpu_milli, used.memory_mib
    for rt in candidates:
        if rt.task.team == team:
            r = rt.task.resources
            gpus -= r.gpus
            cpu -= r.cpu_milli
            mem -= r.memory_mib
    req, n = p.task.resources, q.nominal
    return (
        gpus + req.gpus <= n.gpus
        and cpu + req.cpu_milli <= n.cpu_milli
        and mem + req.memory_mib <= n.memory_mib
    )


def _fill_back(cy: Cycle, p: Preemptor, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """Give back, in reverse order, every victim that turns out not to be needed."""
    for i in range(len(targets) - 2, -1, -1):
        cy.restore(targets[i].victim)
        if _fits(cy, p, allow_borrowing):
            del targets[i]
        else:
            cy.release(targets[i].victim)
    return targets


#: What to do with one candidate: its preemption reason (None: skip it) and whether the preemptor
#: may still end up borrowing from here on.
Pick = Callable[[RunningTask, bool], tuple[PreemptReason | None, bool]]


def _remove_until_fits(
    cy: Cycle, p: Preemptor, candidates: list[RunningTask], allow_borrowing: bool, pick: Pick
) -> list[Target] | None:
    """Kueue `minimalPreemptions`: remove candidates in order until the task fits, then fill back."""
    if not allow_borrowing and not _may_end_within_nominal(cy, p, candidates):
        return None
    mark = cy.whatif.mark()
    targets: list[Target] = []
    fits = False
    for rt in candidates:
        reason, allow_borrowing = pick(rt, allow_borrowing)
        if reason is None:
            continue
        cy.release(rt)
        targets.append(Target(rt, reason, rt.preempting))
        if _fits(cy, p, allow_borrowing):
            fits = True
            break
    if fits:
        targets = _fill_back(cy, p, targets, allow_borrowing)
    cy.whatif.rollback(mark)
    return targets if fits else None


def _minimal(
    cy: Cycle, p: Preemptor, candidates: list[RunningTask], allow_borrowing: bool, threshold: int | None
) -> list[Target] | None:
    """Kueue `minimalPreemptions` with `getTargets`' borrowing threshold: a victim of another team
    at or above it means the preemptor must end within nominal quota."""
    team = p.task.team

    def pick(rt: RunningTask, allow: bool) -> tuple[PreemptReason | None, bool]:
        if rt.task.team == team:
            return PreemptReason.WITHIN_TEAM, allow
        if not _still_over_quota(cy, p, rt.task.team):
            return None, allow
        if threshold is not None and rt.task.priority >= threshold:
            return PreemptReason.RECLAIM, False
        if threshold is not None:
            if protected_borrowed(cy, rt):
                return None, allow
            return PreemptReason.BORROW_WITHIN_COHORT, allow
        return PreemptReason.RECLAIM, allow

    return _remove_until_fits(cy, p, candidates, allow_borrowing, pick)


def _fair(cy: Cycle, p: Preemptor, candidates: list[RunningTask]) -> list[Target] | None:
    """Kueue `fairPreemptions`: take from the teams with the highest share first, per strategy.

    `borrow_within_cohort` plays no part here (Kueue PR 4165, the fix of issue 3779): taking another
    team's lower-priority task whatever the shares say makes a preemption that admission order
    undoes — the victim's team, now with the lower share, is admitted first and its task takes the
    preemptor's GPUs back by fair share, at the same instant, forever. The strategies alone do not
    loop so (Kueue's fair-sharing docs prove it): they let a team take only from one whose share
    stays at least its own with the new task, so the victim's team cannot take it back in turn."""
    strategies = cy.config.fair_share_strategies
    if not candidates or not strategies:
        return None
    mark = cy.whatif.mark()
    team = p.task.team
    req = p.task.resources
    groups: dict[str, list[RunningTask]] = {}
    for rt in candidates:
        groups.setdefault(rt.task.team, []).append(rt)
    shares = {t: dominant_share(cy, t) for t in groups}
    active = set(groups)
    new_share = dominant_share(cy, team, p.pool, req)
    targets: list[Target] = []
    retry: list[RunningTask] = []
    fits = False

    def pop_highest(pool_of: set[str], share_of: dict[str, int]) -> str:
        best = max(pool_of, key=lambda t: (share_of[t], -cy.team_index(t)))
        pool_of.discard(best)
        return best

    while active and not fits:
        t = pop_highest(active, shares)
        ws = groups[t]
        if t == team:
            rt = ws[0]
            cy.release(rt)
            targets.append(Target(rt, PreemptReason.WITHIN_TEAM, rt.preempting))
            if _fits(cy, p, True):
                fits = True
                break
            new_share = dominant_share(cy, team, p.pool, req)
            groups[t] = ws[1:]
            if groups[t]:
                active.add(t)
            continue
        for i, rt in enumerate(ws):
            cand_new = dominant_share(cy, t, p.pool, Resources() - rt.task.resources)
            allowed = strategy_allows(strategies[0], new_share, shares[t], cand_new)
            if allowed and not protected_borrowed(cy, rt):
                cy.release(rt)
                targets.append(Target(rt, PreemptReason.FAIR_SHARE, rt.preempting))
                if _fits(cy, p, True):
                    fits = True
                    break
                groups[t] = ws[i + 1 :]
                if groups[t] and cy.is_borrowing(t, p.pool, p.needs):
                    shares[t] = cand_new
                    active.add(t)
                break
            retry.append(rt)
    if not fits and len(strategies) > 1:
        groups2: dict[str, list[RunningTask]] = {}
        for rt in retry:
            groups2.setdefault(rt.task.team, []).append(rt)
        shares2 = {t: dominant_share(cy, t) for t in groups2}
        active2 = set(groups2)
        while active2 and not fits:
            t = pop_highest(active2, shares2)
            if not cy.is_borrowing(t, p.pool, p.needs):
                continue
            if strategy_allows(strategies[1], new_share, shares2[t], 0):
                rt = groups2[t][0]
                if protected_borrowed(cy, rt):
                    continue
                cy.release(rt)
                targets.append(Target(rt, PreemptReason.FAIR_SHARE, rt.preempting))
                fits = _fits(cy, p, True)
    if fits:
        targets = _fill_back(cy, p, targets, True)
    cy.whatif.rollback(mark)
    return targets if fits else None


def _hierarchical(
    cy: Cycle, p: Preemptor, candidates: list[RunningTask], threshold: int | None
) -> list[Target] | None:
    """Kueue's classic preemption (`classicalPreemptions` over `candidateIterator`) when the
    preemptor has hierarchical advantage over some other team without fitting in its own nominal
    quota: a cohort subtree holding it has quota of its own (or lent by its members) that teams
    outside use. Those teams' tasks go first, whatever `borrow_within_cohort` says (Kueue's
    `HierarchicalReclaim` variant), then the other teams' per the borrowing rules, then its own.
    """
    team = p.task.team
    reach = p.reach or {}

    def group(rt: RunningTask) -> int:
        if rt.task.team == team:
            return 2
        return 0 if reach[rt.task.team].advantage else 1

    def reclaim_without_borrowing(rt: RunningTask) -> bool:
        """Kueue `ReclaimWithoutBorrowing`: only while the preemptor ends within nominal quota."""
        return group(rt) == 1 and (threshold is None or rt.task.priority >= threshold)

    # Kueue's iterator: already-leaving tasks of each group first, then the rest, group by group.
    ordered = sorted(candidates, key=lambda rt: (0 if rt.preempting else 1, group(rt)))
    attempts = [True] if threshold is None and not _under_nominal(cy, p) else [True, False]
    for allow_borrowing in attempts:
        usable = [rt for rt in ordered if not (allow_borrowing and reclaim_without_borrowing(rt))]
        targets = _take_in_order(cy, p, usable, allow_borrowing, group)
        if targets:
            return targets
    return None


def _take_in_order(
    cy: Cycle,
    p: Preemptor,
    candidates: list[RunningTask],
    allow_borrowing: bool,
    group: Callable[[RunningTask], int],
) -> list[Target] | None:
    """One attempt of Kueue's candidate iterator: other teams' tasks only while they (and their
    cohorts below the common one) are still above quota; `ReclaimWhileBorrowing` candidates are
    borrow-within-cohort preemptions, which min-runtime protection may hold back."""

    def pick(rt: RunningTask, allow: bool) -> tuple[PreemptReason | None, bool]:
        g = group(rt)
        if g == 2:
            return PreemptReason.WITHIN_TEAM, allow
        if not _still_over_quota(cy, p, rt.task.team):
            return None, allow
        if g == 1 and allow:
            return (None if protected_borrowed(cy, rt) else PreemptReason.BORROW_WITHIN_COHORT), allow
        return PreemptReason.RECLAIM, allow

    return _remove_until_fits(cy, p, candidates, allow_borrowing, pick)


def can_preempt_while_borrowing(cy: Cycle, task: TaskRequest, fair_share: bool) -> bool:
    """Kueue `canPreemptWhileBorrowing`: `borrow_within_cohort` is not `never`, or fair sharing
    with a `reclaim` rule other than `never`."""
    rules = cy.rules(task.team)
    return rules.borrows_within_cohort or (fair_share and rules.reclaims)


def preemption_gate(cy: Cycle, task: TaskRequest, pool: str, fair_share: bool) -> str | None:
    """Kueue's gate in the flavor assigner (`fitsResourceQuota`): a request that does not fit may
    look for victims only if it is within the team's nominal quota, or the team may reclaim in
    the cohort hierarchy, or may preempt while borrowing (`can_preempt_while_borrowing`). Checked
    per resource that is short. None when preemption may be tried; else the component that
    stops it (`gpus`, `cpu_milli` or `memory_mib`)."""
    q = cy.quota.quota(task.team, pool)
    if q is None or can_preempt_while_borrowing(cy, task, fair_share):
        return None
    req, nominal = task.resources, q.nominal
    if req.fits_in(nominal):
        return None  # within nominal quota in every component: the gate is open whatever is available
    gpus, cpu_milli, memory_mib = cy.quota.available_parts(task.team, pool, cy.isolated)
    # Component by component, written out: this runs for every head that fails, every cycle, and
    # `getattr` by name is a generic lookup in compiled code.
    if _gate_stops(cy, task, pool, "gpus", req.gpus, gpus, nominal.gpus):
        return "gpus"
    if _gate_stops(cy, task, pool, "cpu_milli", req.cpu_milli, cpu_milli, nominal.cpu_milli):
        return "cpu_milli"
    if _gate_stops(cy, task, pool, "memory_mib", req.memory_mib, memory_mib, nominal.memory_mib):
        return "memory_mib"
    return None


def _gate_stops(
    cy: Cycle, task: TaskRequest, pool: str, component: str, val: int, avail: int, nominal: int
) -> bool:
    """`preemption_gate` for one component: short of it, above nominal quota, and no hierarchical
    reclaim possible."""
    if val <= avail or val <= nominal:
        return False
    return not cy.quota.lowest_subtree_that_fits(task.team, pool, component, val, cy.isolated)[1]


def get_targets(cy: Cycle, task: TaskRequest, pool: str, fair_share: bool) -> list[Target] | None:
    """Kueue `getTargets`: the victims that let `task` fit in `pool`, or None. Behind Kueue's
    gate (`preemption_gate`): a request above the team's nominal quota preempts nobody unless
    hierarchical reclaim or `borrow_within_cohort` allows it."""
    if not may_find_candidates(cy, task):
        return None  # nobody could be a candidate: spare the per-pool arithmetic below
    return targets_of_candidates(cy, task, pool, fair_share)


def targets_of_candidates(cy: Cycle, task: TaskRequest, pool: str, fair_share: bool) -> list[Target] | None:
    """`get_targets` once `may_find_candidates(cy, task)` is known to hold: it depends on the
    policy and on what runs, not on the pool or on what-if changes, so a caller that tries every
    pool of a head asks it once."""
    if preemption_gate(cy, task, pool, fair_share) is not None:
        return None
    p = Preemptor(task, pool, needed_components(cy, task, pool))
    threshold = _borrow_threshold(cy, task)
    hierarchical = False
    reclaims = cy.rules(task.team).reclaims
    classic_reach = not fair_share and reclaims and cy.root(task.team) is not None
    own_may_yield = _own_team_may_yield(cy, task)
    if not (
        fair_share
        or threshold is not None
        or own_may_yield
        or _under_nominal(cy, p)
        or (classic_reach and _may_have_advantage(cy, p))
    ):
        # Own tasks cannot yield and other teams' come in only through hierarchical advantage:
        # without any, `find_candidates` finds nobody. Decided before the walk of the cohort
        # tree, which a head that fails every cycle would otherwise pay for each time.
        return None
    if classic_reach:
        p.reach = reach_other_teams(cy, p)
        within_nominal = cy.within_nominal(task.team, pool, task.resources)
        hierarchical = not within_nominal and any(r.advantage for r in p.reach.values())
    if not (fair_share or threshold is not None or hierarchical or own_may_yield) and not (
        _under_nominal(cy, p) and cy.within_nominal(task.team, pool, task.resources)
    ):
        # All that is left is a reclaim that must end within nominal quota (below), and other
        # teams' victims never lower the team's own usage: if the request does not fit within
        # nominal beside it now, no victims will do (`_may_end_within_nominal` with no own
        # candidates). Decided before `find_candidates` walks every borrowing team's tasks.
        return None
    # Other teams' tasks can only serve to reclaim (preemptor under nominal, or with hierarchical
    # advantage), to borrow within the cohort, or under fair share; otherwise Kueue ends with own
    # tasks only, so skip the others.
    others = fair_share or threshold is not None or hierarchical or _under_nominal(cy, p)
    found = find_candidates(cy, p, others=others)
    if not found or not _could_fit(cy, p, found):
        return None
    # Sorted only for a search that runs: most heads that get this far under Kueue at 528 GPUs
    # find every other team's borrowed tasks and no search that could succeed, and the sort was
    # 15 % of the replay. Sorting a subset gives the order the whole list sorted has (stable sort).
    own = [rt for rt in found if rt.task.team == task.team]
    if len(own) == len(found):
        # Only own tasks: preempt them, borrowing if need be (the gate above already refused a
        # request above nominal quota that may not preempt while borrowing).
        return _minimal(cy, p, order_candidates(cy, task.team, found), True, None)
    if fair_share:
        return _fair(cy, p, order_candidates(cy, task.team, found))
    if hierarchical and any(
        (p.reach or {})[rt.task.team].advantage for rt in found if rt.task.team != task.team
    ):
        return _hierarchical(cy, p, order_candidates(cy, task.team, found), threshold)
    if threshold is not None:
        candidates = order_candidates(cy, task.team, found)
        if not _under_nominal(cy, p):
            candidates = [
                rt for rt in candidates if rt.task.team == task.team or rt.task.priority < threshold
            ]
        return _minimal(cy, p, candidates, True, threshold)
    # Reclaim, ending within nominal quota; failing that, own tasks only, borrowing allowed.
    if _under_nominal(cy, p) and _may_end_within_nominal(cy, p, found):
        targets = _minimal(cy, p, order_candidates(cy, task.team, found), False, None)
        if targets:
            return targets
    return _minimal(cy, p, order_candidates(cy, task.team, own), True, None) if own else None
