"""`commons simulate`: replay a trace under a policy and write its result JSON (docs/design.md,
contract 3)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from gpucommons.cli.main import app
from gpucommons.cli.progress import counting_bar
from gpucommons.cli.sim_inputs import fail, load_policy_or_exit, load_trace_or_exit, parse_interval_or_exit
from gpucommons.cli.tables import Col, print_legend, print_table

if TYPE_CHECKING:  # the simulator is imported when a command runs it, not at CLI start-up
    from gpucommons.sim.runner import PhaseProgress

ENGINES = ("commons", "kueue", "static")
console = Console(highlight=False)


def progress_bar() -> Progress:
    return counting_bar(24, "jobs")


def phase_callback(progress: Progress) -> PhaseProgress:
    """Map the simulator's (phase, done, total) callbacks onto one bar per phase."""
    bars: dict[str, Any] = {}

    def update(label: str, done: int, total: int) -> None:
        if label not in bars:
            bars[label] = progress.add_task(label, total=total)
        progress.update(bars[label], completed=done)

    return update


def check_engine(engine: str, placement: str | None = None) -> str:
    """The engine's name as the simulator takes it: `kueue`, or with a placement mode `kueue+spread`."""
    from gpucommons.engine.types import EngineConfig, parse_placement

    base, plus, mode = engine.partition("+")
    if base not in ENGINES:
        raise fail(f"--engine {engine!r}: choose one of {', '.join(ENGINES)} (optionally +none|spread|pack)")
    if placement is not None:
        if plus:
            raise fail(f"--engine {engine!r} names a placement already; drop --placement {placement!r}")
        mode, engine = placement, f"{engine}+{placement}"
    try:
        if plus or placement is not None:
            parse_placement(mode)
        EngineConfig.named(engine)
    except ValueError as exc:
        raise fail(f"--engine {engine!r}: {exc}") from None
    return engine


def summary_columns(summary: dict[str, Any]) -> tuple[Col, ...]:
    """The team whole; at 80 columns preemptions, fairness and completion times go first."""
    unit = "GPU" if summary.get("metered_resource", "gpus") == "gpus" else "CPU"

    def figure(header: str, drop: int = 0) -> Col:
        return Col(header, drop=drop, justify="right")

    return (
        Col("team", keep=True),
        figure("quota"),
        figure("jobs", drop=4),
        figure("p50"),
        figure("p95"),
        figure("JCT", drop=3),
        figure(f"{unit}-h", drop=5),
        figure("borrow"),
        figure("broken"),
        figure("fair", drop=2),
        figure("pre.", drop=1),
    )


def summary_rows(summary: dict[str, Any]) -> list[list[str]]:
    from gpucommons.planning.whatif import short_duration

    rows = []
    for name, t in summary["teams"].items():
        fairness = t.get("finish_time_fairness")
        rows.append(
            [
                escape(name),
                str(t["nominal_gpus"]),
                f"{t['jobs']:,}",
                short_duration(t["wait_p50_s"]),
                short_duration(t["wait_p95_s"]),
                short_duration(t["jct_mean_s"]),
                f"{t['gpu_hours']:,.0f}",
                f"{t['borrowed_gpu_hours']:,.0f}",
                short_duration(t["guarantee_violation_s"]),
                "—" if fairness is None else f"{fairness:.2f}",
                f"{t['preemptions']:,}",
            ]
        )
    return rows


def print_summary(summary: dict[str, Any], title: str, wide: bool = False) -> None:
    from gpucommons.planning.whatif import short_duration

    columns = summary_columns(summary)
    # Explain the columns the table shows: a narrow terminal drops `JCT` and `fair` first.
    shown = {columns[i].header for i in print_table(console, columns, summary_rows(summary), wide, title)}
    legend = {
        "p95": "p50/p95: wait to first start",
        "JCT": "JCT: mean completion time",
        "borrow": "borrow: hours above quota",
        "broken": "broken: time the team asked for ≤ its quota yet did not get it",
        "fair": "fair: JCT ÷ JCT under static",
    }
    print_legend(console, [text for header, text in legend.items() if header in shown])
    bound = summary["utilization_bound"]
    print_legend(
        console,
        [
            f"utilization {summary['gpu_utilization']:.1%}"
            # `utilization_bound` (contract 3 of docs/design.md keeps the key) is a greedy FIFO
            # with backfill and no quotas, not a bound: a quota'd engine can land above it
            # (docs/simulator.md), so it is named for what it is.
            + (f" (greedy FIFO reference {bound:.1%})" if bound is not None else ""),
            f"makespan {short_duration(summary['makespan_s'])}",
            f"preemptions {summary['preemptions']:,}",
            # One decimal: `{:,}` of 165.936 read like 165,936.
            f"lost {summary['lost_gpu_hours']:,.1f} GPU-h",
            f"idle while waiting {summary['idle_while_waiting_gpu_hours']:,.1f} GPU-h",
        ],
    )
    for key, what in (
        ("never_fit_jobs", "never fit this engine's limits (kept in the report, never started)"),
        ("unfinished_jobs", "were still waiting when nothing else could happen"),
        ("dropped_jobs", "were dropped (unknown team, class or pool)"),
        ("preemption_loop_jobs", "were preempted twice or more without progress (a preemption loop)"),
    ):
        if summary.get(key):
            console.print(f"[yellow]warning:[/] {summary[key]:,} job(s) {what}")


#: The options in three panels: each panel is its own table, so the long names of one do not squeeze
#: the help of the others at 80 columns.
REPLAY = "Replay"
OUTPUT = "Output"


@app.command()
def simulate(
    policy: Path = typer.Option(..., "--policy", metavar="FILE", help="The policy file (commons.yaml)."),
    trace: Path = typer.Option(
        ..., "--trace", metavar="FILE", help="The trace CSV (job_id,team,submit_time_s,duration_s,gpus)."
    ),
    out: Path = typer.Option(..., "--out", metavar="FILE", help="Where to write the result JSON."),
    engine: str = typer.Option(
        "commons", "--engine", metavar="NAME", help="commons | kueue | static", rich_help_panel=REPLAY
    ),
    placement: str | None = typer.Option(
        None,
        "--placement",
        metavar="MODE",
        help="none (quota only) | spread (kube-scheduler's default) | pack (best fit); default: the engine's",
        rich_help_panel=REPLAY,
    ),
    restart_overhead: float = typer.Option(
        0.0,
        "--restart-overhead",
        min=0.0,
        metavar="S",
        help="Seconds a preempted job pays when it starts again.",
        rich_help_panel=REPLAY,
    ),
    checkpoint_interval: str | None = typer.Option(
        None,
        "--checkpoint-interval",
        metavar="TIME",
        help="Give jobs without one this checkpoint interval (30m, 1h, ...).",
        rich_help_panel=REPLAY,
    ),
    drop_unknown: bool = typer.Option(
        False,
        "--drop-unknown",
        help="Drop jobs of unknown teams, classes or pools (with a warning).",
        rich_help_panel=REPLAY,
    ),
    fairness: bool = typer.Option(
        True,
        "--fairness/--no-fairness",
        help="Also replay under `static` for finish-time fairness.",
        rich_help_panel=OUTPUT,
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bar and no table.", rich_help_panel=OUTPUT
    ),
    wide: bool = typer.Option(
        False, "--wide", help="Every column, even when the terminal is narrow.", rich_help_panel=OUTPUT
    ),
) -> None:
    """Replay a trace under a policy with one engine; write the simulator's result JSON (docs/design.md)."""
    from gpucommons.sim import (
        SimConfig,
        SimulationError,
        UnknownNamesError,
        dumps,
        run_simulation,
        with_default_checkpoint_interval,
    )

    engine = check_engine(engine, placement)
    the_policy = load_policy_or_exit(policy)
    jobs = with_default_checkpoint_interval(
        load_trace_or_exit(trace), parse_interval_or_exit(checkpoint_interval)
    )
    config = SimConfig(engine=engine, restart_overhead_s=restart_overhead, drop_unknown=drop_unknown)
    try:
        if quiet:
            result = run_simulation(the_policy, jobs, config, fairness=fairness)
        else:
            with progress_bar() as bar:
                result = run_simulation(
                    the_policy, jobs, config, fairness=fairness, on_progress=phase_callback(bar)
                )
    except UnknownNamesError as exc:
        raise fail(f"{trace}: {exc}\n(use --drop-unknown to drop these jobs and go on)") from None
    except SimulationError as exc:
        raise fail(f"the simulation stopped: {exc}") from None
    if result.outcome.resolution.refused_count:
        for line in result.outcome.resolution.describe_refused():
            console.print(f"[yellow]warning:[/] dropped {line}")
    try:
        out.write_text(dumps(result.report), encoding="utf-8")
    except OSError as exc:
        raise fail(f"{out}: cannot write the result: {exc.strerror}") from None
    if not quiet:
        print_summary(result.report["summary"], f"{policy.name} · engine {engine}", wide)
    console.print(f"wrote {out}")
