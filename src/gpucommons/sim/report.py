"""The result of docs/design.md, contract 3 (`R.json`) from a run: summary, per-team figures and
the jobs list.

Field names are the contract's and are never renamed; additions (engine, finish-time fairness,
counts of jobs that never fit or never finished, ...) sit beside them. Output is deterministic:
teams in name order, jobs in submission order, numbers rounded the same way every time, so the same
inputs give byte-identical JSON.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from gpucommons.sim.bound import BoundOutcome
from gpucommons.sim.simulator import JobRun, RunOutcome
from gpucommons.sim.stats import mean, percentile, tidy

HOUR = 3600.0


def _hours(unit_s: float) -> float:
    return round(unit_s / HOUR, 3)


def _finished(run: JobRun) -> bool:
    return run.finish_s is not None and run.first_start_s is not None


def job_rows(outcome: RunOutcome) -> list[dict[str, Any]]:
    return [
        {
            "job_id": run.job.job_id,
            "team": run.job.team,
            "submit_s": tidy(run.job.submit_s),
            "first_start_s": None if run.first_start_s is None else tidy(run.first_start_s),
            "finish_s": None if run.finish_s is None else tidy(run.finish_s),
            "preemptions": run.preemptions,
            "lost_gpu_s": tidy(run.lost_unit_s),
        }
        for run in outcome.runs
    ]


def finish_time_fairness(shared: RunOutcome, static: RunOutcome) -> dict[str, float | None]:
    """Per team: Σ JCT under sharing ÷ Σ JCT under `static`, over jobs that finished in both runs.

    Below 1 the team's jobs finish sooner when the cluster is shared. None when the team has no job
    that finished in both (for example, every job of the team is too big for its static quota).
    """
    static_jct = {r.job.job_id: r.finish_s - r.job.submit_s for r in static.runs if _finished(r)}  # type: ignore[operator]
    num: dict[str, float] = defaultdict(float)
    den: dict[str, float] = defaultdict(float)
    for run in shared.runs:
        if _finished(run) and run.job.job_id in static_jct:
            num[run.job.team] += run.finish_s - run.job.submit_s  # type: ignore[operator]
            den[run.job.team] += static_jct[run.job.job_id]
    return {
        team: (round(num[team] / den[team], 4) if den.get(team) else None)
        for team in sorted(t.name for t in shared.policy.teams)
    }


def _team_summary(outcome: RunOutcome, fairness: dict[str, float | None] | None) -> dict[str, Any]:
    by_team: dict[str, list[JobRun]] = defaultdict(list)
    for run in outcome.runs:
        by_team[run.job.team].append(run)
    teams: dict[str, Any] = {}
    for team in sorted(t.name for t in outcome.policy.teams):
        runs = by_team.get(team, [])
        done = [r for r in runs if _finished(r)]
        waits = [r.first_start_s - r.job.submit_s for r in done]  # type: ignore[operator]
        jcts = [r.finish_s - r.job.submit_s for r in done]  # type: ignore[operator]
        meter = outcome.meter.teams[team]
        teams[team] = {
            "jobs": len(runs),
            "wait_p50_s": tidy(percentile(waits, 50), 1),
            "wait_p95_s": tidy(percentile(waits, 95), 1),
            "jct_mean_s": tidy(mean(jcts), 1),
            "gpu_hours": _hours(meter.unit_s),
            "borrowed_gpu_hours": _hours(meter.borrowed_unit_s),
            "guarantee_violation_s": tidy(meter.violation_s, 1),
            "finish_time_fairness": None if fairness is None else fairness.get(team),
            "nominal_gpus": tidy(sum(meter.nominal.values())),
            "finished_jobs": len(done),
            "never_fit_jobs": sum(1 for r in runs if r.state == JobRun.NEVER),
            "wait_mean_s": tidy(mean(waits), 1),
            "preemptions": sum(r.preemptions for r in runs),
            "lost_gpu_hours": _hours(sum(r.lost_unit_s for r in runs)),
        }
    return teams


def build_report(
    outcome: RunOutcome, bound: BoundOutcome | None, static: RunOutcome | None = None
) -> dict[str, Any]:
    """The R.json document. `static` (a run of the same jobs under `static`) adds fairness per team."""
    w0, w1 = outcome.window
    span = w1 - w0
    capacity = outcome.capacity_units
    utilization = outcome.meter.held_in_window_unit_s / (capacity * span) if capacity and span > 0 else 0.0
    fairness = None
    if static is not None:
        fairness = finish_time_fairness(outcome, static)
    runs = outcome.runs
    summary: dict[str, Any] = {
        "jobs": len(runs),
        "makespan_s": tidy(outcome.makespan_s, 1),
        "gpu_utilization": round(utilization, 4),
        "utilization_bound": None if bound is None else round(bound.utilization, 4),
        "idle_while_waiting_gpu_hours": _hours(outcome.meter.idle_while_waiting_unit_s),
        "preemptions": outcome.preemptions,
        "lost_gpu_hours": _hours(sum(r.lost_unit_s for r in runs)),
        "teams": _team_summary(outcome, fairness),
        "engine": outcome.engine,
        "metered_resource": outcome.unit,
        "capacity_gpus": tidy(capacity),
        "window_s": tidy(span, 1),
        "restart_overhead_s": tidy(outcome.config.restart_overhead_s),
        "finished_jobs": sum(1 for r in runs if _finished(r)),
        "never_fit_jobs": sum(1 for r in runs if r.state == JobRun.NEVER),
        "unfinished_jobs": len(outcome.stuck),
        "dropped_jobs": outcome.resolution.refused_count,
        "held_gpu_hours": _hours(outcome.meter.held_total_unit_s),
        "overhead_gpu_hours": _hours(sum(r.overhead_unit_s for r in runs)),
        "preemption_loop_jobs": sum(1 for r in runs if r.stalled_preemptions >= 2),
    }
    return {"summary": summary, "jobs": job_rows(outcome)}


def dumps(report: dict[str, Any]) -> str:
    """Stable JSON: the summary indented for people, one job per line so the file diffs well."""
    head = json.dumps(report["summary"], indent=2, ensure_ascii=False)
    jobs = ",\n  ".join(
        json.dumps(row, separators=(", ", ": "), ensure_ascii=False) for row in report["jobs"]
    )
    body = f"[\n  {jobs}\n ]" if report["jobs"] else "[]"
    extra = {k: v for k, v in report.items() if k not in ("summary", "jobs")}
    tail = "".join(f',\n "{k}": {json.dumps(v, indent=2, ensure_ascii=False)}' for k, v in extra.items())
    return '{"summary": ' + head.replace("\n", "\n ") + ',\n "jobs": ' + body + tail + "\n}\n"
