"""The discrete-event loop: replay jobs through the engine the live scheduler uses.

Instant by instant: the loop takes in the submissions at time `t`, then runs the live scheduler's
own loop (`engine.instant.settle_instant`): pop every event at `t` (finishes, ends of grace
periods), apply them to the engine's `ClusterState`, decide, apply, again until a cycle changes
nothing (Kueue runs cycles back to back; decisions take no simulated time). Submissions are merged
in from the time-ordered job list rather than pushed on the heap.

Job model (docs/design.md, contract 3): a job runs `duration_s` of work on its request, gang-admitted. On
preemption it keeps its resources for its class's grace period. A job with a checkpoint interval
`c` keeps computing during the grace period and, when it stops, falls back to the last multiple
of `c` it reached (the rest is lost work); a job without one saves its state when told to stop, so
it loses nothing, but does no useful work during the grace period. A restarted job first pays
`restart_overhead_s` (holding its resources) before its work resumes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gpucommons.domain import Policy, Resources
from gpucommons.engine import ClusterState
from gpucommons.engine.instant import settle_instant
from gpucommons.engine.requests import task_request
from gpucommons.engine.types import Admission, Decisions, EngineConfig, Pending, PendingCode, TaskRequest
from gpucommons.sim.errors import SimulationError
from gpucommons.sim.events import EventKind, EventQueue
from gpucommons.sim.jobs import SimJob
from gpucommons.sim.metrics import Meter, Timeline
from gpucommons.sim.resolve import Resolution, ResolvedJob, resolve

ProgressCallback = Callable[[int, int], None]
#: Told every cycle's decisions with their instant (tests compare them with the live scheduler's).
DecisionsCallback = Callable[[float, Decisions], None]


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How to replay: which engine (`commons`, `kueue`, `static`, each optionally with a placement
    mode: `kueue+spread` is Kueue with kube-scheduler's default placement), the job model's restart
    overhead, what to do with jobs the policy cannot name, and the guards against runaway engines."""

    engine: str = "commons"
    restart_overhead_s: float = 0.0
    #: Drop jobs naming unknown teams/classes/pools (with a count) instead of refusing the trace.
    drop_unknown: bool = False
    #: Decision cycles allowed at one instant before the run is declared a zero-time loop.
    max_cycles_per_instant: int = 10_000
    #: Preemptions of one job after which the run is declared a livelock.
    max_preemptions_per_job: int = 1_000
    timeline_bins: int = 400

    def engine_config(self) -> EngineConfig:
        return EngineConfig.named(self.engine)


class JobRun:
    """The mutable life of one job in one run (internal to the loop; reports read it at the end)."""

    __slots__ = (
        "admitted_at",
        "epoch",
        "finish_at",
        "finish_s",
        "first_start_s",
        "has_run",
        "job",
        "lost_unit_s",
        "overhead_unit_s",
        "pool",
        "preemptions",
        "resolved",
        "saved",
        "saved_at_admit",
        "stalled_preemptions",
        "state",
        "units",
        "work_start",
    )

    # `Final`: class constants, not instance defaults, when the module is compiled (mypyc).
    WAITING: Final = "waiting"
    RUNNING: Final = "running"
    STOPPING: Final = "stopping"
    DONE: Final = "done"
    NEVER: Final = "never"

    def __init__(self, resolved: ResolvedJob, units: float) -> None:
        self.resolved = resolved
        self.job: SimJob = resolved.job
        self.units = units
        self.state = JobRun.NEVER if resolved.never_fits else JobRun.WAITING
        self.pool = resolved.pools[0]
        self.first_start_s: float | None = None
        self.finish_s: float | None = None
        self.preemptions = 0
        self.stalled_preemptions = 0
        self.lost_unit_s = 0.0
        #: Held but doing no work: grace periods spent saving, restart overheads.
        self.overhead_unit_s = 0.0
        self.saved = 0.0  # work (seconds) kept across a preemption
        self.saved_at_admit = 0.0
        self.admitted_at = 0.0
        self.work_start = 0.0  # when work resumes after an admission (after restart overhead)
        self.finish_at = math.inf
        self.epoch = 0
        self.has_run = False

    def progress(self, now: float) -> float:
        return min(self.job.duration_s, self.saved + max(0.0, now - self.work_start))

    def release(self, now: float, reached: float, kept: float) -> None:
        """Account one admission that ends at `now` having reached `reached` and keeping `kept`.

        Held time = overhead + (reached − saved at admission): whatever was held but not spent on
        work that was reached is overhead; reached work that is not kept is lost.
        """
        self.lost_unit_s += (reached - kept) * self.units
        self.overhead_unit_s += ((now - self.admitted_at) - (reached - self.saved_at_admit)) * self.units
        self.saved = kept

    def unsaved_unit_s(self, now: float) -> float:
        interval = self.job.checkpoint_interval_s
        if interval is None:
            return 0.0
        done = self.progress(now)
        return (done - math.floor(done / interval) * interval) * self.units


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """Raw result of one run; `sim.report` turns it into the JSON of docs/design.md, contract 3."""

    engine: str
    policy: Policy
    config: SimConfig
    resolution: Resolution
    runs: tuple[JobRun, ...]
    meter: Meter
    timeline: Timeline
    preemptions: int
    makespan_s: float
    window: tuple[float, float]
    capacity_units: float
    unit: str
    #: Jobs still waiting when nothing was left to happen, with the engine's last reason.
    stuck: dict[str, Pending]


def metered_unit(policy: Policy) -> str:
    """GPUs when the cluster has any; otherwise CPUs (the Kueue baseline is a CPU-only cluster)."""
    return "gpus" if any(p.gpus_per_node for p in policy.pools) else "cpus"


def _units(resources: Resources, unit: str) -> float:
    return float(resources.gpus) if unit == "gpus" else resources.cpu_milli / 1000.0


def _capacity(policy: Policy, unit: str) -> dict[str, float]:
    return {p.name: _units(p.capacity, unit) for p in policy.pools}


class Simulation:
    """One replay of a job list under one policy and one engine configuration."""

    def __init__(
        self,
        policy: Policy,
        jobs: list[SimJob],
        config: SimConfig,
        on_decisions: DecisionsCallback | None = None,
    ) -> None:
        self.policy = policy
        self.config = config
        self.engine_config = config.engine_config()
        self.resolution = resolve(policy, jobs, self.engine_config, drop_unknown=config.drop_unknown)
        self.unit = metered_unit(policy)
        self.runs = [JobRun(r, _units(r.job.resources, self.unit)) for r in self.resolution.jobs]
        self.index = {run.job.job_id: i for i, run in enumerate(self.runs)}
        submits = [r.job.submit_s for r in self.resolution.jobs]
        self.window = (min(submits), max(submits)) if submits else (0.0, 0.0)
        # "Beyond grace periods": a reclaim legitimately takes as long as the victims' grace period,
        # so time is forgiven up to the longest grace period among the classes this trace uses.
        grace = {
            r.priority_class.grace_period_s for r in self.resolution.jobs if r.priority_class.preemptible
        }
        self.meter = Meter(
            _capacity(policy, self.unit),
            {t.name: {q.pool: _units(q.nominal, self.unit) for q in t.quotas} for t in policy.teams},
            self.window,
            grace_allowance_s=float(max(grace, default=0)),
            timeline_bins=config.timeline_bins,
        )
        self.state = ClusterState(policy)
        self.events = EventQueue()
        self.on_decisions = on_decisions
        self.on_progress: ProgressCallback | None = None
        self.report_every = 1
        self.settled = 0
        self.makespan_end = self.window[0]
        self.preemptions = 0
        self.with_interval_running: set[int] = set()
        self.last_pending: dict[str, Pending] = {}

    # -- applying events ----------------------------------------------------------------------
    def _request(self, run: JobRun, now: float) -> TaskRequest:
        """A trace job as the engine sees it, through the mapping the live scheduler uses too."""
        r = run.resolved
        return task_request(
            run.job.job_id,
            run.job.team,
            run.job.resources,
            r.priority_class.name,
            r.priority_class.value,
            seq=r.seq,
            queued_at=now,
            pool=run.job.pool,
            policy=self.policy,
            # The job model: every job saves its state, at its interval or within its grace period.
            checkpointed=True,
        )

    def _enqueue(self, i: int, now: float, *, first: bool) -> None:
        run = self.runs[i]
        if first:
            self.state.add_pending(self._request(run, now))
        else:
            self.state.requeue(run.job.job_id, now)
        run.state = JobRun.WAITING
        self.meter.queued(run.job.team, run.resolved.pools[0], run.units)

    def _admit(self, i: int, admission: Admission, now: float) -> None:
        run = self.runs[i]
        if run.state != JobRun.WAITING:
            raise SimulationError(f"the engine admitted job {run.job.job_id}, which is {run.state}")
        self.state.admit(run.job.job_id, admission, now)
        self.meter.dequeued(run.job.team, run.resolved.pools[0], run.units)
        self.meter.acquired(run.job.team, admission.pool, run.units)
        run.pool = admission.pool
        run.state = JobRun.RUNNING
        if run.first_start_s is None:
            run.first_start_s = now
        run.admitted_at = now
        run.saved_at_admit = run.saved
        run.work_start = now + (self.config.restart_overhead_s if run.has_run else 0.0)
        run.has_run = True
        run.epoch += 1
        run.finish_at = run.work_start + (run.job.duration_s - run.saved)
        self.events.push(run.finish_at, EventKind.FINISH, i, run.epoch)
        if run.job.checkpoint_interval_s is not None:
            self.with_interval_running.add(i)

    def _preempt(self, i: int, preemptor_id: str, now: float) -> bool:
        run = self.runs[i]
        if run.state != JobRun.RUNNING:
            return False  # already stopping: a repeated decision changes nothing
        # Naming the preemptor keeps its claim on what the victim frees (docs/design.md, trap 1).
        self.state.mark_preempting(run.job.job_id, preemptor_id)
        run.state = JobRun.STOPPING
        run.preemptions += 1
        self.preemptions += 1
        if run.preemptions > self.config.max_preemptions_per_job:
            raise SimulationError(
                f"job {run.job.job_id} was preempted {run.preemptions} times: the engine is in a "
                f"preemption loop (at t={now:g}s)"
            )
        stop_at = now + run.resolved.priority_class.grace_period_s
        if run.job.checkpoint_interval_s is None:
            # Saves on the signal: progress so far is kept, the grace period does no useful work.
            run.saved = run.progress(now)
            run.epoch += 1  # the pending FINISH no longer happens
            self.events.push(stop_at, EventKind.STOP, i, run.epoch)
        elif run.finish_at > stop_at:
            self.events.push(stop_at, EventKind.STOP, i, run.epoch)
        # else: it completes its work within the grace period; its FINISH stands.
        return True

    def _stop(self, i: int, now: float) -> None:
        run = self.runs[i]
        before = run.saved_at_admit
        interval = run.job.checkpoint_interval_s
        if interval is not None:
            reached = run.progress(now)
            run.release(now, reached, math.floor(reached / interval) * interval)
            self.with_interval_running.discard(i)
        else:
            run.release(now, run.saved, run.saved)  # saved on the signal, at preemption time
        run.stalled_preemptions = run.stalled_preemptions + 1 if run.saved <= before else 0
        run.epoch += 1
        self.meter.released(run.job.team, run.pool, run.units)
        self._enqueue(i, now, first=False)

    def _finish(self, i: int, now: float) -> None:
        run = self.runs[i]
        self.state.finish(run.job.job_id, now)
        run.release(now, run.job.duration_s, run.job.duration_s)
        self.meter.released(run.job.team, run.pool, run.units)
        run.state = JobRun.DONE
        run.finish_s = now
        run.epoch += 1
        self.with_interval_running.discard(i)

    # -- between the cycles of an instant (`engine.instant.InstantHands`) ----------------------
    def take_events(self, now: float) -> None:
        """Finishes and ends of grace periods due at `now` (a zero grace period's stop is due at the
        instant that chose the victim, and is applied only after that cycle)."""
        while self.events.next_time() == now:
            _, kind, i, epoch = self.events.pop()
            run = self.runs[i]
            if epoch != run.epoch:
                continue
            if kind is EventKind.FINISH:
                self._finish(i, now)
                self.settled += 1
                self.makespan_end = max(self.makespan_end, now)
                if self.on_progress is not None and self.settled % self.report_every == 0:
                    self.on_progress(self.settled, len(self.runs))
            else:
                self._stop(i, now)

    def refresh_victim_inputs(self, now: float) -> bool:
        """Unsaved work only steers *which* victim is taken, so it is refreshed only when a
        preemption is on the table (refreshing every running job at every instant is the
        simulator's most expensive step otherwise), and the cycle is decided again."""
        if not self.with_interval_running:
            return False
        for j in sorted(self.with_interval_running):
            run = self.runs[j]
            if run.state == JobRun.RUNNING:
                self.state.set_unsaved_work(run.job.job_id, run.unsaved_unit_s(now))
        return True

    def apply(self, decisions: Decisions, now: float) -> bool:
        changed = False
        for p in decisions.preempt:
            changed |= self._preempt(self.index[p.victim_id], p.preemptor_id, now)
        for a in decisions.admit:
            self._admit(self.index[a.task_id], a.admission, now)
            changed = True
        self.last_pending = decisions.pending
        if self.on_decisions is not None and not decisions.empty:
            self.on_decisions(now, decisions)
        return changed

    # -- the loop ------------------------------------------------------------------------------
    def run(self, on_progress: ProgressCallback | None = None) -> RunOutcome:
        total = len(self.runs)
        order = [i for i, run in enumerate(self.runs) if run.state == JobRun.WAITING]
        self.settled = total - len(order)  # never-fit jobs are settled from the start
        self.on_progress = on_progress
        self.report_every = max(total // 200, 1)
        self.makespan_end = self.window[0]
        next_submit = 0
        while next_submit < len(order) or len(self.events):
            t_event = self.events.next_time()
            t_submit = self.runs[order[next_submit]].job.submit_s if next_submit < len(order) else math.inf
            now = t_submit if t_event is None or t_submit <= t_event else t_event
            self.meter.advance(now)
            while next_submit < len(order) and self.runs[order[next_submit]].job.submit_s == now:
                self._enqueue(order[next_submit], now, first=True)
                next_submit += 1
            # The loop the live scheduler runs too (`engine.instant`): events, then cycles back to
            # back at `now` until one changes nothing.
            instant = settle_instant(
                self.state, now, self.engine_config, self, max_cycles=self.config.max_cycles_per_instant
            )
            if not instant.settled:
                raise SimulationError(
                    f"the engine made {instant.cycles} decision cycles at t={now:g}s without time "
                    "moving: a zero-time preemption loop"
                )
        if on_progress is not None:
            on_progress(self.settled, total)
        stuck = {
            run.job.job_id: self.last_pending.get(run.job.job_id, _NOT_DECIDED)
            for run in self.runs
            if run.state == JobRun.WAITING
        }
        return RunOutcome(
            engine=self.config.engine,
            policy=self.policy,
            config=self.config,
            resolution=self.resolution,
            runs=tuple(self.runs),
            meter=self.meter,
            timeline=self.meter.timeline(),
            preemptions=self.preemptions,
            makespan_s=self.makespan_end - self.window[0],
            window=self.window,
            capacity_units=sum(self.meter.capacity.values()),
            unit=self.unit,
            stuck=stuck,
        )


_NOT_DECIDED = Pending(PendingCode.NOT_CONSIDERED, "the engine never decided on it")


def simulate(
    policy: Policy,
    jobs: list[SimJob],
    config: SimConfig | None = None,
    on_progress: ProgressCallback | None = None,
    on_decisions: DecisionsCallback | None = None,
) -> RunOutcome:
    """Replay `jobs` under `policy` with the engine `config.engine` names."""
    return Simulation(policy, jobs, config or SimConfig(), on_decisions).run(on_progress)
