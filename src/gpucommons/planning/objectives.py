"""What "better quotas" means: the objectives `commons advise --objective` offers, and their rules.

Every candidate is judged against *today's quotas replayed on the same window* (never against a
number from another replay), so the judgement carries the window's own load and noise:

- `wait`: the mean over teams of their p95 wait, nothing else.
- `guarantee`: the total time teams were owed their nominal quota and did not have it (the
  `guarantee_violation_s` of docs/design.md, contract 3), then the mean p95 wait; no team's p95 may
  regress (below).
- `balanced` (the default): the mean p95 wait, provided no team regresses and guarantee violations
  are not above today's.

A team *regresses* when its p95 wait is worse than today's by more than `max_regression` (10 %) and
at least one of the two is `exempt_below` (1 h) or more: minutes either way are not a grievance.
Jobs that never start count too: a candidate may not leave more of them than today.

A candidate that breaks a rule is *infeasible*; infeasible candidates rank after every feasible
one, by how far they break the rules, so the search can still walk out of an infeasible start.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpucommons.planning.replay_score import HOUR, ReplayScore

#: Violations within this many seconds per day of the window of today's are "not above today's": a
#: minute a day over all teams is the noise of one reclaim landing on either side of a grace period.
VIOLATION_SLACK_S_PER_DAY = 60.0


class Objective(StrEnum):
    WAIT = "wait"
    GUARANTEE = "guarantee"
    BALANCED = "balanced"

    def describe(self) -> str:
        return {
            Objective.WAIT: "shortest mean p95 wait over teams",
            Objective.GUARANTEE: "fewest guarantee violations, then shortest mean p95 wait; no team worse",
            Objective.BALANCED: "shortest mean p95 wait with no team worse and no more guarantee violations",
        }[self]


@dataclass(frozen=True, slots=True)
class Rules:
    objective: Objective = Objective.BALANCED
    max_regression: float = 0.10
    exempt_below_s: float = HOUR

    def tolerated_s(self, today_s: float) -> float:
        """The longest p95 wait that is no regression against today's `today_s` (exemption aside)."""
        return today_s * (1 + self.max_regression)

    def regressed(self, today_s: float, proposed_s: float) -> bool:
        if max(today_s, proposed_s) < self.exempt_below_s:
            return False
        return proposed_s > self.tolerated_s(today_s)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A candidate's standing on one window, relative to today's quotas on that window."""

    mean_p95_s: float
    violation_s: float
    #: Teams whose p95 regressed: team -> (today, candidate) seconds.
    regressions: dict[str, tuple[float, float]]
    extra_violation_s: float
    extra_never_started: int
    #: How far the rules are broken (0 = feasible): regressed hours + extra violation hours + jobs.
    infeasibility: float

    @property
    def feasible(self) -> bool:
        return self.infeasibility == 0

    def key(self, objective: Objective) -> tuple[float, ...]:
        """Sort key: feasible first, then the objective (smaller is better)."""
        if objective is Objective.GUARANTEE:
            return (self.infeasibility, round(self.violation_s, 3), round(self.mean_p95_s, 3))
        return (self.infeasibility, round(self.mean_p95_s, 3))


def judge(score: ReplayScore, today: ReplayScore, rules: Rules) -> Verdict:
    regressions: dict[str, tuple[float, float]] = {}
    excess_s = 0.0
    if rules.objective is not Objective.WAIT:
        for name, team in score.teams.items():
            base = today.teams.get(name)
            if base is None or not team.jobs:
                continue
            if rules.regressed(base.wait_p95_s, team.wait_p95_s):
                regressions[name] = (base.wait_p95_s, team.wait_p95_s)
                excess_s += team.wait_p95_s - rules.tolerated_s(base.wait_p95_s)
    extra_violation = 0.0
    if rules.objective is Objective.BALANCED:
        slack = VIOLATION_SLACK_S_PER_DAY * max(score.days, 1.0)
        extra_violation = max(score.violation_s - today.violation_s - slack, 0.0)
    extra_never = max(score.never_started - today.never_started, 0)
    infeasibility = (excess_s + extra_violation) / HOUR + extra_never
    return Verdict(
        mean_p95_s=score.mean_p95_s,
        violation_s=score.violation_s,
        regressions=regressions,
        extra_violation_s=extra_violation,
        extra_never_started=extra_never,
        infeasibility=round(infeasibility, 6),
    )
