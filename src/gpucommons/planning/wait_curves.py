"""Cheap screening: each team's p95 wait as a function of its own quota, learnt from every replay so far.

Every replay of a quota vector tells, for *every* team at once, what p95 wait it had at the quota it
was given. Read per team, the replays so far draw a curve: wait against nominal quota. Treating the
teams as independent (a team's wait depends mostly on its own guarantee when the cluster is full),
the best combination of levels already seen is a small knapsack: pick one seen level per team so
that Σ quotas fits the pool and Σ waits is least, with no team above what the rules allow. The
replay then says whether the independence held; its answer becomes a new point on every curve.

The curves are made non-increasing (more quota never makes a team wait longer) by pooling adjacent
violators, weighted by how often a level was seen, so a noisy replay cannot make the knapsack
chase it. Only seen levels are used: the curves never extrapolate below the smallest quota a team
was replayed with. GPUs the knapsack leaves over are spread evenly (one pick) or in proportion to
the picked levels (the other); both are brought into the space by `QuotaSpace.project`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucommons.planning.objectives import VIOLATION_SLACK_S_PER_DAY, Objective, Rules
from gpucommons.planning.quota_space import QuotaSpace, QuotaVector
from gpucommons.planning.replay_score import ReplayScore

#: Weights on violation seconds (against p95 wait seconds) the knapsack tries in turn.
VIOLATION_WEIGHTS = (0.0, 1.0, 4.0, 16.0)


@dataclass(frozen=True, slots=True)
class Level:
    gpus: int
    wait_s: float
    #: Mean guarantee violation seen at this level (not smoothed: it need not fall with quota).
    violation_s: float = 0.0


def non_increasing(points: list[tuple[int, float, int]]) -> list[Level]:
    """Pool-adjacent-violators fit of (gpus, mean wait, count), ascending gpus, non-increasing waits."""
    # Each block: (Σ wait × count, Σ count, first index, last index).
    blocks: list[tuple[float, float, int, int]] = []
    for index, (_, wait, count) in enumerate(points):
        blocks.append((wait * count, float(count), index, index))
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            last = blocks.pop()
            total, weight, first, _ = blocks.pop()
            blocks.append((total + last[0], weight + last[1], first, last[3]))
    out = []
    for total, weight, first, last_index in blocks:
        for index in range(first, last_index + 1):
            out.append(Level(points[index][0], total / weight))
    return out


class WaitCurves:
    def __init__(self, space: QuotaSpace) -> None:
        self.space = space
        self._seen: list[dict[int, list[tuple[float, float]]]] = [{} for _ in space.entries]

    def observe(self, vector: QuotaVector, score: ReplayScore) -> None:
        for i, entry in enumerate(self.space.entries):
            team = score.teams.get(entry.team)
            wait = team.wait_p95_s if team is not None and team.jobs else 0.0
            owed = team.violation_s if team is not None else 0.0
            self._seen[i].setdefault(vector[i], []).append((wait, owed))

    def curve(self, slot: int) -> list[Level]:
        seen = sorted(self._seen[slot].items())
        waits = non_increasing([(gpus, sum(w for w, _ in obs) / len(obs), len(obs)) for gpus, obs in seen])
        return [
            Level(lv.gpus, lv.wait_s, sum(v for _, v in obs) / len(obs))
            for lv, (_, obs) in zip(waits, seen, strict=True)
        ]

    def _choices(self, slot: int, today: ReplayScore, rules: Rules) -> list[Level]:
        entry = self.space.entries[slot]
        unit = self.space.pool_of(slot).unit
        levels = [
            lv for lv in self.curve(slot) if lv.gpus % unit == 0 and entry.lower <= lv.gpus <= entry.upper
        ]
        if rules.objective is Objective.WAIT or not levels:
            return levels
        base = today.teams.get(entry.team)
        base_wait = base.wait_p95_s if base is not None and base.jobs else 0.0
        allowed = [lv for lv in levels if not rules.regressed(base_wait, lv.wait_s)]
        return allowed or [min(levels, key=lambda lv: (lv.wait_s, lv.gpus))]

    def _knapsack(
        self, today: ReplayScore, rules: Rules, weight: float
    ) -> tuple[list[float], list[float], float] | None:
        """Levels minimising Σ (wait + weight × violation) per pool; also the even-leftover variant."""
        chosen: list[float] = [0.0] * len(self.space.entries)
        even: list[float] = [0.0] * len(self.space.entries)
        owed = 0.0
        for pool in self.space.pools:
            # DP over the GPUs used so far: total -> (cost, Σ violation, levels); ties to fewer GPUs.
            states: dict[int, tuple[float, float, tuple[int, ...]]] = {0: (0.0, 0.0, ())}
            for slot in pool.slots:
                choices = self._choices(slot, today, rules)
                nxt: dict[int, tuple[float, float, tuple[int, ...]]] = {}
                for used, (cost, violation, picked) in states.items():
                    for lv in choices:
                        total = used + lv.gpus
                        if total > pool.available:
                            continue
                        candidate = (
                            round(cost + lv.wait_s + weight * lv.violation_s, 3),
                            violation + lv.violation_s,
                            (*picked, lv.gpus),
                        )
                        if total not in nxt or candidate < nxt[total]:
                            nxt[total] = candidate
                states = nxt
                if not states:
                    return None
            used, (_, violation, picked) = min(states.items(), key=lambda item: (item[1][0], item[0]))
            owed += violation
            spare = (pool.available - used) / max(len(pool.slots), 1)
            for slot, gpus in zip(pool.slots, picked, strict=True):
                chosen[slot] = float(gpus)
                even[slot] = gpus + spare
        return chosen, even, owed

    def best_combinations(self, today: ReplayScore, rules: Rules) -> list[QuotaVector]:
        """The knapsack's pick with leftovers spread evenly, then in proportion; [] if none fits.

        Under `balanced`, violations count too: the knapsack is solved with growing weight on them
        until the levels picked were seen with no more violation than today's in all.
        """
        weights = (0.0,) if rules.objective is Objective.WAIT else VIOLATION_WEIGHTS
        picked = None
        for weight in weights:
            picked = self._knapsack(today, rules, weight)
            if picked is None:
                return []
            if picked[2] <= today.violation_s + VIOLATION_SLACK_S_PER_DAY * max(today.days, 1.0):
                break
        assert picked is not None
        chosen, even, _ = picked
        return list(dict.fromkeys([self.space.project(even), self.space.project(chosen)]))
