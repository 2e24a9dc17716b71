"""`commons advise`: recommend quotas from usage history (file in, file out; no server).

    commons advise --policy commons.yaml --history trace.csv [--objective balanced|wait|guarantee]
                   [--validate last:25%] [--folds 1] [--floor 0%] [--fit-window 10d]
                   [--half-life 14d] [--max-change 25%] [--whole-nodes]
                   [--out proposed.yaml] [--json] [--plot waits.png] [--check-trace trace.csv]

With a job trace (docs/design.md, contract 2) the quotas are searched for by replaying the history under each
candidate with the cluster's engine (`gpucommons.planning.replay_advice`); the replays run in a
pool of `--workers` processes (2 by default, the CI machine's cores). A sampled usage file
(`time_s,team,running_gpus,pending_gpus,...`) cannot be replayed, so it is sized by the demand
rule (`gpucommons.planning.advisor`), as is a trace with `--rule`. The header tells which file it
is. Bad input ends with exit 1 and a message naming the file, line and problem.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli.main import app
from gpucommons.cli.sim_inputs import fail, load_policy_or_exit, load_trace_or_exit
from gpucommons.cli.tables import Col, print_legend, print_table
from gpucommons.domain import Policy
from gpucommons.policy import PolicyError

if TYPE_CHECKING:  # the advisor (numpy, the policy loader) is imported when `advise` runs
    from concurrent.futures import ProcessPoolExecutor

    from gpucommons.planning.advisor import Advice
    from gpucommons.planning.quota_search import Request
    from gpucommons.planning.replay_advice import AdviceSettings, ReplayAdvice
    from gpucommons.planning.replay_cache import ReplayContext
    from gpucommons.planning.replay_score import ReplayScore
    from gpucommons.planning.usage_history import UsageHistory
    from gpucommons.sim.jobs import SimJob

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
    """A sampled usage file when its header says so, else a job trace (docs/design.md, contract 2)."""
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


def _figure(header: str, drop: int = 0) -> Col:
    return Col(header, drop=drop, justify="right")


def _table_columns(many_pools: bool) -> tuple[Col, ...]:
    """Team and pool whole; at 80 columns the figures the bullets below repeat go first."""
    return (
        Col("team", keep=True),
        *([Col("pool", keep=True)] if many_pools else []),
        _figure("active", drop=3),
        _figure("p50"),
        _figure("p95", drop=4),
        _figure("peak", drop=2),
        _figure("nominal"),
        _figure("borrows", drop=1),
        _figure("borrow limit"),
        _figure("lend limit"),
        _figure("covered", drop=5),
    )


def _table_rows(advice: Advice) -> list[list[str]]:
    many_pools = len(advice.pools) > 1
    rows = []
    for t in advice.teams:
        d = t.demand
        figures = (
            ["—"] * 4 if d is None else [f"{d.active_fraction:.0%}", str(d.p50), str(d.p95), str(d.peak)]
        )
        covered = "—"
        if t.covered_before is not None and t.covered_after is not None:
            covered = _change(f"{t.covered_before:.0%}", f"{t.covered_after:.0%}")
        before, after = t.current, t.proposed
        rows.append(
            [
                escape(t.team) + ("" if t.status == "sized" else " (kept)"),
                *([escape(t.pool)] if many_pools else []),
                *figures,
                _change(str(before.nominal), str(after.nominal)),
                str(t.borrow_at_peak) if t.status == "sized" else "—",
                _change(_limit(before.borrow_limit, "none"), _limit(after.borrow_limit, "none")),
                _change(_limit(before.lend_limit, "all"), _limit(after.lend_limit, "all")),
                covered,
            ]
        )
    return rows


def _print_advice(advice: Advice, wide: bool = False) -> None:
    console.print(f"[bold]rule:[/] {advice.rule.describe()}")
    console.print(f"[bold]history:[/] {HISTORY_NOTES[advice.history.kind]}")
    print_table(console, _table_columns(len(advice.pools) > 1), _table_rows(advice), wide)
    print_legend(
        console,
        [
            "active: share of time the team asked for GPUs",
            "p50/p95/peak: demand" + ("" if advice.rule.include_idle else " while active"),
            "borrows: GPUs above nominal at the peak",
            "covered: share of time the demand fitted in the nominal quota",
        ],
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


def _check(current: Policy, proposed: Policy, trace: Path, engine: str, quiet: bool) -> dict[str, Any]:
    """Replay `trace` under the current and the proposed policy with the what-if comparison."""
    from gpucommons.cli.simulate import phase_callback, progress_bar
    from gpucommons.cli.whatif import print_comparison
    from gpucommons.planning.whatif import Variant, compare
    from gpucommons.sim import SimConfig, SimulationError, UnknownNamesError

    jobs = load_trace_or_exit(trace)
    variants = [Variant("current", current, engine), Variant("proposed", proposed, engine)]
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
    before, after = comparison.summaries()
    return {"trace": str(trace), "engine": engine, "current": before, "proposed": after}


@app.command()
def advise(
    policy: Path = typer.Option(..., "--policy", help="The current policy (pools, capacity, teams)."),
    history: Path = typer.Option(
        ..., "--history", help="Usage history: a job trace CSV or a sampled usage CSV (time_s,team,...)."
    ),
    objective: str | None = typer.Option(
        None,
        "--objective",
        help="What the searched quotas minimise (job traces): balanced (default) | wait | guarantee.",
    ),
    rule: bool = typer.Option(
        False, "--rule", help="Size quotas by the demand-percentile rule instead (no replay; a baseline)."
    ),
    validate: str = typer.Option(
        "last:25%", "--validate", help="Choose on the newest part of the history: last:P% or last:Nd."
    ),
    folds: int = typer.Option(
        1,
        "--folds",
        help="Cut the validation days into N folds; choose the candidate whose worst fold is best.",
    ),
    floor: str = typer.Option(
        "0%",
        "--floor",
        help="Cut no team below this share of an equal split of its pool (nor below its largest job).",
    ),
    half_life: str = typer.Option(
        "14d", "--half-life", help="On the fit days, a job this much older weighs half (none: no decay)."
    ),
    max_regression: str = typer.Option(
        "10%",
        "--max-regression",
        help="No team's p95 wait may grow by more than this (both under 1h: exempt).",
    ),
    fit_window: str = typer.Option(
        "10d",
        "--fit-window",
        help="Replay only this much history before the validation days while searching (all: every day).",
    ),
    max_change: str | None = typer.Option(
        None,
        "--max-change",
        help="Move no team's nominal quota by more than this: GPUs (32) or a share (25%).",
    ),
    step: int | None = typer.Option(
        None, "--step", help="GPUs per move of the search (default: one node of the pool)."
    ),
    max_replays: int = typer.Option(
        48, "--max-replays", help="Replays of the fit days the search may spend (seeds included)."
    ),
    workers: int = typer.Option(2, "--workers", help="Processes that replay at once (1: in this process)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the week-block bootstrap."),
    percentile: float = typer.Option(50.0, "--percentile", help="Rule: nominal ∝ this percentile of demand."),
    include_idle: bool = typer.Option(
        False,
        "--include-idle",
        help="Rule: take percentiles over all of the time, not only while a team is active.",
    ),
    peak_percentile: float = typer.Option(
        100.0, "--peak-percentile", help="Rule: a team's peak is this percentile of its demand."
    ),
    reserve_percentile: float = typer.Option(
        5.0, "--reserve-percentile", help="Rule: lend limit = nominal − this percentile of demand."
    ),
    whole_nodes: bool = typer.Option(False, "--whole-nodes", help="Nominal quotas in whole nodes."),
    borrow_limits: bool = typer.Option(
        False,
        "--borrow-limits",
        help="Rule: write each team's peak − nominal as its borrow limit (default: leave them alone).",
    ),
    out: Path | None = typer.Option(None, "--out", help="Write the proposed policy file here."),
    as_json: bool = typer.Option(False, "--json", help="Print the advice as JSON instead of a table."),
    plot: Path | None = typer.Option(
        None,
        "--plot",
        help="Write a PNG: each team's p95 wait before/after (rule: demand against quota).",
    ),
    check_trace: Path | None = typer.Option(
        None, "--check-trace", help="Replay this job trace under the current and the proposed policy."
    ),
    engine: str = typer.Option(
        "commons",
        "--engine",
        help="Engine the replays use: commons | kueue | static (what the cluster runs).",
    ),
    wide: bool = typer.Option(False, "--wide", help="Every column, even when the terminal is narrow."),
) -> None:
    """Recommend nominal quotas per team from usage history: searched by replay, or by the demand rule."""
    from gpucommons.cli.simulate import check_engine

    check_engine(engine)
    the_policy = load_policy_or_exit(policy)
    samples = _is_usage_file(history)
    if samples and objective is not None:
        raise fail(
            f"{history} is a sampled usage file, which cannot be replayed: give a job trace for "
            "--objective, or leave it out to size quotas by the demand rule"
        )
    if rule or samples:
        if objective is not None:
            raise fail("--rule and --objective exclude each other: the rule does not replay")
        _advise_by_rule(
            the_policy,
            history,
            (percentile, include_idle, peak_percentile, reserve_percentile, whole_nodes, borrow_limits),
            out,
            as_json,
            plot,
            check_trace,
            engine,
            wide,
        )
        return
    settings = _settings(
        objective or "balanced",
        validate,
        (half_life, fit_window),
        (folds, floor),
        max_regression,
        max_change,
        step,
        max_replays,
        seed,
        whole_nodes,
        engine,
    )
    if workers < 1:
        raise fail("--workers must be at least 1")
    jobs = load_trace_or_exit(history)
    started = time.perf_counter()
    advice = _search(the_policy, jobs, settings, workers, quiet=as_json)
    elapsed = time.perf_counter() - started
    from gpucommons.planning.replay_advice_report import replay_advice_to_data

    proposal_text = None
    if advice.chosen is not None and out is not None:
        from gpucommons.policy import dump_policy, parse_policy

        proposal_text = dump_policy(advice.proposed)
        try:  # the file is written only once the loader `policy check` uses accepts it
            parse_policy(proposal_text, source="the proposed policy")
        except PolicyError as exc:  # a bug, not bad input: say so plainly rather than write the file
            raise fail(f"the proposed policy does not pass the policy checks:\n{exc}") from None
        _write(out, proposal_text.encode("utf-8"), "the proposed policy")
    if plot is not None:
        from gpucommons.planning.wait_plot import render_wait_png  # matplotlib is slow to import

        title = f"{the_policy.cluster_name}: quota advice from {history.name} (engine {engine})"
        _write(plot, render_wait_png(advice, title), "the plot")
    data = replay_advice_to_data(advice)
    data["search"]["seconds"] = round(elapsed, 1)
    if not as_json:
        _print_replay_advice(advice, elapsed, wide)
    if check_trace is not None:
        data["check"] = _check(advice.current, advice.proposed, check_trace, engine, quiet=as_json)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    if out is not None and proposal_text is None:
        notes.print(f"{out} not written: {advice.why}", soft_wrap=True)
    for path in (out if proposal_text is not None else None, plot):
        if path is not None:
            notes.print(f"wrote {path}")


def _advise_by_rule(
    the_policy: Policy,
    history: Path,
    knobs: tuple[float, bool, float, float, bool, bool],
    out: Path | None,
    as_json: bool,
    plot: Path | None,
    check_trace: Path | None,
    engine: str,
    wide: bool = False,
) -> None:
    """The demand-percentile rule: the only way for sampled usage, a baseline for traces."""
    from gpucommons.planning import advisor
    from gpucommons.planning.advisor import AdvisorRule, proposed_policy_text
    from gpucommons.planning.advisor_report import advice_to_data

    the_history = _read_history(history, the_policy)
    try:
        rule = AdvisorRule(*knobs)
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
        _print_advice(advice, wide)
    if check_trace is not None:
        data["check"] = _check(advice.current, advice.proposed, check_trace, engine, quiet=as_json)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    for path in (out, plot):
        if path is not None:
            notes.print(f"wrote {path}")


def _share(text: str, option: str) -> float:
    raw = text.strip().removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        raise fail(f"{option} {text!r}: give a share such as 10%") from None
    if not 0 <= value <= 1000:
        raise fail(f"{option} {text!r}: give a share between 0% and 1000%")
    return value / 100


def _settings(
    objective: str,
    validate: str,
    windows: tuple[str, str],
    guards: tuple[int, str],
    max_regression: str,
    max_change: str | None,
    step: int | None,
    max_replays: int,
    seed: int,
    whole_nodes: bool,
    engine: str,
) -> AdviceSettings:
    from gpucommons.planning.objectives import Objective
    from gpucommons.planning.quota_search import SearchSettings
    from gpucommons.planning.quota_space import MaxChange
    from gpucommons.planning.replay_advice import AdviceSettings
    from gpucommons.planning.replay_score import ValidationSplit
    from gpucommons.policy.durations import parse_duration

    try:
        the_objective = Objective(objective)
    except ValueError:
        raise fail(
            f"--objective {objective!r}: choose one of {', '.join(o.value for o in Objective)}"
        ) from None
    try:
        split = ValidationSplit.parse(validate)
        cap = MaxChange() if max_change is None else MaxChange.parse(max_change)
        search = SearchSettings(max_replays=max_replays, step_gpus=step)
    except ValueError as exc:
        raise fail(str(exc)) from None
    half_life, fit_window = windows
    decay: float | None = None
    if half_life.strip().lower() != "none":
        try:
            decay = float(parse_duration(half_life.strip()))
        except ValueError as exc:
            raise fail(f"--half-life: {exc}") from None
        if decay <= 0:
            raise fail("--half-life must be longer than 0s (or none)")
    fit_window_s: float | None = None
    if fit_window.strip().lower() != "all":
        try:
            fit_window_s = float(parse_duration(fit_window.strip()))
        except ValueError as exc:
            raise fail(f"--fit-window: {exc} (or all)") from None
        if fit_window_s <= 0:
            raise fail("--fit-window must be longer than 0s (or all)")
    folds, floor = guards
    if folds < 1:
        raise fail("--folds must be at least 1")
    floor_share = _share(floor, "--floor")
    if floor_share > 1:
        raise fail(f"--floor {floor!r}: give a share of an equal split between 0% and 100%")
    return AdviceSettings(
        objective=the_objective,
        max_regression=_share(max_regression, "--max-regression"),
        validate=split,
        half_life_s=decay,
        fit_window_s=fit_window_s,
        whole_nodes=whole_nodes,
        max_change=cap,
        engine=engine,
        search=search,
        seed=seed,
        folds=folds,
        floor_share=floor_share,
    )


# -- replays in a pool of processes (the shell's part: the planning core only asks for scores) ---------
_CONTEXT: ReplayContext | None = None


def _start_worker(context: ReplayContext) -> None:
    global _CONTEXT
    _CONTEXT = context


def _replay_in_worker(request: Request) -> ReplayScore:
    assert _CONTEXT is not None, "the worker was started without its context"
    return _CONTEXT.replay(request)


def _search(
    policy: Policy, jobs: list[SimJob], settings: AdviceSettings, workers: int, quiet: bool
) -> ReplayAdvice:
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: not at CLI start-up

    from gpucommons.cli.progress import counting_bar
    from gpucommons.planning.quota_search import Evaluate
    from gpucommons.planning.quota_space import QuotaSpace
    from gpucommons.planning.replay_advice import advise_by_replay
    from gpucommons.planning.replay_cache import CachedReplays, ReplayContext, serial_replays
    from gpucommons.planning.replay_score import SplitError, Window
    from gpucommons.sim import SimulationError

    bar = counting_bar(44, "replays", disable=quiet)
    task = bar.add_task("replaying today's quotas", total=None)
    pools: list[ProcessPoolExecutor] = []

    def evaluate_for(space: QuotaSpace, windows: dict[str, Window]) -> Evaluate:
        context = ReplayContext(policy, space, windows, settings.engine)
        if workers == 1:
            inner = serial_replays(context)

            def replay(requests: Sequence[Request]) -> list[ReplayScore]:
                out = []
                for request in requests:
                    out.append(inner([request])[0])
                    bar.advance(task)
                return out

            return CachedReplays(replay)
        pool = ProcessPoolExecutor(
            max_workers=min(workers, os.cpu_count() or 1), initializer=_start_worker, initargs=(context,)
        )
        pools.append(pool)

        def replay_in_pool(requests: Sequence[Request]) -> list[ReplayScore]:
            out = []
            for score in pool.map(_replay_in_worker, requests):
                out.append(score)
                bar.advance(task)
            return out

        return CachedReplays(replay_in_pool)

    def progress(_done: int, planned: int, text: str) -> None:
        bar.update(task, total=planned, description=text[:44])

    try:
        with bar:
            return advise_by_replay(policy, jobs, settings, evaluate_for, progress)
    except SplitError as exc:
        raise fail(str(exc)) from None
    except SimulationError as exc:
        raise fail(f"a replay stopped: {exc}") from None
    finally:
        for pool in pools:
            pool.shutdown(cancel_futures=True)


def _print_replay_advice(advice: ReplayAdvice, elapsed: float, wide: bool = False) -> None:
    from gpucommons.planning.whatif import short_duration

    s = advice.settings
    fit, val = advice.fit, advice.validation
    day = 86400.0
    console.print(f"[bold]objective:[/] {s.objective.value} — {s.objective.describe()}")
    decay = "no decay" if s.half_life_s is None else f"half-life {s.half_life_s / day:g}d"
    console.print(
        f"[bold]history:[/] fit on days {fit.start_s / day:.1f}–{fit.end_s / day:.1f} "
        f"({len(fit.jobs):,} jobs, {decay}); validation on days {val.start_s / day:.1f}–"
        f"{val.end_s / day:.1f} ({len(val.jobs):,} jobs, {s.validate.describe()}, never seen by the search)"
        + ("" if len(advice.folds) < 2 else f", in {len(advice.folds)} folds, each replayed on its own")
    )
    if s.floor_share > 0:
        console.print(
            f"[bold]floor:[/] no team below {s.floor_share:.0%} of an equal split of its pool "
            "(nor below its largest job; never above today's quota)"
        )
    console.print(
        f"[bold]replays:[/] {advice.replays} with engine {s.engine} in {elapsed:.0f}s; search: "
        f"{advice.trace.stopped}"
    )
    many_pools = len(advice.space.pools) > 1
    columns = (
        Col("team", keep=True),
        *([Col("pool", keep=True)] if many_pools else []),
        _figure("nominal"),
        _figure("p95 wait fit", drop=1),
        _figure("p95 wait validation"),
        _figure("owed, not had", drop=2),
    )
    rows = [
        [
            escape(t.team),
            *([escape(t.pool)] if many_pools else []),
            _change(str(t.today), str(t.proposed)),
            _change(short_duration(t.fit_p95[0]), short_duration(t.fit_p95[1])),
            _change(short_duration(t.validation_p95[0]), short_duration(t.validation_p95[1])),
            _change(short_duration(t.violation[0]), short_duration(t.violation[1])),
        ]
        for t in advice.teams
    ]
    result = advice.result
    rows.append(
        [
            "[bold]mean / total[/]",
            *([""] if many_pools else []),
            "",
            _change(short_duration(advice.today.fit.mean_p95_s), short_duration(result.fit.mean_p95_s)),
            _change(
                short_duration(advice.today.validation.mean_p95_s),
                short_duration(result.validation.mean_p95_s),
            ),
            _change(
                short_duration(advice.today.fit.violation_s + advice.today.validation.violation_s),
                short_duration(result.fit.violation_s + result.validation.violation_s),
            ),
        ]
    )
    print_table(console, columns, rows, wide)
    console.print(
        "p95 wait: today → proposed (fit days decayed) · owed, not had: time a team asked for no more "
        "than its nominal quota yet did not have it (fit + validation)"
    )
    judged = list(advice.baselines.values())
    if advice.chosen is not None and all(b.vector != advice.chosen.vector for b in judged):
        judged.append(advice.chosen)
    baselines = []
    for j in judged:
        chosen = advice.chosen is not None and j.vector == advice.chosen.vector
        baselines.append(
            [
                ("[bold]→ [/]" if chosen else "") + escape(j.label),
                short_duration(j.fit.mean_p95_s),
                short_duration(j.validation.mean_p95_s),
                short_duration(j.validation.violation_s),
                " / ".join(
                    "yes" if ok else "no"
                    for ok in (j.fit_verdict.feasible, all(v.feasible for v in j.fold_verdicts))
                ),
            ]
        )
    baseline_columns = (
        Col("sizing", keep=True),
        _figure("mean p95 fit"),
        _figure("validation"),
        _figure("owed (val.)", drop=1),
        _figure("rules kept fit / val."),
    )
    print_table(console, baseline_columns, baselines, wide, title="same replays, other sizings")
    colour = "green" if advice.chosen is not None else "yellow"
    console.print(f"[bold {colour}]decision:[/] {advice.why}", soft_wrap=True)
    if advice.bootstrap is not None:
        console.print(f"[bold]confidence:[/] {advice.bootstrap.describe()}", soft_wrap=True)
    for pool in advice.space.pools:
        console.print(
            f"pool {pool.pool}: {pool.capacity} GPUs; the searched teams share {pool.available}"
            + (f" ({pool.kept} kept as they are)" if pool.kept else "")
        )
    console.print()
    for t in advice.teams:
        console.print(f"• {t.reason}", soft_wrap=True)
    for team, pool_name, why in advice.kept:
        console.print(f"• {team}: quota in {pool_name} kept as it is ({why}).", soft_wrap=True)


def _write(path: Path, content: bytes, what: str) -> None:
    try:
        path.write_bytes(content)
    except OSError as exc:
        raise fail(f"{path}: cannot write {what}: {exc.strerror}") from None
