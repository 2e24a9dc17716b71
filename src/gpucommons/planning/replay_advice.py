"""Objective-driven quota advice: search on the older history, choose on the newer, report both.

    fit, validation = split_history(jobs)          # rolling time split, older part decayed
    today  = replay(today's quotas) on both
    search = every seed, repaired seeds, screened moves, on fit   # gpucommons.planning.quota_search
    finalists = the search's last points, the best seeds, the best other points that keep the rules
                on fit, and every baseline, replayed on validation (on each of `--folds`
                consecutive folds of the validation days, each on its own)
    chosen = among the finalists that keep every rule on every fold and are no worse than today's
             on any fold (and better over all of them), the one whose worst fold is best;
             if none: keep today's quotas

The choice is made on the validation days only: the fit days are in-sample for the search, so a
fit-day score says little about next month. Nothing is moved using the validation days:
repairing finalists there (tried on Philly at 528 GPUs, 7 December 2026) chose quotas that fitted
those days and made four teams wait longer on the days after (docs/benchmarks.md). Every
baseline is a finalist, so the chosen quotas are never worse on the validation days than the best
baseline that keeps the rules there.

Baselines (today, equal split, proportional to mean demand, the median rule) go through the same
replays so the report shows what the search bought. Pure: replays come from the caller's
`Evaluate`, which may run them in other processes; everything here is deterministic for a seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gpucommons.domain import Policy
from gpucommons.domain.model import Isolation
from gpucommons.planning.block_bootstrap import BootstrapResult, week_block_bootstrap
from gpucommons.planning.objectives import Objective, Rules, Verdict, judge
from gpucommons.planning.quota_baselines import REPORTED, TODAY, demand_pools, largest_jobs, seeds
from gpucommons.planning.quota_search import Evaluate, SearchProgress, SearchSettings, SearchTrace, search
from gpucommons.planning.quota_space import MaxChange, QuotaSpace, QuotaVector, apply_vector, build_space
from gpucommons.planning.replay_score import (
    HOUR,
    ReplayScore,
    ValidationSplit,
    Window,
    pooled_score,
    split_folds,
    split_history,
)
from gpucommons.planning.whatif import short_duration
from gpucommons.sim import SimJob

#: How many points of the search path, how many seeds, and how many of the other points the search
#: replayed (the best that keep the rules on the fit days, repaired seeds among them) go on to
#: validation; the baselines always do. Each finalist costs a validation replay per fold.
PATH_FINALISTS = 2
SEED_FINALISTS = 2
TRIED_FINALISTS = 3


@dataclass(frozen=True, slots=True)
class AdviceSettings:
    objective: Objective = Objective.BALANCED
    max_regression: float = 0.10
    exempt_below_s: float = HOUR
    validate: ValidationSplit = field(default_factory=lambda: ValidationSplit(share=0.25))
    half_life_s: float | None = 14 * 86400.0
    #: The fit window: this many seconds before the validation days (None: all of them).
    fit_window_s: float | None = 10 * 86400.0
    whole_nodes: bool = False
    max_change: MaxChange = field(default_factory=MaxChange)
    engine: str = "commons"
    search: SearchSettings = field(default_factory=SearchSettings)
    seed: int = 0
    bootstrap_resamples: int = 500
    #: The validation days are cut into this many folds, each replayed on its own (1: one window).
    folds: int = 1
    #: A floor for every sized team: this share of an equal split of its pool (never above today's).
    floor_share: float = 0.0

    def __post_init__(self) -> None:
        if self.folds < 1:
            raise ValueError("--folds must be at least 1")
        if not 0.0 <= self.floor_share <= 1.0:
            raise ValueError("--floor must be between 0% and 100% of an equal share")

    @property
    def rules(self) -> Rules:
        return Rules(self.objective, self.max_regression, self.exempt_below_s)


@dataclass(frozen=True, slots=True)
class Judged:
    """A quota vector replayed on both windows and judged against today's on each."""

    label: str
    vector: QuotaVector
    fit: ReplayScore
    validation: ReplayScore
    fit_verdict: Verdict
    validation_verdict: Verdict
    #: Per fold of the validation days, oldest first; with one fold, `(validation,)`. `validation`
    #: is then the folds' jobs pooled (`pooled_score`).
    folds: tuple[ReplayScore, ...] = ()
    fold_verdicts: tuple[Verdict, ...] = ()


@dataclass(frozen=True, slots=True)
class TeamChange:
    team: str
    pool: str
    today: int
    proposed: int
    #: Seconds: p95 wait on the fit window (decayed) and on the validation window, today → proposed.
    fit_p95: tuple[float, float]
    validation_p95: tuple[float, float]
    #: Seconds owed and not had (guarantee violations), fit + validation, today → proposed.
    violation: tuple[float, float]
    reason: str


@dataclass(frozen=True, slots=True)
class ReplayAdvice:
    settings: AdviceSettings
    fit: Window
    validation: Window
    space: QuotaSpace
    trace: SearchTrace
    today: Judged
    baselines: dict[str, Judged]
    finalists: tuple[Judged, ...]
    #: None: keep today's quotas (`why` says why).
    chosen: Judged | None
    why: str
    teams: tuple[TeamChange, ...]
    bootstrap: BootstrapResult | None
    current: Policy
    proposed: Policy
    replays: int
    #: Teams sized by nobody: (team, pool, why) for the report.
    kept: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)
    #: The folds of the validation days, oldest first (one fold: the validation window itself).
    folds: tuple[Window, ...] = ()

    @property
    def result(self) -> Judged:
        return self.chosen if self.chosen is not None else self.today


def _reason(change: TeamChange, need_gpus: float, *, chosen: bool) -> str:
    fit_b, fit_a = change.fit_p95
    val_b, val_a = change.validation_p95
    waits = (
        f"p95 wait {short_duration(fit_b)} → {short_duration(fit_a)} on the fit days, "
        f"{short_duration(val_b)} → {short_duration(val_a)} on the validation days"
    )
    if not chosen or change.today == change.proposed:
        return f"{change.team}: {change.proposed} GPUs, unchanged ({waits})."
    if change.proposed > change.today:
        return f"{change.team}: {change.today} → {change.proposed} GPUs, because its jobs waited ({waits})."
    if need_gpus <= change.proposed:
        return (
            f"{change.team}: {change.today} → {change.proposed} GPUs, because it asked for at most "
            f"{need_gpus:.0f} GPUs 95% of the time others waited, which {change.proposed} still "
            f"covers ({waits})."
        )
    return (
        f"{change.team}: {change.today} → {change.proposed} GPUs, because what it gives up shortens other "
        f"teams' waits more than its own grows ({waits})."
    )


def _team_changes(space: QuotaSpace, today: Judged, result: Judged, chosen: bool) -> tuple[TeamChange, ...]:
    out = []
    for i, entry in enumerate(space.entries):

        def p95(score: ReplayScore, team: str = entry.team) -> float:
            t = score.teams.get(team)
            return t.wait_p95_s if t else 0.0

        def owed(a: ReplayScore, b: ReplayScore, team: str = entry.team) -> float:
            return sum(s.teams[team].violation_s for s in (a, b) if team in s.teams)

        change = TeamChange(
            entry.team,
            entry.pool,
            entry.today,
            result.vector[i],
            (p95(today.fit), p95(result.fit)),
            (p95(today.validation), p95(result.validation)),
            (owed(today.fit, today.validation), owed(result.fit, result.validation)),
            "",
        )
        need = result.fit.teams[entry.team].need_gpus if entry.team in result.fit.teams else 0.0
        out.append(
            TeamChange(
                change.team,
                change.pool,
                change.today,
                change.proposed,
                change.fit_p95,
                change.validation_p95,
                change.violation,
                _reason(change, need, chosen=chosen),
            )
        )
    return tuple(out)


def _fit_caveat(best: Judged) -> str:
    """What the chosen quotas break on the fit days, said rather than hidden (validation decides)."""
    if best.fit_verdict.feasible:
        return ""
    regressions = best.fit_verdict.regressions
    if regressions:
        team, (before, after) = sorted(regressions.items())[0]
        return (
            f"; on the older fit days {team} would have waited longer "
            f"({short_duration(before)} → {short_duration(after)} at p95)"
        )
    return "; on the older fit days it breaks the rules (more guarantee violations or jobs that never start)"


Regret = tuple[float, ...]


def _regret(verdict: Verdict, today: Verdict, objective: Objective) -> Regret:
    """How far a candidate's standing on one fold is behind today's there (negative: ahead)."""
    return tuple(a - b for a, b in zip(verdict.key(objective), today.key(objective), strict=True))


def _standing(f: Judged, today: Judged, objective: Objective) -> tuple[Regret, Regret]:
    """(the worst fold's regret, the regret summed over folds): the worst fold decides, the sum ties.

    With one fold both are that fold's regret, which orders candidates exactly as their validation
    key does (today's key is a constant).
    """
    regrets = [_regret(v, t, objective) for v, t in zip(f.fold_verdicts, today.fold_verdicts, strict=True)]
    total = tuple(sum(parts) for parts in zip(*regrets, strict=True))
    return max(regrets), total


def _beats_today(f: Judged, today: Judged, rules: Rules) -> bool:
    """Better than today's over the folds taken together, and worse on none of them.

    "Worse on a fold" is the rule a team's wait obeys (`Rules.regressed`), applied to the fold's
    mean p95 wait: more than `--max-regression` longer, and an hour or more on one side. A fold
    where everyone waits minutes is not a reason to refuse a candidate for a few seconds; with one
    fold this adds nothing to "better", so one fold chooses exactly as a single window did.
    """

    def figures(score: ReplayScore) -> tuple[float, ...]:
        if rules.objective is Objective.GUARANTEE:
            return (score.violation_s, score.mean_p95_s)
        return (score.mean_p95_s,)

    pairs = list(zip(f.folds, today.folds, strict=True))
    if len(pairs) > 1 and any(rules.regressed(base.mean_p95_s, mine.mean_p95_s) for mine, base in pairs):
        return False
    mine = tuple(sum(x) for x in zip(*(figures(a) for a, _ in pairs), strict=True))
    theirs = tuple(sum(x) for x in zip(*(figures(b) for _, b in pairs), strict=True))
    return mine < theirs


def _broken_fold(f: Judged) -> str:
    """ " on fold k" for the first fold whose rules the candidate breaks ("" with a single window)."""
    if len(f.fold_verdicts) == 1:
        return ""
    k = next(k for k, v in enumerate(f.fold_verdicts) if not v.feasible)
    return f" on fold {k + 1} of {len(f.fold_verdicts)}"


def _choose(
    today: Judged, finalists: Sequence[Judged], space: QuotaSpace, rules: Rules
) -> tuple[Judged | None, str]:
    """The finalist whose worst validation fold is best, among those that keep the rules on every
    fold, are better than today's over the folds and worse on none (`_beats_today`).

    Only the validation days rank: the fit days are what the search optimised, so a candidate's
    fit score is in-sample and breaks ties only; but a candidate must be better than today's there
    too (its objective, not its rules: those may break on the older days, which the report says).
    Ties then go to the smaller move. With one fold this is the candidate with the best validation
    score that keeps the rules and beats today's on both windows.
    """
    eligible = [f for f in finalists if f.vector != today.vector and space.contains(f.vector)]
    good = [f for f in eligible if all(v.feasible for v in f.fold_verdicts)]
    base = today.validation.mean_p95_s
    objective = rules.objective
    ahead = [f for f in good if _beats_today(f, today, rules)]
    # The search's own days must agree: a point no better than today's there has no evidence for
    # it but the validation days, and on Philly at 528 GPUs such a point (one node moved, the same
    # fit score as today's) was 10 % ahead on the validation days and 2 % behind on the days after.
    better = [f for f in ahead if f.fit_verdict.key(objective)[1:] < today.fit_verdict.key(objective)[1:]]
    folds = len(today.folds)
    if better:
        best = min(
            better,
            key=lambda f: (
                _standing(f, today, objective),
                f.fit_verdict.key(objective),
                space.moved_gpus(today.vector, f.vector),
            ),
        )
        worst = ""
        if folds > 1:
            k = max(range(folds), key=lambda i: best.folds[i].mean_p95_s - today.folds[i].mean_p95_s)
            worst = (
                f" (worst of {folds} folds, fold {k + 1}: {short_duration(today.folds[k].mean_p95_s)} → "
                f"{short_duration(best.folds[k].mean_p95_s)})"
            )
        return best, (
            f"{best.label}: mean p95 wait {short_duration(base)} → "
            f"{short_duration(best.validation.mean_p95_s)} on the validation days it never saw{worst}, "
            "no team worse beyond the allowed margin there"
            + ("" if folds == 1 else " on any fold")
            + _fit_caveat(best)
        )
    if not eligible:
        return None, "keep today's quotas: the search found no other quotas to try"
    if ahead:
        first = min(ahead, key=lambda f: _standing(f, today, objective))
        return None, (
            f"keep today's quotas: the best candidate on the validation days ({first.label}, mean p95 "
            f"wait {short_duration(first.validation.mean_p95_s)} vs today's {short_duration(base)}) "
            "was no better than today's on the fit days"
        )
    closest = min(eligible, key=lambda f: _standing(f, today, objective))
    if not good:
        broken = next(v for v in closest.fold_verdicts if not v.feasible)
        where = _broken_fold(closest)
        if broken.regressions:
            team, (before, after) = sorted(broken.regressions.items())[0]
            return None, (
                f"keep today's quotas: the best candidate ({closest.label}) would make {team} wait "
                f"longer ({short_duration(before)} → {short_duration(after)} at p95){where}"
            )
        return None, (
            f"keep today's quotas: the best candidate ({closest.label}) breaks the rules on the "
            f"validation days{where} (more guarantee violations or jobs that never start)"
        )
    if folds > 1:
        return None, (
            f"keep today's quotas: nothing beat them on the validation days without being worse on one "
            f"of its {folds} folds (best: {closest.label}, mean p95 wait "
            f"{short_duration(closest.validation.mean_p95_s)} vs today's {short_duration(base)})"
        )
    return None, (
        f"keep today's quotas: nothing beat them on the validation days (best: {closest.label}, mean "
        f"p95 wait {short_duration(closest.validation.mean_p95_s)} vs today's {short_duration(base)})"
    )


def advise_by_replay(
    policy: Policy,
    jobs: Sequence[SimJob],
    settings: AdviceSettings,
    evaluate_for: Callable[[QuotaSpace, dict[str, Window]], Evaluate],
    on_progress: SearchProgress | None = None,
) -> ReplayAdvice:
    """Search, validate, choose. `evaluate_for(space, windows)` gives the (cached, parallel) replayer."""
    fit, validation = split_history(jobs, settings.validate, settings.half_life_s, settings.fit_window_s)
    folds = split_folds(validation, settings.folds)
    fold_names = tuple(f.name for f in folds)
    pools = demand_pools(policy, jobs)
    largest = largest_jobs(policy, jobs)
    space = build_space(
        policy,
        pools,
        whole_nodes=settings.whole_nodes,
        max_change=settings.max_change,
        largest_job=largest,
        floor_share=settings.floor_share,
    )
    free = build_space(policy, pools, whole_nodes=settings.whole_nodes)
    windows = {"fit": fit, **{f.name: f for f in folds}}
    inner = evaluate_for(space, windows)
    asked: set[tuple[QuotaVector, str]] = set()

    def evaluate(requests: Sequence[tuple[QuotaVector, str]]) -> list[ReplayScore]:
        asked.update(requests)
        return inner(requests)

    rules = settings.rules
    today_vector = space.today()
    today_fit, *today_folds = evaluate([(today_vector, w) for w in ("fit", *fold_names)])
    today_val = pooled_score(today_folds, validation)
    planned = settings.search.max_replays + (1 + len(folds)) * (
        PATH_FINALISTS + SEED_FINALISTS + TRIED_FINALISTS + len(REPORTED)
    )

    def progress(done: int, _planned: int, text: str) -> None:
        if on_progress is not None:
            on_progress(done, planned, text)

    starts = seeds(policy, space, fit)
    trace = search(space, starts, today_fit, evaluate, rules, settings.search, progress)
    reported = {name: vector for name, vector in seeds(policy, free, fit).items() if name in REPORTED}
    reported[TODAY] = today_vector

    candidates: dict[QuotaVector, str] = {}
    for point in reversed(trace.path[-PATH_FINALISTS:]):
        candidates.setdefault(point.vector, point.label if point is not trace.best else "search best")
    ranked_seeds = sorted(
        (s for s in trace.seeds.values() if space.contains(s.vector)),
        key=lambda s: s.verdict.key(settings.objective),
    )
    for s in ranked_seeds[:SEED_FINALISTS]:
        candidates.setdefault(s.vector, s.label)
    others = sorted(
        (
            t
            for t in trace.tried
            if t.verdict.feasible and space.contains(t.vector) and t.vector not in candidates
        ),
        key=lambda t: (t.verdict.key(settings.objective), trace.tried.index(t)),
    )
    for t in others[:TRIED_FINALISTS]:
        candidates.setdefault(t.vector, t.label)
    for name, vector in reported.items():
        candidates.setdefault(vector, name)
        if not space.contains(vector):  # outside --max-change or a job floor: its nearest allowed form
            candidates.setdefault(space.project(vector), f"{name} (within the limits)")
    progress(trace.replays, planned, f"validating {len(candidates)} candidates on the newest days")
    vectors = list(candidates)
    per_vector = 1 + len(folds)
    scores = evaluate([(v, w) for v in vectors for w in ("fit", *fold_names)])
    judged: dict[QuotaVector, Judged] = {}
    for k, vector in enumerate(vectors):
        f, *parts = scores[per_vector * k : per_vector * (k + 1)]
        v = pooled_score(parts, validation)
        judged[vector] = Judged(
            candidates[vector],
            vector,
            f,
            v,
            judge(f, today_fit, rules),
            judge(v, today_val, rules),
            tuple(parts),
            tuple(judge(part, base, rules) for part, base in zip(parts, today_folds, strict=True)),
        )
    today = replace(judged[today_vector], label=TODAY)
    baselines = {name: replace(judged[vector], label=name) for name, vector in reported.items()}
    finalists = tuple(j for j in judged.values() if space.contains(j.vector))
    chosen, why = _choose(today, finalists, space, rules)
    result = chosen if chosen is not None else today
    bootstrap = None
    if chosen is not None:
        bootstrap = week_block_bootstrap(
            [today.fit, today.validation],
            [chosen.fit, chosen.validation],
            [fit, validation],
            resamples=settings.bootstrap_resamples,
            seed=settings.seed,
        )
    proposed = apply_vector(policy, space, chosen.vector) if chosen is not None else policy
    kept = tuple(
        (t.name, q.pool, "dedicated nodes" if t.isolation is Isolation.DEDICATED else "no demand in history")
        for t in policy.teams
        for q in t.quotas
        if all((e.team, e.pool) != (t.name, q.pool) for e in space.entries)
    )
    if on_progress is not None:
        on_progress(len(asked), len(asked), "done")  # the bar ends full
    return ReplayAdvice(
        settings=settings,
        fit=fit,
        validation=validation,
        space=space,
        trace=trace,
        today=today,
        baselines=baselines,
        finalists=finalists,
        chosen=chosen,
        why=why,
        teams=_team_changes(space, today, result, chosen is not None),
        bootstrap=bootstrap,
        current=policy,
        proposed=proposed,
        replays=len(asked),
        kept=kept,
        folds=folds,
    )
