"""`commons whatif`: one trace under several policies and/or engines, side by side (+ an HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from gpucommons.cli.main import app
from gpucommons.cli.sim_inputs import fail, load_policy_or_exit, load_trace_or_exit, parse_interval_or_exit
from gpucommons.cli.simulate import check_engine, progress_bar
from gpucommons.cli.tables import Col, print_table

if TYPE_CHECKING:  # the simulator is imported when a command runs it, not at CLI start-up
    from gpucommons.planning.whatif import Comparison

console = Console(highlight=False)


def print_comparison(comparison: Comparison) -> None:
    """Two tables: the cluster's figures, then each team's, one column per variant (names kept whole)."""
    from gpucommons.planning.whatif import summary_rows, team_rows

    labels = [Col(v.label, keep=True, justify="right") for v in comparison.variants]
    print_table(
        console,
        (Col("metric", keep=True), *labels),
        [list(r) for r in summary_rows(comparison)],
        title="cluster",
    )
    print_table(
        console,
        (Col("team", keep=True), *labels),
        [list(r) for r in team_rows(comparison)],
        title="teams: wait p50 / p95 · finish-time fairness (< 1: gains from sharing)",
    )


@app.command()
def whatif(
    policy: list[Path] = typer.Option(..., "--policy", help="A policy file; repeat to compare policies."),
    trace: Path = typer.Option(..., "--trace", help="The trace CSV."),
    out: Path = typer.Option(..., "--out", help="Where to write the HTML report."),
    engine: list[str] = typer.Option(
        ["commons"],
        "--engine",
        help="commons | kueue | static, optionally +none|spread|pack (kueue+spread: as kube-scheduler "
        "places it); repeat to compare engines.",
    ),
    restart_overhead: float = typer.Option(0.0, "--restart-overhead", min=0.0, help="Seconds per restart."),
    checkpoint_interval: str | None = typer.Option(
        None, "--checkpoint-interval", help="Give jobs without one this checkpoint interval (30m, 1h, ...)."
    ),
    drop_unknown: bool = typer.Option(
        False, "--drop-unknown", help="Drop jobs of unknown teams/classes/pools."
    ),
) -> None:
    """Compare policies and/or engines on one trace: a table here, plots in the HTML report."""
    from gpucommons.planning.whatif import compare, variants_of
    from gpucommons.sim import (
        SimConfig,
        SimulationError,
        UnknownNamesError,
        with_default_checkpoint_interval,
    )

    engines = [check_engine(e) for e in dict.fromkeys(engine)]
    names = [p.name if [q.name for q in policy].count(p.name) == 1 else str(p) for p in policy]
    policies = [(name, load_policy_or_exit(path)) for name, path in zip(names, policy, strict=True)]
    jobs = with_default_checkpoint_interval(
        load_trace_or_exit(trace), parse_interval_or_exit(checkpoint_interval)
    )
    config = SimConfig(restart_overhead_s=restart_overhead, drop_unknown=drop_unknown)
    variants = variants_of(policies, engines)
    try:
        with progress_bar() as bar:
            tasks: dict[str, object] = {}

            def update(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(label, total=total)
                bar.update(tasks[label], completed=done)  # type: ignore[arg-type]

            comparison = compare(variants, jobs, config, update)
    except UnknownNamesError as exc:
        raise fail(f"{trace}: {exc}\n(use --drop-unknown to drop these jobs and go on)") from None
    except SimulationError as exc:
        raise fail(f"the simulation stopped: {exc}") from None
    print_comparison(comparison)
    from gpucommons.planning.whatif_report import render_html  # matplotlib is slow to import

    title = "What-if: " + " vs ".join(v.label for v in variants)
    try:
        out.write_text(render_html(comparison, title, trace.name), encoding="utf-8")
    except OSError as exc:
        raise fail(f"{out}: cannot write the report: {exc.strerror}") from None
    console.print(f"wrote {out}")
