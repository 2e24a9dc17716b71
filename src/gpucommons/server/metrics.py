"""Prometheus metrics (`/metrics`): one registry per app, gauges read from the scheduler's state.

Counters and the cycle-latency histogram are pushed by the scheduler's hooks; the per-team gauges
are computed at scrape time from the engine's state, so they can never drift from what it decides on.

With several API processes on one port (`commons up --workers N`) a scrape reaches whichever process
accepts it, and only the leader counts admissions. So `commons up` then sets prometheus_client's
`PROMETHEUS_MULTIPROC_DIR` before anything imports it: every process writes its counters and
histograms to files there, and each scrape adds up all processes' (`MultiProcessCollector`); the
gauges are still computed from the answering process's view.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from gpucommons.engine.types import Decisions
from gpucommons.server.settings import METRICS_DIR_ENV
from gpucommons.server.workers.outputs import SchedulerHooks


@dataclass(frozen=True, slots=True)
class TeamPoolGauge:
    team: str
    pool: str
    used: int
    borrowed: int
    idle_quota: int


@dataclass(frozen=True, slots=True)
class GaugeSnapshot:
    team_pools: tuple[TeamPoolGauge, ...]
    free_gpus: dict[str, int]
    queue_length: dict[str, int]


class _StateCollector(Collector):
    def __init__(self, snapshot: Callable[[], GaugeSnapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._snapshot()
        used = GaugeMetricFamily(
            "commons_gpus_used", "GPUs held by the team's tasks", labels=["team", "pool"]
        )
        borrowed = GaugeMetricFamily(
            "commons_gpus_borrowed", "GPUs the team holds above its nominal quota", labels=["team", "pool"]
        )
        idle = GaugeMetricFamily(
            "commons_gpus_idle_quota", "Nominal GPUs of the team it is not using", labels=["team", "pool"]
        )
        for g in snap.team_pools:
            used.add_metric([g.team, g.pool], g.used)
            borrowed.add_metric([g.team, g.pool], g.borrowed)
            idle.add_metric([g.team, g.pool], g.idle_quota)
        free = GaugeMetricFamily("commons_pool_gpus_idle", "GPUs of the pool no task holds", labels=["pool"])
        for pool, n in sorted(snap.free_gpus.items()):
            free.add_metric([pool], n)
        queue = GaugeMetricFamily("commons_queue_length", "Pending tasks per team", labels=["team"])
        for team, n in sorted(snap.queue_length.items()):
            queue.add_metric([team], n)
        yield from (used, borrowed, idle, free, queue)


#: Wait buckets (seconds): from a second to a day, as a queue is felt (Kueue's are exponential too).
WAIT_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    14400.0,
    43200.0,
    86400.0,
)
#: API latency buckets (seconds).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics(SchedulerHooks):
    """The app's registry. Names follow Kueue's (`kueue_admitted_workloads_total` →
    `commons_admitted_tasks_total`, a ClusterQueue → a team, a flavor → a pool); the older
    `commons_admissions_total` / `commons_preemptions_total` stay for dashboards that use them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        #: Where every API process writes its counters (`commons up --workers N`), else None.
        self.shared_dir = os.environ.get(METRICS_DIR_ENV) or None
        #: The gauges of this process's view, once `watch_state` gave them.
        self._gauges: _StateCollector | None = None
        self.admissions = Counter(
            "commons_admissions", "Tasks admitted", ["team", "pool", "borrowing"], registry=self.registry
        )
        self.preemptions = Counter(
            "commons_preemptions", "Preemptions issued", ["team", "reason"], registry=self.registry
        )
        self.admitted_tasks = Counter(
            "commons_admitted_tasks",
            "Tasks admitted, per team, pool and whether it borrowed (kueue_admitted_workloads_total)",
            ["team", "pool", "borrowing"],
            registry=self.registry,
        )
        self.admission_wait = Histogram(
            "commons_admission_wait_time_seconds",
            "Time from entering the queue (submit, or requeue after a preemption) to admission "
            "(kueue_admission_wait_time_seconds)",
            ["team", "priority_class"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.cycle_seconds = Histogram(
            "commons_scheduling_cycle_seconds",
            "Duration of one scheduling cycle",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.http_requests = Counter(
            "commons_http_requests", "API requests", ["method", "status"], registry=self.registry
        )
        self.api_latency = Histogram(
            "commons_api_request_duration_seconds",
            "Time to answer an API request, per method, route template and status code",
            ["method", "route", "code"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def watch_state(self, snapshot: Callable[[], GaugeSnapshot]) -> None:
        self._gauges = _StateCollector(snapshot)
        self.registry.register(self._gauges)

    def cycle_done(self, seconds: float, decisions: Decisions) -> None:
        self.cycle_seconds.observe(seconds)

    def admitted(
        self,
        team: str,
        pool: str,
        borrowed_gpus: int,
        *,
        waited_s: float | None = None,
        priority_class: str = "",
    ) -> None:
        borrowing = "yes" if borrowed_gpus else "no"
        self.admissions.labels(team, pool, borrowing).inc()
        self.admitted_tasks.labels(team, pool, borrowing).inc()
        if waited_s is not None:
            self.admission_wait.labels(team, priority_class).observe(max(0.0, waited_s))

    def preempted(self, team: str, reason: str, *, preempting_team: str = "") -> None:
        self.preemptions.labels(team, reason).inc()

    def request_done(self, method: str, route: str, status: int, seconds: float) -> None:
        self.http_requests.labels(method, str(status)).inc()
        self.api_latency.labels(method, route, str(status)).observe(seconds)

    def render(self) -> bytes:
        if self.shared_dir is None:
            return generate_latest(self.registry)
        # Every process's counters and histograms from their files (this one's included), and the
        # gauges of this process's view; the live registry would count this process twice.
        registry = CollectorRegistry()
        MultiProcessCollector(registry, self.shared_dir)  # type: ignore[no-untyped-call]
        if self._gauges is not None:
            registry.register(self._gauges)
        return generate_latest(registry)
