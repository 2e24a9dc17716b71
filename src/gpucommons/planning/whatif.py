"""What-if comparison: the same trace under several policies and/or engines, side by side.

Each variant is a (policy, engine) pair. Finish-time fairness needs each policy's `static` replay;
it is computed once per policy and shared by that policy's variants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpucommons.domain import Policy
from gpucommons.sim import RunOutcome, SimConfig, SimJob, SimResult, run_simulation, simulate

#: (variant label, phase, jobs settled, jobs in all).
CompareProgress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Variant:
    label: str
    policy: Policy
    engine: str


@dataclass(frozen=True, slots=True)
class Comparison:
    variants: tuple[Variant, ...]
    results: tuple[SimResult, ...]

    def summaries(self) -> list[dict[str, Any]]:
        return [r.report["summary"] for r in self.results]

    def team_names(self) -> list[str]:
        names: set[str] = set()
        for summary in self.summaries():
            names.update(summary["teams"])
        return sorted(names)


def variants_of(policies: Sequence[tuple[str, Policy]], engines: Sequence[str]) -> list[Variant]:
    """Every policy under every engine; labels say only what differs between variants."""
    many_policies, many_engines = len(policies) > 1, len(engines) > 1
    out = []
    for name, policy in policies:
        for engine in engines:
            parts = ([name] if many_policies or not many_engines else []) + ([engine] if many_engines else [])
            out.append(Variant(" · ".join(parts) or name, policy, engine))
    return out


def compare(
    variants: Sequence[Variant],
    jobs: list[SimJob],
    config: SimConfig,
    on_progress: CompareProgress | None = None,
) -> Comparison:
    """Run every variant (plus one `static` baseline per distinct policy, for fairness)."""
    statics: dict[int, RunOutcome] = {}
    results: list[SimResult] = []

    def progress(label: str) -> Callable[[int, int], None] | None:
        if on_progress is None:
            return None
        return lambda done, total: on_progress(label, done, total)

    def phases(label: str) -> Callable[[str, int, int], None] | None:
        if on_progress is None:
            return None
        return lambda _phase, done, total: on_progress(label, done, total)

    for variant in variants:
        key = id(variant.policy)
        if key not in statics:
            label = f"static baseline of {variant.label.split(' · ')[0]}"
            statics[key] = simulate(variant.policy, jobs, replace(config, engine="static"), progress(label))
        results.append(
            run_simulation(
                variant.policy,
                jobs,
                replace(config, engine=variant.engine),
                static=statics[key],
                on_progress=phases(variant.label),
            )
        )
    return Comparison(tuple(variants), tuple(results))


def _fmt(pattern: str) -> Callable[[Any], str]:
    return pattern.format


#: The rows of the side-by-side table: (label, summary key, formatter).
SUMMARY_ROWS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("GPU utilization", "gpu_utilization", _fmt("{:.1%}")),
    # `utilization_bound`: greedy FIFO with backfill and no quotas; not a bound (docs/simulator.md).
    ("greedy FIFO reference", "utilization_bound", _fmt("{:.1%}")),
    ("makespan", "makespan_s", lambda s: short_duration(float(s))),
    ("idle while waiting (GPU-h)", "idle_while_waiting_gpu_hours", _fmt("{:,.0f}")),
    ("preemptions", "preemptions", _fmt("{:,}")),
    ("lost work (GPU-h)", "lost_gpu_hours", _fmt("{:,.1f}")),
    ("jobs that never fit", "never_fit_jobs", _fmt("{:,}")),
)


def summary_rows(comparison: Comparison) -> list[list[str]]:
    """Rows of formatted cells: metric, then one cell per variant (cluster-wide figures)."""
    rows = []
    summaries = comparison.summaries()
    for label, key, fmt in SUMMARY_ROWS:
        rows.append([label] + ["—" if s.get(key) is None else fmt(s[key]) for s in summaries])
    rows.append(
        ["guarantee violation (team-h)"]
        + [f"{sum(t['guarantee_violation_s'] for t in s['teams'].values()) / 3600:,.1f}" for s in summaries]
    )
    return rows


def team_rows(comparison: Comparison) -> list[list[str]]:
    """Per team: 'p50 / p95 wait · fairness' per variant."""
    rows = []
    for team in comparison.team_names():
        cells = [team]
        for s in comparison.summaries():
            t = s["teams"].get(team)
            if t is None:
                cells.append("—")
                continue
            fairness = t.get("finish_time_fairness")
            cells.append(
                f"{short_duration(t['wait_p50_s'])} / {short_duration(t['wait_p95_s'])}"
                + ("" if fairness is None else f" · {fairness:.2f}")
            )
        rows.append(cells)
    return rows


def short_duration(seconds: float) -> str:
    """45s, 12m, 3.4h, 2.1d: waits span seconds to weeks, and a table column is narrow."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
