"""`commons bench`: generated benchmark workloads run in the simulator, beside published figures."""

from __future__ import annotations

import time

import typer
from rich.console import Console

from gpucommons.cli.main import app
from gpucommons.cli.simulate import check_engine
from gpucommons.cli.tables import Col, print_table

bench_app = typer.Typer(help="Benchmarks run in the simulator.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
console = Console(highlight=False)


def _fmt(value: object, unit: str = "s") -> str:
    if value is None:
        return "—"
    if unit == "%":
        return f"{float(value):.1%}"  # type: ignore[arg-type]
    return f"{float(value):,.1f} s"  # type: ignore[arg-type]


@bench_app.command("kueue-baseline")
def kueue_baseline(
    engine: list[str] = typer.Option(["kueue", "commons"], "--engine", help="Engines to run; repeatable."),
    grace_period: int = typer.Option(
        0, "--grace-period", min=0, help="Grace period of every class, seconds."
    ),
    cohorts: int = typer.Option(
        5, "--cohorts", min=1, max=5, help="Run 1–5 of the 5 cohorts (quick checks)."
    ),
) -> None:
    """Kueue's scheduler benchmark (5 cohorts × 6 teams, 15,000 tasks) in the simulator."""
    from gpucommons.sim import SimConfig, SimulationError, simulate  # not at CLI start-up
    from gpucommons.sim.workloads import (
        KUEUE_PUBLISHED,
        kueue_baseline_figures,
        kueue_baseline_jobs,
        kueue_baseline_policy,
    )

    engines = [check_engine(e) for e in dict.fromkeys(engine)]
    policy = kueue_baseline_policy(grace_period, cohorts)
    jobs = kueue_baseline_jobs(cohorts)
    columns: list[tuple[str, dict[str, object], float]] = []
    for name in engines:
        started = time.process_time()
        try:
            outcome = simulate(policy, jobs, SimConfig(engine=name))
        except SimulationError as exc:
            console.print(f"[bold red]error:[/] engine {name}: {exc}")
            raise typer.Exit(1) from None
        elapsed = time.process_time() - started
        figures = kueue_baseline_figures(
            outcome.runs, outcome.capacity_units, outcome.meter.held_total_unit_s
        )
        columns.append((name, figures, elapsed))
    title = (
        f"kueue-baseline: {len(jobs):,} tasks, {len(policy.teams)} teams in {cohorts} cohort(s), "
        f"{policy.pools[0].capacity.cpu_milli // 1000} CPUs"
    )
    table = (
        Col("figure", keep=True),
        *(Col(f"sim · {name}", keep=True, justify="right") for name, _, _ in columns),
        Col("Kueue", keep=True, justify="right"),
    )
    published_admission = KUEUE_PUBLISHED["time_to_admission_s"]
    assert isinstance(published_admission, dict)
    rows = [
        ["makespan", *[_fmt(f["makespan_s"]) for _, f, _ in columns], _fmt(KUEUE_PUBLISHED["makespan_s"])]
    ]
    for size in ("large", "medium", "small"):
        rows.append(
            [
                f"time to admission, {size}",
                *[_fmt(f["time_to_admission_s"][size]) for _, f, _ in columns],  # type: ignore[index]
                _fmt(published_admission[size]),
            ]
        )
    rows.append(
        [
            "quota usage",
            *[_fmt(f["quota_usage"], "%") for _, f, _ in columns],
            _fmt(KUEUE_PUBLISHED["quota_usage"], "%"),
        ]
    )
    rows.append(
        [
            "capacity bound",
            *[_fmt(f["capacity_bound_s"]) for _, f, _ in columns],
            _fmt(KUEUE_PUBLISHED["capacity_bound_s"]),
        ]
    )
    rows.append(["preemptions", *[f"{f['preemptions']:,}" for _, f, _ in columns], "—"])
    rows.append(["simulator CPU time", *[f"{elapsed:.1f} s" for _, _, elapsed in columns], "—"])
    print_table(console, table, rows, title=title)
    console.print(
        "Times to admission are averages per task. Kueue's figures are the wall time of a real control "
        "plane (API round trips, one admission per ClusterQueue per cycle); the simulator decides "
        "instantly, so its makespan sits on the capacity bound."
    )
