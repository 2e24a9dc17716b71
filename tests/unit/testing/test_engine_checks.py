"""The cycle checks of `gpucommons.testing.strategies` on cases hypothesis found them wrong in.

They judge every cycle of the engine's property tests, so a check stricter than the engine's rules
fails runs that are right (found with `ENGINE_FUZZ_EXAMPLES=3000`)."""

from __future__ import annotations

from gpucommons.engine import EngineConfig
from gpucommons.testing.builders import make_policy, make_task
from gpucommons.testing.strategies import Job, MiniSim

T = make_task


def test_a_preemptor_is_checked_in_the_pool_of_its_victims() -> None:
    """At 930 s, j0b takes its own team's j5 in pool `big` and team b's j4 reclaims j2 in `small`
    (fair share). Once both victims stop, j0b resumes in `big`, where its victim was: a check
    that placed it in the first pool with room put it in `small`, and found no room for j4."""
    policy = (
        make_policy()
        .pool("big", nodes=3, gpus_per_node=2)
        .pool("small", nodes=1, gpus_per_node=2)
        .cohort("cluster", big=2)
        .team("a", cohort="cluster", small=0, big=4, within_team="lower_priority")
        .team("b", cohort="cluster", big=0, small=2, reclaim="lower_priority")
        .team("c", cohort="cluster", big=0)
        .fair_share()
        .build()
    )

    def job(name: str, team: str, gpus: int, klass: str, seq: int, at: float, *pools: str) -> Job:
        task = T(name).team(team).gpus(gpus).klass(klass).seq(seq).pools(*pools).no_checkpoint().obj()
        return Job(task, at, 1230.0 if at < 900 else 30.0)

    jobs = [
        job("j0", "a", 2, "production", 0, 30.0),
        job("j1", "b", 2, "production", 1, 0.0, "big"),
        job("j2", "a", 2, "interactive", 2, 0.0),
        job("j3", "b", 3, "production", 3, 0.0),
        job("j4", "b", 2, "production", 4, 0.0, "small"),
        job("j5", "a", 2, "interactive", 5, 0.0),
        job("j0b", "a", 2, "production", 100, 930.0),
    ]
    result = MiniSim(policy, EngineConfig.commons(), grace_s=0.0).run(jobs)
    assert {victim: n for victim, n in result.preemptions.items()} == {"j5": 1, "j2": 1}
    assert result.finished == len(jobs)
