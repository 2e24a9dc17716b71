"""The search over quota vectors: seeds first, then moves of GPUs between teams, each one replayed.

A replay of weeks of history takes seconds to a minute, so the search spends replays where they
can pay:

1. **Seeds.** Today's quotas and the simple sizings of `quota_baselines` are replayed on the fit
   window.
2. **Repairs.** A seed that waits less than the best feasible one but makes some team regress (the
   equal split often does: it shrinks the one team whose bursts need its large quota) is repaired
   rather than dropped: GPUs move to the teams it made regress, from the teams with the most slack,
   a few rounds per seed, each round replayed. The search then starts from the best point so far
   (feasible first, then the objective).
3. **Screened moves.** Each round ranks every move "k units from team d to team r" by what the
   last replay showed, without replaying anything: receivers are the teams that waited longest
   (or were owed GPUs, or regressed), donors the teams whose nominal quota stood furthest above
   what they asked for while others waited. Only the best `batch` moves not replayed before are
   replayed (in parallel, by the caller's evaluator, which also caches by vector).
4. **Step sizes.** Moves start at `levels[0]` × step GPUs and shrink when a round finds nothing
   better; after the smallest size finds nothing, the search stops early. It also stops when the
   replay budget is spent.

Deterministic: ranking ties are broken by team order and the evaluator returns scores in the order
asked, so the same inputs give the same path however many processes replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpucommons.planning.objectives import Rules, Verdict, judge
from gpucommons.planning.quota_space import QuotaSpace, QuotaVector
from gpucommons.planning.replay_score import ReplayScore
from gpucommons.planning.wait_curves import WaitCurves

#: A quota vector and the window to replay it on ("fit", "validation", or "fold k" with `--folds`).
Request = tuple[QuotaVector, str]
#: Replays each request (in parallel if it can, from a cache if it has one); scores in the order asked.
Evaluate = Callable[[Sequence[Request]], list[ReplayScore]]
#: (replays done, replays planned, what is happening).
SearchProgress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class SearchSettings:
    #: Fit-window replays the search may spend in all, seeds included.
    max_replays: int = 48
    #: Moves replayed per round (two processes replay two at a time).
    batch: int = 4
    #: Move sizes, in steps, largest first.
    levels: tuple[int, ...] = (4, 2, 1)
    #: GPUs per step, per pool (None: one node of the pool).
    step_gpus: int | None = None
    receivers: int = 3
    donors: int = 4
    #: Seeds repaired (those waiting less than the best feasible point, shortest wait first).
    repair_seeds: int = 2
    #: Replayed rounds per repaired seed; a round stops the repair when it improves nothing.
    repair_rounds: int = 3

    def __post_init__(self) -> None:
        if self.max_replays < 1:
            raise ValueError("--max-replays must be at least 1")
        if self.batch < 1 or not self.levels or min(self.levels) < 1:
            raise ValueError("the search needs a batch of at least 1 and positive step levels")
        if self.step_gpus is not None and self.step_gpus < 1:
            raise ValueError("--step must be at least 1 GPU")


@dataclass(frozen=True, slots=True)
class Scored:
    vector: QuotaVector
    label: str
    fit: ReplayScore
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class SearchTrace:
    start: Scored
    best: Scored
    #: Accepted points in order, start first.
    path: tuple[Scored, ...]
    #: Every fit replay made, in order (seeds first).
    tried: tuple[Scored, ...]
    replays: int
    stopped: str
    seeds: dict[str, Scored] = field(default_factory=dict)


def step_units(space: QuotaSpace, pool_index: int, settings: SearchSettings) -> int:
    """A step in the pool's units: `--step` GPUs rounded up to whole units, default one node."""
    pool = space.pools[pool_index]
    gpus = settings.step_gpus if settings.step_gpus is not None else max(pool.gpus_per_node, 1)
    return max(-(-gpus // pool.unit), 1)


def _receiver_order(space: QuotaSpace, current: Scored, rules: Rules, slots: Sequence[int]) -> list[int]:
    teams = current.fit.teams
    regressed = current.verdict.regressions

    def key(i: int) -> tuple[float, ...]:
        name = space.entries[i].team
        t = teams.get(name)
        wait = t.wait_p95_s if t else 0.0
        owed = t.violation_s if t else 0.0
        first = owed if rules.objective.value == "guarantee" else wait
        return (0 if name in regressed else 1, -first, -wait, i)

    return [i for i in sorted(slots, key=key) if _wants(space, current, i)]


def _wants(space: QuotaSpace, current: Scored, slot: int) -> bool:
    t = current.fit.teams.get(space.entries[slot].team)
    return t is not None and (t.wait_p95_s > 0 or t.violation_s > 0)


def _donor_order(space: QuotaSpace, current: Scored, rules: Rules, slots: Sequence[int]) -> list[int]:
    teams = current.fit.teams

    def key(i: int) -> tuple[float, ...]:
        t = teams.get(space.entries[i].team)
        waits_long = t is not None and t.wait_p95_s >= rules.exempt_below_s
        slack = current.vector[i] - (t.need_gpus if t else 0.0)
        return (1 if waits_long else 0, -slack, i)

    return sorted(slots, key=key)


def _headroom(space: QuotaSpace, point: Scored, today: ReplayScore, rules: Rules, slot: int) -> float:
    """Seconds of p95 wait the team may still gain before it regresses (large when exempt)."""
    name = space.entries[slot].team
    mine, base = point.fit.teams.get(name), today.teams.get(name)
    wait = mine.wait_p95_s if mine else 0.0
    base_wait = base.wait_p95_s if base else 0.0
    limit = max(rules.tolerated_s(base_wait), rules.exempt_below_s)
    return limit - wait


def repairs(
    space: QuotaSpace, point: Scored, today: ReplayScore, rules: Rules, settings: SearchSettings
) -> list[QuotaVector]:
    """Moves toward the teams `point` made regress, worst excess first, from teams with slack.

    Donors are the teams furthest from regressing themselves (most p95 headroom against today's),
    then those whose quota stands furthest above what they asked for. With several regressed
    teams, the first moves give each of them `level` steps at once (donors in turn); then each
    receiver alone gets every move size of `settings.levels`, largest first, so one round tries
    both a bold and a small fix.
    """
    regressed = point.verdict.regressions
    if not regressed:
        return []
    out: list[QuotaVector] = []
    for p, pool in enumerate(space.pools):
        excess: dict[int, float] = {}
        donors: list[tuple[tuple[float, ...], int]] = []
        for i in pool.slots:
            name = space.entries[i].team
            if name in regressed:
                before, after = regressed[name]
                excess[i] = after - rules.tolerated_s(before)
            else:
                t = point.fit.teams.get(name)
                slack = point.vector[i] - (t.need_gpus if t else 0.0)
                donors.append(((-round(_headroom(space, point, today, rules, i), 3), -slack, i), i))
        receivers = sorted(excess, key=lambda i: (-excess[i], i))[: settings.receivers]
        givers = [i for _, i in sorted(donors)][: settings.donors]
        step = step_units(space, p, settings)
        if len(receivers) > 1:  # every regressed team at once, donors taken in turn
            for level in settings.levels:
                joint: QuotaVector | None = point.vector
                for k, r in enumerate(receivers):
                    turn = givers[k % len(givers) :] + givers[: k % len(givers)] if givers else []
                    given = None
                    for d in turn:
                        given = space.move(joint, d, r, level * step) if joint is not None else None
                        if given is not None:
                            break
                    joint = given if given is not None else joint
                if joint is not None and joint != point.vector:
                    out.append(joint)
        for r in receivers:
            for level in settings.levels:
                for d in givers:
                    moved = space.move(point.vector, d, r, level * step)
                    if moved is not None:
                        out.append(moved)
                        break  # one donor per size: the one with most headroom that can give it
    return list(dict.fromkeys(out))


def propose(
    space: QuotaSpace, current: Scored, rules: Rules, settings: SearchSettings, level: int
) -> list[QuotaVector]:
    """Every move of `level` steps, best-ranked first (screening: no replay involved)."""
    ranked: list[tuple[int, int, QuotaVector]] = []
    for p, pool in enumerate(space.pools):
        units = level * step_units(space, p, settings)
        receivers = _receiver_order(space, current, rules, pool.slots)[: settings.receivers]
        donors = _donor_order(space, current, rules, pool.slots)[: settings.donors]
        for ri, r in enumerate(receivers):
            for di, d in enumerate(donors):
                moved = space.move(current.vector, d, r, units)
                if moved is not None:
                    ranked.append((ri + di, ri, moved))
    ranked.sort(key=lambda item: (item[0], item[1]))
    seen: set[QuotaVector] = set()
    out = []
    for _, _, vector in ranked:
        if vector not in seen:
            seen.add(vector)
            out.append(vector)
    return out


def repair_seeds(
    space: QuotaSpace,
    seeded: Sequence[Scored],
    today: ReplayScore,
    rules: Rules,
    settings: SearchSettings,
    replay: Callable[[Sequence[QuotaVector], Sequence[str]], list[Scored]],
    rank: Callable[[Scored], tuple[float, ...]],
    note: Callable[[str], None],
    spent: Callable[[], int],
) -> None:
    """Repair the seeds that wait less than the best feasible seed but make a team regress."""
    feasible = [s.verdict.mean_p95_s for s in seeded if s.verdict.feasible]
    bar = min(feasible) if feasible else float("inf")
    broken = sorted(
        (
            s
            for s in seeded
            if not s.verdict.feasible and s.verdict.regressions and s.verdict.mean_p95_s < bar
        ),
        key=lambda s: (round(s.verdict.mean_p95_s, 3), seeded.index(s)),
    )
    for start in broken[: settings.repair_seeds]:
        point = start
        for round_no in range(settings.repair_rounds):
            room = settings.max_replays - spent()
            if room <= 0:
                return
            batch = repairs(space, point, today, rules, settings)[: min(settings.batch, room)]
            if not batch:
                break
            note(f"repairing {start.label}, round {round_no + 1}: {len(batch)} candidates")
            scored = replay(batch, [f"{start.label}, repaired"] * len(batch))
            best = min(scored, key=lambda s: (rank(s), batch.index(s.vector)))
            if rank(best) >= rank(point):
                break
            point = best
            if point.verdict.feasible:
                break


def search(
    space: QuotaSpace,
    seeds: dict[str, QuotaVector],
    today: ReplayScore,
    evaluate: Evaluate,
    rules: Rules,
    settings: SearchSettings = SearchSettings(),
    on_progress: SearchProgress | None = None,
) -> SearchTrace:
    """Seeds, then rounds of surrogate picks and screened moves, each replayed on the fit window."""
    tried: list[Scored] = []
    known: dict[QuotaVector, Scored] = {}
    curves = WaitCurves(space)
    planned = settings.max_replays

    def note(text: str) -> None:
        if on_progress is not None:
            on_progress(len(known), planned, text)

    def replay(vectors: Sequence[QuotaVector], labels: Sequence[str]) -> list[Scored]:
        fresh = [v for v in dict.fromkeys(vectors) if v not in known]
        if fresh:
            for vector, score in zip(fresh, evaluate([(v, "fit") for v in fresh]), strict=True):
                label = labels[vectors.index(vector)]
                scored = Scored(vector, label, score, judge(score, today, rules))
                known[vector] = scored
                tried.append(scored)
                curves.observe(vector, score)
        return [known[v] for v in vectors]

    def rank(s: Scored) -> tuple[float, ...]:
        return s.verdict.key(rules.objective)

    names = list(seeds)
    vectors = [seeds[n] for n in names][: settings.max_replays]
    note("replaying today's quotas and the simple sizings")
    seeded = dict(zip(names, replay(vectors, names), strict=False))
    in_space = [s for s in seeded.values() if space.contains(s.vector)]
    if not in_space:
        raise ValueError(f"no seed lies in the search space (a bug: seeds are projected into it): {seeds}")
    repair_seeds(space, in_space, today, rules, settings, replay, rank, note, lambda: len(known))
    candidates = [s for s in known.values() if space.contains(s.vector)]
    current = min(candidates, key=lambda s: (rank(s), tried.index(s)))
    start = current
    path = [current]
    level = 0
    stopped = "the replay budget was spent"
    round_no = 0
    while len(known) < settings.max_replays:
        picks = [v for v in curves.best_combinations(today, rules) if v not in known]
        moves = propose(space, current, rules, settings, settings.levels[level])
        room = min(settings.batch, settings.max_replays - len(known))
        batch = [v for v in dict.fromkeys(picks[:2] + moves) if v not in known][:room]
        if not batch:
            if level + 1 < len(settings.levels):
                level += 1
                continue
            stopped = "no candidate was left to try"
            break
        round_no += 1
        note(f"round {round_no}: {len(batch)} candidates")
        labels = [f"search round {round_no} ({'combined curves' if v in picks else 'move'})" for v in batch]
        scored = replay(batch, labels)
        best = min(scored, key=lambda s: (rank(s), batch.index(s.vector)))
        if rank(best) < rank(current):
            current = best
            path.append(best)
        elif level + 1 < len(settings.levels):
            level += 1
        elif not any(v in picks for v in batch):
            stopped = "no smaller move made it better"
            break
    note(f"search done: {stopped}")
    return SearchTrace(
        start=start,
        best=current,
        path=tuple(path),
        tried=tuple(tried),
        replays=len(known),
        stopped=stopped,
        seeds=seeded,
    )
