"""A task becomes an engine request in one place (`engine.requests.task_request`): a stored task
and a trace job that describe the same task give the same `TaskRequest`, so the simulator's
prediction starts from what the live scheduler sees."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucommons.domain.resources import Resources
from gpucommons.engine.requests import task_request
from gpucommons.policy import parse_policy
from gpucommons.server.workers.attempts import task_request as stored_task_request
from gpucommons.sim.jobs import SimJob
from gpucommons.sim.simulator import SimConfig, Simulation
from gpucommons.store.models import TaskRow

POLICY = parse_policy("""
cluster:
  name: requests
  pools:
    - {name: h100, gpu_type: H100, nodes: 1, gpus_per_node: 8}
    - {name: a100, gpu_type: A100, nodes: 1, gpus_per_node: 8}
priority_classes:
  - {name: experiment, value: 100}
  - {name: production, value: 1000, preemptible: false}
default_priority_class: experiment
teams:
  - {name: nlp, quota: {h100: {gpus: 4}, a100: {gpus: 4}}}
""")

SRC = Path(__file__).resolve().parents[3] / "src" / "gpucommons"


def _row(
    pool: str | None, klass: str, value: int, origin: str = "commons", checkpoint: str = "on-signal"
) -> TaskRow:
    return TaskRow(
        id="j1",
        team="nlp",
        gpus=2,
        cpu_milli=4000,
        memory_mib=0,
        priority_class=klass,
        priority_value=value,
        seq=0,
        queued_at=30.0,
        pool_request=pool,
        origin=origin,
        checkpoint_mode=checkpoint,
    )


@pytest.mark.parametrize("pool", [None, "a100"])
@pytest.mark.parametrize("klass", ["experiment", "production"])
def test_a_stored_task_and_a_trace_job_give_the_same_request(pool: str | None, klass: str) -> None:
    job = SimJob("j1", "nlp", 30.0, 60.0, Resources(2, 4000), priority_class=klass, pool=pool)
    sim = Simulation(POLICY, [job], SimConfig())
    from_trace = sim._request(sim.runs[0], 30.0)
    from_store = stored_task_request(_row(pool, klass, POLICY.priority_class(klass).value), POLICY)
    assert from_trace == from_store
    assert from_store.pools == ((pool,) if pool else ())
    assert from_store.preemptible is (klass == "experiment")


@pytest.mark.parametrize(("mode", "checkpointed"), [("none", False), ("on-signal", True), ("every", True)])
def test_a_task_is_checkpointed_when_it_declared_its_saves(mode: str, checkpointed: bool) -> None:
    """Consolidation moves only checkpointed tasks; a trace job always saves (the job model)."""
    request = stored_task_request(_row(None, "experiment", 100, checkpoint=mode), POLICY)
    assert request.checkpointed is checkpointed


def test_a_class_that_left_the_policy_makes_an_ordinary_preemptible_task() -> None:
    request = stored_task_request(_row(None, "retired", 700), POLICY)
    assert (request.priority, request.preemptible) == (700, True)


def test_work_started_on_the_cluster_directly_is_never_preempted() -> None:
    assert not stored_task_request(_row(None, "experiment", 100, origin="cluster"), POLICY).preemptible
    assert not task_request(
        "x",
        "nlp",
        Resources(1),
        "experiment",
        100,
        seq=1,
        queued_at=0.0,
        pool=None,
        policy=POLICY,
        stoppable=False,
        checkpointed=True,
    ).preemptible


def test_only_the_engine_maps_a_task_to_a_request() -> None:
    """The server and the simulator build requests only through `engine.requests` (the simulator's
    fit probe in `sim/resolve.py` asks about a request size, not about a task)."""
    builders = sorted(
        path.relative_to(SRC).as_posix()
        for package in ("server", "sim")
        for path in (SRC / package).rglob("*.py")
        if re.search(r"\bTaskRequest\(", path.read_text())
    )
    assert builders == ["sim/resolve.py"]
