"""Benchmark: Philly October 2017 (47,192 jobs) on examples/philly-oct-704.yaml under each engine.

Prints, for each engine and each checkpoint setting (none, and 30 min for every job):
simulator speed (wall and CPU seconds of the engine run alone; jobs/s per CPU second, since the
machine is shared), utilization against the work-conserving bound, preemptions, lost and
overhead GPU-hours, idle-while-waiting GPU-hours, broken-guarantee hours; then per team the
p50/p95 wait and finish-time fairness (JCT under sharing ÷ JCT under static).

    python bench/sim_philly.py                 # everything (~a few minutes)
    python bench/sim_philly.py --engine kueue --checkpoint none
    python bench/sim_philly.py --gpus 528 --checkpoint none     # 66 nodes, quotas × 0.75
    python bench/sim_philly.py --engine kueue+spread --engine commons+spread --checkpoint none
    python bench/sim_philly.py --profile commons   # cProfile of one run
    python bench/sim_philly.py --tiny              # 10 jobs of 10,000 s each, every engine

`--tiny` times a trace whose cost is not the engine's: ten long jobs submitted a second apart, so
the timeline's bins (window / 400 = 0.0225 s) are tiny next to the jobs (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpucommons.domain.resources import Resources
from gpucommons.policy import load_policy
from gpucommons.sim import SimConfig, SimJob, read_trace, simulate, with_default_checkpoint_interval
from gpucommons.sim.report import build_report
from gpucommons.sim.runner import bound_for

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "examples" / "traces" / "philly_vc_jobs_2017-10.csv"
DEFAULT_POLICY = ROOT / "examples" / "philly-oct-704.yaml"
#: Static first: the others' fairness needs it. `kueue+spread` is what a Kueue cluster does (kube-
#: scheduler places the pods, LeastAllocated); plain `kueue` counts quota only, a bound.
ENGINES = ("static", "kueue", "kueue+spread", "commons")
#: Every engine with every placement mode, for `--engine` (the issue's "every engine and placement").
CHOICES = (
    *ENGINES,
    *(f"{e}+{m}" for e in ("static", "kueue", "commons") for m in ("none", "spread", "pack")),
)


def _in_order(asked: list[str] | None) -> list[str]:
    """The engines to run: the default four in their order (static first), then the others asked."""
    if not asked:
        return list(ENGINES)
    return [e for e in ENGINES if e in asked] + [e for e in dict.fromkeys(asked) if e not in ENGINES]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--policy", type=Path, default=DEFAULT_POLICY)
    ap.add_argument(
        "--engine", action="append", choices=CHOICES, help="repeatable; default: the four of ENGINES"
    )
    ap.add_argument("--checkpoint", action="append", choices=("none", "30m"), help="repeatable; default both")
    ap.add_argument("--restart-overhead", type=float, default=0.0)
    ap.add_argument(
        "--gpus", type=int, choices=(704, 528), default=704, help="528: 66 nodes, every quota × 0.75"
    )
    ap.add_argument("--profile", choices=CHOICES, help="profile one run (no checkpoints) and print the top")
    ap.add_argument("--tiny", action="store_true", help="time the 10-job trace of 10,000-s jobs instead")
    args = ap.parse_args()

    policy = load_policy(args.policy)
    if args.gpus != 704:
        from advise import scaled  # the sibling script's scaling, so both benches use one policy

        policy = scaled(policy, args.gpus / 704)
    if args.tiny:
        return tiny(policy, _in_order(args.engine))
    with args.trace.open(encoding="utf-8", newline="") as handle:
        base_jobs = read_trace(handle, source=str(args.trace))
    from gpucommons import _native

    build = "compiled (mypyc)" if _native.compiled() else "Python sources"
    print(
        f"trace {args.trace.name}: {len(base_jobs):,} jobs · policy {args.policy.name} at {args.gpus} GPUs"
        f" · engine {build}"
    )

    if args.profile:
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        simulate(policy, base_jobs, SimConfig(engine=args.profile))
        profiler.disable()
        print(f"{args.profile}: {time.perf_counter() - started:.1f} s under the profiler")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        return 0

    engines = _in_order(args.engine)
    settings = args.checkpoint or ["none", "30m"]
    for setting in settings:
        jobs = with_default_checkpoint_interval(base_jobs, 1800 if setting == "30m" else None)
        config = SimConfig(restart_overhead_s=args.restart_overhead)
        reports: dict[str, dict[str, Any]] = {}
        static_outcome = None
        print(f"\n## checkpoint interval: {setting} · restart overhead {args.restart_overhead:g} s")
        print(
            f"{'engine':14} {'wall s':>6} {'CPU s':>6} {'jobs/s':>7} {'util':>6} {'bound':>6} {'preempt':>8} "
            f"{'lost GPU-h':>10} {'ovh GPU-h':>9} {'idle-wait GPU-h':>15} {'violation h':>11} "
            f"{'never fit':>9}"
        )
        for engine in engines:
            started, cpu_started = time.perf_counter(), time.process_time()
            outcome = simulate(policy, jobs, replace(config, engine=engine))
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            if engine == "static":
                static_outcome = outcome
            report = build_report(outcome, bound_for(outcome), static_outcome)
            s = reports.setdefault(engine, report["summary"])
            violation_h = sum(t["guarantee_violation_s"] for t in s["teams"].values()) / 3600
            print(
                f"{engine:14} {elapsed:6.1f} {cpu:6.1f} {len(jobs) / cpu:7.0f} {s['gpu_utilization']:6.1%} "
                f"{s['utilization_bound']:6.1%} {s['preemptions']:8,} {s['lost_gpu_hours']:10,.1f} "
                f"{s['overhead_gpu_hours']:9,.1f} {s['idle_while_waiting_gpu_hours']:15,.0f} "
                f"{violation_h:11,.1f} {s['never_fit_jobs']:9,}"
            )
            sys.stdout.flush()
        print("\nper team: wait p50 / p95 (s) · fairness (JCT shared ÷ JCT static)")
        print(f"{'team':8} {'quota':>5} {'jobs':>6} " + " ".join(f"{e:>28}" for e in engines))
        for name, t0 in reports[engines[0]]["teams"].items():
            cells = []
            for engine in engines:
                t = reports[engine]["teams"][name]
                fairness = t["finish_time_fairness"]
                cells.append(
                    f"{t['wait_p50_s']:>9,.0f} /{t['wait_p95_s']:>9,.0f} · "
                    + ("   — " if fairness is None else f"{fairness:4.2f}")
                )
            print(f"{name:8} {t0['nominal_gpus']:>5} {t0['jobs']:>6} " + " ".join(f"{c:>28}" for c in cells))
    return 0


def tiny(policy: Any, engines: list[str]) -> int:
    """Ten 10,000-s jobs of 8 GPUs, one a second, round-robin over the policy's teams."""
    teams = [t.name for t in policy.teams]
    jobs = [SimJob(f"j{i}", teams[i % len(teams)], float(i), 10_000.0, Resources(8)) for i in range(10)]
    print(f"tiny trace: {len(jobs)} jobs of 10,000 s, submitted over 9 s")
    for engine in engines:
        started, cpu_started = time.perf_counter(), time.process_time()
        outcome = simulate(policy, jobs, SimConfig(engine=engine))
        build_report(outcome, bound_for(outcome))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        bins = outcome.timeline.length
        c0 = time.process_time()
        outcome.timeline.held  # noqa: B018 - what a plot or a replay score pays on top
        outcome.timeline.pending  # noqa: B018
        made = time.process_time() - c0
        print(
            f"{engine:14} wall {elapsed:6.3f} s  CPU {cpu:6.3f} s  ({bins:,} timeline bins; "
            f"making them: {made:.3f} s CPU)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
