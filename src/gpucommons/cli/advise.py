"""`commons advise`: recommend quotas from usage history (file in, file out; no server).

    commons advise --policy commons.yaml --history usage.csv [--out proposed.yaml] [--json]
                   [--plot advice.png] [--check-trace trace.csv]

The history is a job trace (contract 2) or a sampled usage file (`time_s,team,running_gpus,
pending_gpus,...`); the header tells which. Bad input ends with exit 1 and a message naming the
file, line and problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from gpucommons.cli.main import app
from gpucommons.cli.sim_inputs import fail, load_policy_or_exit, load_trace_or_exit
from gpucommons.domain import Policy
from gpucommons.policy import PolicyError

if TYPE_CHECKING:  # the advisor (numpy, the policy loader) is imported when `advise` runs
    from gpucommons.planning.advisor import Advice
    from gpucommons.planning.usage_history import UsageHistory

console = Console(highlight=False)
notes = Console(stderr=True, highlight=False)

HISTORY_NOTES = {
    "samples": "demand = running + pending GPUs. Pending work is censored (jobs cancelled while they "
    "waited, work never submitted into a full queue), so demand above what ran is a lower bound.",
    "trace": "demand = the GPUs of each job from its submission to submission + duration. Time a job "
    "spent queued is not counted, so busy periods are understated.",
}


def _is_usage_file(path: Path) -> bool:
    from gpucommons.planning.usage_history import is_usage_file_header

    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return is_usage_file_header(handle.readline())
    except (OSError, UnicodeDecodeError):
        return False  # the trace reader says what is wrong with the file


def _read_history(path: Path, policy: Policy) -> UsageHistory:
    """A sampled usage file when its header says so, else a job trace (contract 2)."""
    from gpucommons.planning.advisor import samples_history, trace_history
    from gpucommons.planning.usage_history import UsageFileError

    if not _is_usage_file(path):
        return trace_history(policy, load_trace_or_exit(path))
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return samples_history(policy, handle, source=str(path))
    except UnicodeDecodeError:
        raise fail(f"{path}: not a UTF-8 text file (expected a CSV usage file)") from None
    except UsageFileError as exc:
        raise fail(f"the usage file was refused:\n{exc}") from None


def _limit(value: int | None, unlimited: str) -> str:
    return unlimited if value is None else str(value)


def _change(before: str, after: str) -> str:
    return after if before == after else f"{before} → {after}"


def _table(advice: Advice) -> Table:
    many_pools = len(advice.pools) > 1
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title_justify="left")
    columns = ["team", *(["pool"] if many_pools else []), "active", "p50", "p95", "peak"]
    columns += ["nominal", "borrows", "borrow limit", "lend limit", "covered"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("team", "pool") else "right", no_wrap=True)
    for t in advice.teams:
        d = t.demand
        figures = (
            ["—"] * 4 if d is None else [f"{d.active_fraction:.0%}", str(d.p50), str(d.p95), str(d.peak)]
        )
        covered = "—"
        if t.covered_before is not None and t.covered_after is not None:
            covered = _change(f"{t.covered_before:.0%}", f"{t.covered_after:.0%}")
        before, after = t.current, t.proposed
        table.add_row(
            t.team + ("" if t.status == "sized" else " (kept)"),
            *([t.pool] if many_pools else []),
            *figures,
            _change(str(before.nominal), str(after.nominal)),
            str(t.borrow_at_peak) if t.status == "sized" else "—",
            _change(_limit(before.borrow_limit, "none"), _limit(after.borrow_limit, "none")),
            _change(_limit(before.lend_limit, "all"), _limit(after.lend_limit, "all")),
            covered,
        )
    return table


def _print_advice(advice: Advice) -> None:
    console.print(f"[bold]rule:[/] {advice.rule.describe()}")
    console.print(f"[bold]history:[/] {HISTORY_NOTES[advice.history.kind]}")
    console.print(_table(advice))
    console.print(
        "active: share of time the team asked for GPUs · p50/p95/peak: demand"
        + ("" if advice.rule.include_idle else " while active")
        + " · borrows: GPUs above nominal at the peak · covered: share of time the demand fitted in"
        " the nominal quota"
    )
    for pool in advice.pools:
        console.print(
            f"pool {pool.pool}: {pool.capacity} GPUs; nominal {pool.nominal_before} → {pool.nominal_after}"
            + (f" ({pool.kept} kept as they are)" if pool.kept else "")
        )
    console.print()
    for t in advice.teams:
        console.print(f"• {t.reason}", soft_wrap=True)
    for ignored in advice.ignored:
        notes.print(
            f"[yellow]warning:[/] ignored {ignored.gpu_hours:,.0f} GPU-hours of team {ignored.team!r}"
            + (f" in pool {ignored.pool!r}" if ignored.pool else "")
            + f": {ignored.why}"
        )


def _check(advice: Advice, trace: Path, engine: str, quiet: bool) -> dict[str, Any]:
    """Replay `trace` under the current and the proposed policy with the what-if comparison."""
    from gpucommons.cli.simulate import phase_callback, progress_bar
    from gpucommons.cli.whatif import print_comparison
    from gpucommons.planning.whatif import Variant, compare
    from gpucommons.sim import SimConfig, SimulationError, UnknownNamesError

    jobs = load_trace_or_exit(trace)
    variants = [Variant("current", advice.current, engine), Variant("proposed", advice.proposed, engine)]
    try:
        if quiet:
            comparison = compare(variants, jobs, SimConfig(engine=engine))
        else:
            with progress_bar() as bar:
                comparison = compare(variants, jobs, SimConfig(engine=engine), phase_callback(bar))
    except UnknownNamesError as exc:
        raise fail(f"{trace}: {exc}") from None
    except SimulationError as exc:
        raise fail(f"the simulation stopped: {exc}") from None
    if not quiet:
        console.print(f"\n[bold]replay of {trace.name}[/] (engine {engine}): current vs proposed")
        print_comparison(comparison)
    current, proposed = comparison.summaries()
    return {"trace": str(trace), "engine": engine, "current": current, "proposed": proposed}


@app.command()
def advise(
    policy: Path = typer.Option(..., "--policy", help="The current policy (pools, capacity, teams)."),
    history: Path = typer.Option(
        ..., "--history", help="Usage history: a job trace CSV or a sampled usage CSV (time_s,team,...)."
    ),
    percentile: float = typer.Option(50.0, "--percentile", help="Nominal quota ∝ this percentile of demand."),
    include_idle: bool = typer.Option(
        False,
        "--include-idle",
        help="Take percentiles over all of the time, not only while a team is active.",
    ),
    peak_percentile: float = typer.Option(
        100.0, "--peak-percentile", help="A team's peak: this percentile of its demand (100 = the highest)."
    ),
    reserve_percentile: float = typer.Option(
        5.0, "--reserve-percentile", help="Lend limit = nominal − this percentile of demand (kept to itself)."
    ),
    whole_nodes: bool = typer.Option(False, "--whole-nodes", help="Round nominal quotas to whole nodes."),
    borrow_limits: bool = typer.Option(
        False,
        "--borrow-limits",
        help="Write each team's peak − nominal as its borrow limit (default: leave borrow limits alone).",
    ),
    out: Path | None = typer.Option(None, "--out", help="Write the proposed policy file here."),
    as_json: bool = typer.Option(False, "--json", help="Print the advice as JSON instead of a table."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Write a PNG: demand against current and proposed quota."
    ),
    check_trace: Path | None = typer.Option(
        None, "--check-trace", help="Replay this job trace under the current and the proposed policy."
    ),
    engine: str = typer.Option(
        "commons", "--engine", help="Engine for --check-trace: commons | kueue | static."
    ),
) -> None:
    """Recommend nominal quotas, borrow and lend limits per team from usage history."""
    from gpucommons.planning import advisor
    from gpucommons.planning.advisor import AdvisorRule, proposed_policy_text
    from gpucommons.planning.advisor_report import advice_to_data

    if check_trace is not None:
        from gpucommons.cli.simulate import check_engine

        check_engine(engine)
    the_policy = load_policy_or_exit(policy)
    the_history = _read_history(history, the_policy)
    try:
        rule = AdvisorRule(
            percentile, include_idle, peak_percentile, reserve_percentile, whole_nodes, borrow_limits
        )
    except ValueError as exc:
        raise fail(str(exc)) from None
    advice = advisor.advise(the_policy, the_history, rule)
    if out is not None:
        try:
            text = proposed_policy_text(advice)
        except PolicyError as exc:  # a bug, not bad input: say so plainly rather than write the file
            raise fail(f"the proposed policy does not pass the policy checks:\n{exc}") from None
        _write(out, text.encode("utf-8"), "the proposed policy")
    if plot is not None:
        from gpucommons.planning.advisor_plot import render_png  # matplotlib is slow to import

        _write(
            plot,
            render_png(advice, f"{the_policy.cluster_name}: quota advice from {history.name}"),
            "the plot",
        )
    data = advice_to_data(advice)
    if not as_json:
        _print_advice(advice)
    if check_trace is not None:
        data["check"] = _check(advice, check_trace, engine, quiet=as_json)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    for path in (out, plot):
        if path is not None:
            notes.print(f"wrote {path}")


def _write(path: Path, content: bytes, what: str) -> None:
    try:
        path.write_bytes(content)
    except OSError as exc:
        raise fail(f"{path}: cannot write {what}: {exc.strerror}") from None
