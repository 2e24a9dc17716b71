"""The utilization bound: a work-conserving FIFO scheduler with backfill and no quotas."""

from __future__ import annotations

from gpucommons.engine.types import EngineConfig
from gpucommons.sim.bound import utilization_bound
from gpucommons.sim.resolve import resolve
from gpucommons.testing.sim import job, policy, team


def test_fifo_with_backfill_starts_a_small_job_past_a_blocked_big_one() -> None:
    p = policy(team("a", 4), team("b", 4))
    jobs = [
        job("j1", "a", 0, 10, 6),
        job("j2", "b", 0, 10, 4),
        job("j3", "a", 0, 10, 2),
        job("end", "b", 20, 1, 1),
    ]
    resolved = resolve(p, jobs, EngineConfig.commons()).jobs
    units = {j.job.job_id: float(j.job.resources.gpus) for j in resolved}
    out = utilization_bound({"gpu": 8.0}, resolved, units, (0, 20))
    # 0–10: j1 (6) + j3 (2) = 8 GPUs; 10–20: j2 (4). Held 80 + 40 in a 20 s window of 8 GPUs.
    assert out.utilization == 120 / 160
    assert out.makespan_s == 21


def test_jobs_bigger_than_their_pools_are_counted_and_skipped() -> None:
    p = policy(team("a", 8))
    resolved = resolve(
        p, [job("huge", "a", 0, 10, 16), job("ok", "a", 5, 10, 8)], EngineConfig.commons()
    ).jobs
    out = utilization_bound({"gpu": 8.0}, resolved, {"huge": 16.0, "ok": 8.0}, (0, 5))
    assert out.unplaceable == 1
    assert out.utilization == 0.0
