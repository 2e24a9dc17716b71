"""The Slurm executor's pure decisions, on recorded Slurm output: nodes ↔ engine indices, job → exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucommons.backends.ports import ExitStatus, Handle
from gpucommons.backends.slurm.inventory import build_inventory
from gpucommons.backends.slurm.jobs import WATCH_FIELDS, parse_scontrol_jobs, parse_squeue
from gpucommons.backends.slurm.nodes import parse_nodes
from gpucommons.backends.slurm.tracking import (
    PlacementError,
    exit_status,
    foreign_work,
    handle_for,
    job_of,
    latest_attempt,
    out_of_service,
    placement_nodes,
    pool_nodes,
)
from gpucommons.domain.model import Pool

DATA = Path(__file__).parents[2] / "data" / "slurm"
POOL = Pool(name="gpu", gpu_type="H100", nodes=4, gpus_per_node=8)


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_a_down_node_keeps_its_index_and_is_out_of_service_with_slurms_reason() -> None:
    nodes = parse_nodes(read("nodes_down.txt"))
    inventory = build_inventory(nodes, [POOL])
    order = pool_nodes(nodes, inventory)
    assert order == {"gpu": ("n1", "n2", "n3", "n4")}
    out = out_of_service(inventory, order, {"gpu": 4})
    assert out["gpu"][2].startswith("n3 down") and 0 not in out["gpu"]


def test_a_pool_declaring_more_nodes_than_slurm_has_gets_the_missing_ones_out_of_service() -> None:
    nodes = parse_nodes(read("nodes_mixed_drain.txt"))
    inventory = build_inventory(nodes, [POOL])
    out = out_of_service(inventory, pool_nodes(nodes, inventory), {"gpu": 6})
    assert out["gpu"][3].startswith("n4 drained")
    assert "has no Slurm node" in out["gpu"][4] and "has no Slurm node" in out["gpu"][5]


def test_the_engines_placement_becomes_node_names_and_one_gpu_count() -> None:
    order = {"gpu": ("n1", "n2", "n3", "n4")}
    assert placement_nodes("gpu", [(2, 3)], order) == (("n3",), 3)
    assert placement_nodes("gpu", [(0, 8), (3, 8)], order) == (("n1", "n4"), 8)
    with pytest.raises(PlacementError, match="same GPUs on each"):
        placement_nodes("gpu", [(0, 8), (1, 4)], order)
    with pytest.raises(PlacementError, match="has 4 Slurm nodes; the engine placed on node 5"):
        placement_nodes("gpu", [(5, 1)], order)
    with pytest.raises(PlacementError, match="pool 'cpu' has no Slurm nodes"):
        placement_nodes("cpu", [(0, 1)], order)


def test_a_handle_stores_the_job_id_and_whether_it_spans_nodes() -> None:
    handle = handle_for("t1", "42", 2)
    assert (handle.pid, handle.start_marker) == (42, "slurm:42:2")
    assert job_of(handle) == ("42", True)
    assert job_of(Handle("t1", 42, "1796141217")) is None  # a local process's handle


def test_exit_codes_signals_and_end_times_come_from_scontrol() -> None:
    before = {j.job_id: j for j in parse_scontrol_jobs(read("jobs_running_pending.txt"))}
    assert any(exit_status(j) is None for j in before.values()), "the recording has running jobs"
    jobs = {j.job_id: j for j in parse_scontrol_jobs(read("jobs_ended.txt"))}
    jobs |= {k: j for k, j in before.items() if exit_status(j) is not None}
    statuses = {job_id: exit_status(job) for job_id, job in jobs.items()}
    ended = {j: s for j, s in statuses.items() if s is not None}
    assert all(s.ended_at is not None for s in ended.values())
    plain = next(s for j, s in ended.items() if jobs[j].exit is not None and jobs[j].exit.code == 7)
    assert (plain.code, plain.signal, plain.lost) == (7, None, None)
    signalled = [s for j, s in ended.items() if jobs[j].exit is not None and jobs[j].exit.signal == 15]
    assert signalled and all(s.signal == 15 and s.code is None for s in signalled)


def test_a_node_failure_is_work_lost_to_the_machine() -> None:
    (job,) = parse_scontrol_jobs(read("jobs_node_failure.txt"))
    status = exit_status(job)
    assert status is not None and status.lost is not None and "NODE_FAIL" in status.lost
    assert not status.succeeded


def test_a_running_job_on_a_node_that_went_down_is_lost_at_once() -> None:
    running = [j for j in parse_scontrol_jobs(read("jobs_running_pending.txt")) if j.state == "RUNNING"]
    job = next(j for j in running if j.nodes)
    status = exit_status(job, lost_nodes=[job.nodes[-1]])
    assert status == ExitStatus(
        code=None, signal=9, lost=f"node {job.nodes[-1]} went down under job {job.job_id}"
    )
    assert exit_status(job, lost_nodes=["elsewhere"]) is None


def test_a_restarted_server_finds_the_newest_attempt_of_a_task_by_its_job_name() -> None:
    jobs = parse_scontrol_jobs(read("jobs_running_pending.txt"))
    ours = [j for j in jobs if j.name.startswith("gpucommons:")]
    task = ours[0].name.split(":")[1]
    assert latest_attempt(jobs, task) is not None
    assert latest_attempt(jobs, "t-never") is None


def test_plain_sbatch_jobs_are_the_usage_of_their_accounts_team() -> None:
    jobs = parse_scontrol_jobs(read("jobs_running_pending.txt"))
    order = {"gpu": ("n1", "n2", "n3", "n4")}
    found = foreign_work(jobs, order, {}, "platform", now=1.0)
    refs = {f.ref for f in found}
    assert all(not j.name.startswith("gpucommons:") for j in jobs if f"slurm:{j.job_id}" in refs)
    for work in found:
        assert work.team == "platform" and work.pool == "gpu" and work.placement


def test_the_rounds_squeue_gives_phases_end_times_and_exit_zero_for_completed_jobs_only() -> None:
    jobs = {j.job_id: j for j in parse_squeue(read("squeue_watch.txt"), WATCH_FIELDS)}
    completed, failed, gang = jobs["1"], jobs["2"], jobs["3"]
    done = exit_status(completed)
    assert done is not None and done.succeeded and done.ended_at == completed.end_time
    # FAILED: squeue has no exit code; the executor asks scontrol for this job only.
    assert failed.exit is None and failed.end_time is not None
    assert exit_status(gang) is None and gang.nodes == ("n2", "n3") and gang.gpus == 16
    assert {jobs["4"].phase.value, jobs["5"].phase.value} == {"pending"}
    assert latest_attempt(jobs.values(), "t0000000002") == gang
