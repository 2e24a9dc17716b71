"""Score a policy by replaying a window of history: what each team waited, and whether it was owed GPUs.

The history is cut in time (a *rolling split*): the older part is the *fit* window the search
optimises on, the newer part the *validation* window it is judged on, never seen while searching.
Each window is replayed on its own, from an empty cluster, with the engine the cluster runs.

In the fit window older jobs weigh less: a job submitted `a` seconds before the window's end weighs
`0.5 ** (a / half_life)`, so a team whose work shifted (Philly's 6214e9 went from ~9,000 jobs a
week to ~1,000) is judged mostly on what it does now. Weighted percentiles reduce to the simulator's
own (linear interpolation between closest ranks, as in the `wait_p95_s` of docs/design.md,
contract 3) when every job weighs 1.

Pure: the windows are values and the replay is the deterministic simulator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpucommons.domain import Policy
from gpucommons.sim import RunOutcome, SimConfig, SimJob, simulate
from gpucommons.sim.stats import percentile

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class ValidationSplit:
    """`last:25%` (the newest quarter of the history's span) or `last:7d` (the newest 7 days)."""

    share: float | None = None
    duration_s: float | None = None

    @staticmethod
    def parse(text: str) -> ValidationSplit:
        match = re.fullmatch(r"\s*last:\s*([0-9]+(?:\.[0-9]+)?)\s*(%|d|h)\s*", text)
        if match is None:
            raise ValueError(f"--validate {text!r}: give last:P% (e.g. last:25%) or last:Nd (e.g. last:7d)")
        value, unit = float(match.group(1)), match.group(2)
        if unit == "%":
            if not 0 < value < 100:
                raise ValueError(f"--validate {text!r}: the share must be between 0% and 100%, exclusive")
            return ValidationSplit(share=value / 100)
        if value <= 0:
            raise ValueError(f"--validate {text!r}: the validation window must be longer than 0")
        return ValidationSplit(duration_s=value * (DAY if unit == "d" else HOUR))

    def cut(self, start_s: float, end_s: float) -> float:
        """The instant where validation starts, for a history spanning [start_s, end_s]."""
        if self.share is not None:
            return end_s - self.share * (end_s - start_s)
        assert self.duration_s is not None
        return end_s - self.duration_s

    def describe(self) -> str:
        if self.share is not None:
            return f"last {self.share:.0%}"
        assert self.duration_s is not None
        days = self.duration_s / DAY
        return f"last {days:g} days" if days >= 1 else f"last {self.duration_s / HOUR:g} hours"


@dataclass(frozen=True, slots=True)
class Window:
    """Jobs submitted in [start_s, end_s), replayed on their own; `half_life_s` None = no decay."""

    name: str
    start_s: float
    end_s: float
    jobs: tuple[SimJob, ...]
    half_life_s: float | None = None

    def weight(self, submit_s: float) -> float:
        if self.half_life_s is None:
            return 1.0
        return float(0.5 ** ((self.end_s - submit_s) / self.half_life_s))

    @property
    def days(self) -> float:
        return (self.end_s - self.start_s) / DAY


class SplitError(ValueError):
    """The history cannot be split into a fit and a validation window (too short, or one side empty)."""


def split_history(
    jobs: Sequence[SimJob],
    validate: ValidationSplit,
    half_life_s: float | None,
    fit_window_s: float | None = None,
) -> tuple[Window, Window]:
    """The fit window (older, decayed) and the validation window (newer, every job weighs 1).

    `fit_window_s` keeps only the newest that many seconds before the validation days in the fit
    window. Every search replay is of the fit window, so its length is the search's cost; the
    decay already says older jobs matter less (at a 14-day half-life a job 10 days older weighs
    0.6). None: the whole older part.
    """
    if not jobs:
        raise SplitError("the history has no jobs")
    if fit_window_s is not None and fit_window_s <= 0:
        raise SplitError("the fit window must be longer than 0")
    start = min(j.submit_s for j in jobs)
    last = max(j.submit_s for j in jobs)
    end = last + 1.0  # windows are half-open; the last job belongs to the history
    cut = validate.cut(start, end)
    fit_start = start if fit_window_s is None else max(start, cut - fit_window_s)
    fit = tuple(j for j in jobs if fit_start <= j.submit_s < cut)
    validation = tuple(j for j in jobs if j.submit_s >= cut)
    if cut <= start or not fit:
        raise SplitError(
            f"--validate {validate.describe()} leaves no jobs to fit on "
            f"(the history spans {(end - start) / DAY:.1f} days"
            + ("" if fit_window_s is None else f", the fit window is the {fit_window_s / DAY:g} days before")
            + ")"
        )
    if not validation:
        raise SplitError(f"--validate {validate.describe()} leaves no jobs to validate on")
    return Window("fit", fit_start, cut, fit, half_life_s), Window("validation", cut, end, validation, None)


def split_folds(validation: Window, folds: int) -> tuple[Window, ...]:
    """The validation days cut into `folds` consecutive windows of equal length, oldest first.

    Every fold lies after the fit window, so every fold is out of sample for the one search; the
    folds together replay the same days as the single validation window, so validating on folds
    costs about what validating on one window does. One window before a shift in demand says
    nothing about the shift; several say whether a candidate's gain holds over the whole stretch or
    comes from one part of it, which is what the worst fold is for (`replay_advice`).
    """
    if folds < 1:
        raise SplitError("--folds must be at least 1")
    if folds == 1:
        return (validation,)
    length = (validation.end_s - validation.start_s) / folds
    out = []
    for k in range(folds):
        start = validation.start_s + k * length
        end = validation.end_s if k == folds - 1 else start + length
        jobs = tuple(j for j in validation.jobs if start <= j.submit_s < end)
        if not jobs:
            raise SplitError(
                f"--folds {folds}: fold {k + 1} (days {start / DAY:.1f}–{end / DAY:.1f}) of the validation "
                "days has no jobs; give fewer folds or a longer --validate"
            )
        out.append(Window(f"fold {k + 1}", start, end, jobs, None))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TeamScore:
    """One team in one replay. Waits are of the jobs that started (wait = first start − submit)."""

    jobs: int
    weight: float
    wait_p50_s: float
    wait_p95_s: float
    violation_s: float
    #: Jobs still waiting when the replay ran out of events (they could never start).
    never_started: int
    #: What the team asked for (held + pending GPUs, p95 over the hours when work waited somewhere).
    need_gpus: float
    nominal_gpus: float


@dataclass(frozen=True, slots=True)
class ReplayScore:
    window: str
    teams: Mapping[str, TeamScore]
    #: (team, submit_s, wait_s, weight) of every job that started, for the week-block bootstrap.
    samples: tuple[tuple[str, float, float, float], ...] = field(repr=False)
    preemptions: int = 0
    idle_while_waiting_gpu_hours: float = 0.0
    dropped_jobs: int = 0
    #: Length of the replayed window in days.
    days: float = 0.0

    @property
    def mean_p95_s(self) -> float:
        """The objective: the mean over the teams with jobs in the window of their p95 wait."""
        waits = [t.wait_p95_s for t in self.teams.values() if t.jobs]
        return sum(waits) / len(waits) if waits else 0.0

    @property
    def violation_s(self) -> float:
        return sum(t.violation_s for t in self.teams.values())

    @property
    def never_started(self) -> int:
        return sum(t.never_started for t in self.teams.values())


def pooled_score(scores: Sequence[ReplayScore], window: Window) -> ReplayScore:
    """One score for the jobs of several replays (the folds of the validation days) taken together.

    Percentiles are of the pooled jobs, not means of per-fold percentiles, so a team's p95 over
    the folds means what it means over one window; times owed and jobs that never started add up.
    Each fold was replayed from an empty cluster, so this is not a replay of the whole window.
    """
    if len(scores) == 1:
        return scores[0]
    names = list(dict.fromkeys(name for score in scores for name in score.teams))
    samples = tuple(sample for score in scores for sample in score.samples)
    teams = {}
    for name in names:
        parts = [score.teams[name] for score in scores if name in score.teams]
        pairs = [(wait, weight) for team, _, wait, weight in samples if team == name]
        teams[name] = TeamScore(
            jobs=sum(t.jobs for t in parts),
            weight=sum(t.weight for t in parts),
            wait_p50_s=weighted_percentile(pairs, 50),
            wait_p95_s=weighted_percentile(pairs, 95),
            violation_s=sum(t.violation_s for t in parts),
            never_started=sum(t.never_started for t in parts),
            need_gpus=max(t.need_gpus for t in parts),
            nominal_gpus=max(t.nominal_gpus for t in parts),
        )
    return ReplayScore(
        window=window.name,
        teams=teams,
        samples=samples,
        preemptions=sum(s.preemptions for s in scores),
        idle_while_waiting_gpu_hours=sum(s.idle_while_waiting_gpu_hours for s in scores),
        dropped_jobs=sum(s.dropped_jobs for s in scores),
        days=window.days,
    )


def weighted_percentile(pairs: Sequence[tuple[float, float]], q: float) -> float:
    """q-th percentile (0–100) of (value, weight) pairs.

    Positions are `(S_i − w_i) / (S_n − w_n)` (S = running weight), which for equal weights is
    `i / (n − 1)`: numpy's default linear interpolation, the simulator's own percentile.
    """
    if not pairs:
        return 0.0
    ordered = sorted(pairs)
    if len(ordered) == 1:
        return ordered[0][0]
    total = sum(w for _, w in ordered)
    span = total - ordered[-1][1]
    if span <= 0:
        return percentile([v for v, _ in ordered], q)
    x = q / 100.0
    running = 0.0
    prev_pos, prev_value = 0.0, ordered[0][0]
    for value, weight in ordered:
        pos = running / span
        if pos >= x:
            if pos == prev_pos:
                return value
            return prev_value + (value - prev_value) * (x - prev_pos) / (pos - prev_pos)
        prev_pos, prev_value = pos, value
        running += weight
    return ordered[-1][0]


def _need(outcome: RunOutcome) -> dict[str, float]:
    """Per team: p95 of held + pending GPUs over the timeline bins in which some work waited."""
    timeline = outcome.timeline
    teams = list(timeline.held)
    bins = max((len(b) for b in timeline.held.values()), default=0)
    contended = [b for b in range(bins) if sum(timeline.pending[t][b] for t in teams) >= 1.0]
    chosen = contended or list(range(bins))
    return {
        team: percentile([timeline.held[team][b] + timeline.pending[team][b] for b in chosen], 95)
        for team in teams
    }


def score_outcome(outcome: RunOutcome, window: Window) -> ReplayScore:
    waits: dict[str, list[tuple[float, float]]] = {}
    never: dict[str, int] = {}
    samples = []
    for run in outcome.runs:
        team = run.job.team
        if run.first_start_s is None:
            never[team] = never.get(team, 0) + 1
            continue
        weight = window.weight(run.job.submit_s)
        wait = run.first_start_s - run.job.submit_s
        waits.setdefault(team, []).append((wait, weight))
        samples.append((team, run.job.submit_s, wait, weight))
    need = _need(outcome)
    teams = {}
    for name, meter in outcome.meter.teams.items():
        pairs = waits.get(name, [])
        teams[name] = TeamScore(
            jobs=len(pairs) + never.get(name, 0),
            weight=sum(w for _, w in pairs),
            wait_p50_s=weighted_percentile(pairs, 50),
            wait_p95_s=weighted_percentile(pairs, 95),
            violation_s=meter.violation_s,
            never_started=never.get(name, 0),
            need_gpus=need.get(name, 0.0),
            nominal_gpus=sum(meter.nominal.values()),
        )
    return ReplayScore(
        window=window.name,
        teams=teams,
        samples=tuple(samples),
        preemptions=outcome.preemptions,
        idle_while_waiting_gpu_hours=outcome.meter.idle_while_waiting_unit_s / HOUR,
        dropped_jobs=outcome.resolution.refused_count,
        days=window.days,
    )


def score_replay(policy: Policy, window: Window, engine: str) -> ReplayScore:
    """Replay `window` under `policy` with `engine`; jobs the policy cannot name are dropped (counted)."""
    config = SimConfig(engine=engine, drop_unknown=True, timeline_bins=200)
    return score_outcome(simulate(policy, list(window.jobs), config), window)
