"""The scheduler with what a cluster backend (Slurm) reports besides its own attempts: nodes out of
service, work started on the cluster without us, and starts made several at a time (in-memory
executor; the real Slurm runs in tests/e2e/slurm)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from sqlalchemy import select
from tests.integration.server.conftest import Harness

from gpucommons.backends.fake import FakeExecutor
from gpucommons.backends.ports import BackendTraits, ForeignWork, Handle, Launch
from gpucommons.domain.model import Policy
from gpucommons.store.models import UsageIntervalRow

POLICY = """
cluster:
  name: cluster
  pools:
    - {name: gpu, gpu_type: H100, nodes: 2, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 2s}
default_priority_class: normal
teams:
  - {name: a, quota: {gpu: {gpus: 4}}, preemption: {reclaim: any, within_team: lower_priority}}
  - {name: b, quota: {gpu: {gpus: 4}}, preemption: {reclaim: any, within_team: lower_priority}}
"""


class ClusterLike(FakeExecutor):
    """The in-memory executor with a cluster's reports, and slow starts that may overlap."""

    traits = BackendTraits(name="fake-cluster", concurrent_starts=4)

    def __init__(self) -> None:
        from gpucommons.backends.clock import SystemClock

        super().__init__(SystemClock())
        self.out: dict[str, dict[int, str]] = {}
        self.foreign: tuple[ForeignWork, ...] = ()
        self.overlapping = 0
        self.most_at_once = 0
        self._count = threading.Lock()

    def use_policy(self, policy: Policy) -> None:
        return None

    def start(self, launch: Launch) -> Handle:
        with self._count:
            self.overlapping += 1
            self.most_at_once = max(self.most_at_once, self.overlapping)
        time.sleep(0.1)
        with self._count:
            self.overlapping -= 1
            return super().start(launch)

    def out_of_service(self) -> Mapping[str, Mapping[int, str]]:
        return self.out

    def foreign_work(self) -> tuple[ForeignWork, ...]:
        return self.foreign


def test_starts_overlap_and_every_one_is_stored(make_harness: Callable[..., Harness]) -> None:
    executor = ClusterLike()
    h = make_harness(POLICY, executor=executor)
    ids = [str(h.submit(team="ab"[i % 2], gpus=1, command=["true"])["id"]) for i in range(8)]
    h.run_until(lambda: all(h.task(t)["state"] in ("running", "succeeded") for t in ids), what="all to start")
    assert executor.most_at_once > 1, "the starts ran at the same time"
    assert sorted(a.launch.task_id for a in executor.attempts) == sorted(ids), "each started once"


def test_a_node_out_of_service_takes_no_new_work_and_the_queue_says_why(
    make_harness: Callable[..., Harness],
) -> None:
    executor = ClusterLike()
    executor.out = {"gpu": {0: "n1 down: Not responding"}}
    h = make_harness(POLICY, executor=executor)
    first = h.submit(team="a", gpus=4, command=["sleep", "60"])
    second = h.submit(team="b", gpus=4, command=["sleep", "60"])
    h.run_until(lambda: h.task(str(first["id"]))["state"] == "running", what="the first to run")
    h.cycle()
    placed = [a.launch.placement for a in executor.attempts]
    assert placed == [((1, 4),)], "only node 1 takes work"
    queue = h.http.get("/api/v1/queue", headers=h.admin).json()
    (waiting,) = [q for q in queue if q["task_id"] == second["id"]]
    assert "out of service: n1 down: Not responding" in str(waiting)
    executor.out = {}
    h.run_until(lambda: h.task(str(second["id"]))["state"] == "running", what="node 0 back in service")
    assert executor.attempts[-1].launch.placement == ((0, 4),)


def test_work_started_on_the_cluster_is_a_running_unpreemptible_task_metered_until_it_ends(
    make_harness: Callable[..., Harness],
) -> None:
    executor = ClusterLike()
    h = make_harness(POLICY, executor=executor)
    started = time.time() - 5
    executor.foreign = (
        ForeignWork(
            ref="slurm:77", team="a", pool="gpu", placement=((0, 4),), started_at=started, name="by-hand"
        ),
    )
    h.cycle()
    tasks = h.http.get("/api/v1/tasks", headers=h.admin).json()
    (found,) = [t for t in tasks if t["name"] == "by-hand"]
    assert (found["team"], found["state"], found["gpus"], found["origin"]) == ("a", "running", 4, "cluster")
    # The job holds a's quota on node 0; a borrows b's idle GPUs on node 1 (nothing lands on node 0).
    mine = h.submit(team="a", gpus=4, command=["sleep", "60"])
    h.run_until(lambda: h.task(str(mine["id"]))["state"] == "running", what="a's task")
    assert [a.launch.placement for a in executor.attempts] == [((1, 4),)]
    # b takes its quota back: the victim is a's own task, never the job GPU Commons did not start.
    theirs = h.submit(team="b", gpus=4, command=["sleep", "60"])
    h.run_until(lambda: h.task(str(theirs["id"]))["state"] == "running", what="b's reclaim")
    assert h.task(str(mine["id"]))["state"] == "pending" and h.task(str(found["id"]))["state"] == "running"

    executor.foreign = ()
    h.cycle()
    assert h.task(str(found["id"]))["state"] == "succeeded"
    with h.ctx.db.session() as session:
        (interval,) = session.scalars(select(UsageIntervalRow).where(UsageIntervalRow.task_id == found["id"]))
        assert interval.team == "a" and interval.gpus == 4 and interval.end is not None
        assert abs(interval.start - started) < 1 and interval.end - interval.start >= 5
