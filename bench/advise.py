"""Benchmark: the quota advisor on the shared traces — how fast, and whether its advice helps.

Three parts:

- `--timing`: read + advise (demand rule) + write-and-check the proposed policy, for the Helios
  Earth May 2020 usage file and the Philly October 2017 trace. Wall and CPU ms, median of `--repeat`.
- `--holdout`: the issue's out-of-sample test. For each cluster size (704 GPUs as
  `examples/philly-oct-704.yaml`, and 528 GPUs: 66 nodes, every quota × 0.75) and each engine
  (`kueue`, `commons`): advice from days 0–21 of Philly October (`advise_by_replay`, the defaults of
  `commons advise`: balanced, validate last 25 %, half-life 14 d, fit window 10 d, 48 fit replays,
  2 processes),
  then days 21–31 (never seen by the advisor) replayed from an empty cluster under today's quotas,
  the advice, and every baseline: equal split, proportional to mean demand and the median rule,
  each fitted on all 21 days (what a user of those rules would get) and as the advisor's report
  fitted them (on its fit days). Prints per-team p95 waits and the done-when checks; `--json F`
  also writes every figure.
- `--cli`: `commons advise` on the whole of October at 704 GPUs, as a user runs it (a subprocess,
  2 worker processes), wall time and `uptime` before and after.

    python bench/advise.py --timing
    python bench/advise.py --holdout [--json holdout.json] [--only 704:commons]
    python bench/advise.py --holdout --only 704:kueue --folds 3 --floor 0.5   # the advisor's options
    python bench/advise.py --cli
    python bench/advise.py --profile kueue     # cProfile of one fit-window replay
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpucommons.domain import Policy
from gpucommons.planning.advisor import advise, proposed_policy_text, trace_history
from gpucommons.planning.quota_baselines import (
    EQUAL,
    MEDIAN_RULE,
    PROPORTIONAL,
    TODAY,
    demand_gpu_s,
    demand_pools,
    largest_jobs,
)
from gpucommons.planning.quota_search import Request
from gpucommons.planning.quota_space import QuotaSpace, QuotaVector, build_space
from gpucommons.planning.replay_advice import AdviceSettings, ReplayAdvice, advise_by_replay
from gpucommons.planning.replay_cache import CachedReplays, ReplayContext
from gpucommons.planning.replay_score import ReplayScore, Window
from gpucommons.planning.usage_history import read_usage_samples
from gpucommons.policy import load_policy
from gpucommons.sim import SimJob, read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "examples" / "traces"
HELIOS = TRACES / "helios_earth_vc_usage_2020-05_5min.csv"
PHILLY = TRACES / "philly_vc_jobs_2017-10.csv"
PHILLY_POLICY = ROOT / "examples" / "philly-oct-704.yaml"
HELIOS_POLICY = ROOT / "examples" / "helios-earth.yaml"
DAY = 86400.0
HOUR = 3600.0
SPLIT_DAY = 21


def uptime() -> str:
    with open("/proc/loadavg", encoding="ascii") as handle:
        return "load average " + ", ".join(handle.read().split()[:3])


# -- timing of the demand rule -------------------------------------------------------------------
def timed(label: str, repeat: int, run: object) -> None:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        run()  # type: ignore[operator]
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(f"| {label} | {statistics.median(walls) * 1000:,.1f} | {statistics.median(cpus) * 1000:,.1f} |")


def timing(repeat: int) -> None:
    helios, philly_policy = load_policy(HELIOS_POLICY), load_policy(PHILLY_POLICY)
    print(f"median of {repeat} runs ({uptime()})\n\n| step | wall ms | CPU ms |\n|---|---|---|")

    def read_helios() -> object:
        with HELIOS.open(encoding="utf-8", newline="") as handle:
            return read_usage_samples(handle, str(HELIOS))

    def read_philly() -> object:
        with PHILLY.open(encoding="utf-8", newline="") as handle:
            return trace_history(philly_policy, read_trace(handle, str(PHILLY)))

    helios_history = read_helios()
    philly_history = read_philly()
    timed("Helios: read 142,848 samples", repeat, read_helios)
    timed("Helios: advise (16 teams)", repeat, lambda: advise(helios, helios_history))  # type: ignore[arg-type]
    timed(
        "Helios: dump + check the proposed policy",
        repeat,
        lambda: proposed_policy_text(advise(helios, helios_history)),  # type: ignore[arg-type]
    )
    timed("Philly: read 47,192 jobs → demand", repeat, read_philly)
    timed("Philly: advise (11 teams)", repeat, lambda: advise(philly_policy, philly_history))  # type: ignore[arg-type]


# -- the out-of-sample test -------------------------------------------------------------------------
_CONTEXT: ReplayContext | None = None


def _start(context: ReplayContext) -> None:
    global _CONTEXT
    _CONTEXT = context


def _replay(request: Request) -> ReplayScore:
    assert _CONTEXT is not None
    return _CONTEXT.replay(request)


def scaled(policy: Policy, factor: float) -> Policy:
    """The same cluster with `factor` × the nodes and every nominal quota × `factor` (whole GPUs)."""
    pools = tuple(replace(p, nodes=round(p.nodes * factor)) for p in policy.pools)
    teams = tuple(
        replace(
            t,
            quotas=tuple(
                replace(q, nominal=replace(q.nominal, gpus=round(q.nominal.gpus * factor))) for q in t.quotas
            ),
        )
        for t in policy.teams
    )
    return replace(policy, pools=pools, teams=teams, _index={})


def _rule_vectors(policy: Policy, space: QuotaSpace, history: list[SimJob]) -> dict[str, QuotaVector]:
    """The baselines fitted on the whole history the advisor was given (not only its fit days)."""
    window = Window("history", 0.0, SPLIT_DAY * DAY, tuple(history))
    rule = advise(policy, trace_history(policy, history)).proposed
    return {
        f"{EQUAL} (21 d)": space.vector_of({(e.team, e.pool): 1.0 for e in space.entries}),
        f"{PROPORTIONAL} (21 d)": space.vector_of(demand_gpu_s(policy, window, decayed=False)),
        f"{MEDIAN_RULE} (21 d)": space.vector_of(
            {(t.name, q.pool): float(q.nominal.gpus) for t in rule.teams for q in t.quotas}
        ),
    }


def _row(label: str, score: ReplayScore, today: ReplayScore) -> dict[str, Any]:
    worse = sorted(
        name
        for name, t in score.teams.items()
        if t.jobs
        and max(t.wait_p95_s, today.teams[name].wait_p95_s) >= HOUR
        and t.wait_p95_s > 1.1 * today.teams[name].wait_p95_s
    )
    return {
        "label": label,
        "mean_p95_h": score.mean_p95_s / HOUR,
        "change": score.mean_p95_s / today.mean_p95_s - 1 if today.mean_p95_s else 0.0,
        "violation_h": score.violation_s / HOUR,
        "worse_teams": worse,
        "teams_p95_h": {n: t.wait_p95_s / HOUR for n, t in sorted(score.teams.items()) if t.jobs},
    }


def holdout_case(
    base: Policy, jobs: list[SimJob], gpus: int, engine: str, settings: AdviceSettings
) -> dict[str, Any]:
    policy = base if gpus == 704 else scaled(base, gpus / 704)
    history = [j for j in jobs if j.submit_s < SPLIT_DAY * DAY]
    test = Window("test", SPLIT_DAY * DAY, 32 * DAY, tuple(j for j in jobs if j.submit_s >= SPLIT_DAY * DAY))
    pools: list[ProcessPoolExecutor] = []

    def evaluate_for(space: QuotaSpace, windows: dict[str, Window]) -> CachedReplays:
        context = ReplayContext(policy, space, {**windows, "test": test}, engine)
        pool = ProcessPoolExecutor(2, initializer=_start, initargs=(context,))
        pools.append(pool)
        return CachedReplays(lambda requests: list(pool.map(_replay, requests)))

    def progress(done: int, planned: int, text: str) -> None:
        print(
            f"  [{time.perf_counter() - started:6.0f} s] {done}/{planned} {text}", file=sys.stderr, flush=True
        )

    started = time.perf_counter()
    load_before = uptime()
    advice: ReplayAdvice = advise_by_replay(
        policy, history, replace(settings, engine=engine), evaluate_for, progress
    )
    advise_s = time.perf_counter() - started
    space = advice.space
    vectors: dict[str, QuotaVector] = {TODAY: advice.today.vector, "proposal": advice.result.vector}
    for name, judged in advice.baselines.items():
        if name != TODAY:
            vectors[f"{name} (fit days)"] = judged.vector
    # The rules as their users get them: within the job floor, as before, but not the advisor's --floor.
    plain = build_space(
        policy,
        demand_pools(policy, history),
        whole_nodes=settings.whole_nodes,
        max_change=settings.max_change,
        largest_job=largest_jobs(policy, history),
    )
    vectors.update(_rule_vectors(policy, plain, history))
    labels = list(vectors)
    scores = list(pools[0].map(_replay, [(vectors[k], "test") for k in labels]))
    for pool in pools:
        pool.shutdown()
    today = scores[0]
    rows = [_row(label, score, today) for label, score in zip(labels, scores, strict=True)]
    proposal = rows[1]
    baselines = rows[2:]
    checks = {
        "mean p95 at least 30% shorter": proposal["change"] <= -0.30,
        "no team worse by more than 10% (teams under 1 h either way exempt)": not proposal["worse_teams"],
        "guarantee violations not above today's": proposal["violation_h"] <= rows[0]["violation_h"],
        "beats every baseline": all(proposal["mean_p95_h"] < b["mean_p95_h"] for b in baselines),
    }
    return {
        "gpus": gpus,
        "engine": engine,
        "advice": {
            "why": advice.why,
            "chosen": None if advice.chosen is None else advice.chosen.label,
            "nominal": {e.team: advice.result.vector[i] for i, e in enumerate(space.entries)},
            "today": {e.team: e.today for e in space.entries},
            "replays": advice.replays,
            "seconds": round(advise_s, 1),
            "load_before": load_before,
            "load_after": uptime(),
            "bootstrap": None if advice.bootstrap is None else advice.bootstrap.describe(),
            "finalists": [
                {
                    "label": f.label,
                    "fit_mean_p95_h": round(f.fit.mean_p95_s / HOUR, 3),
                    "validation_mean_p95_h": round(f.validation.mean_p95_s / HOUR, 3),
                    "fit_regressions": sorted(f.fit_verdict.regressions),
                    "validation_regressions": sorted(f.validation_verdict.regressions),
                    "validation_infeasibility": f.validation_verdict.infeasibility,
                }
                for f in advice.finalists
            ],
            "fit_mean_p95_h": [advice.today.fit.mean_p95_s / HOUR, advice.result.fit.mean_p95_s / HOUR],
            "validation_mean_p95_h": [
                advice.today.validation.mean_p95_s / HOUR,
                advice.result.validation.mean_p95_s / HOUR,
            ],
        },
        "test": rows,
        "checks": checks,
    }


def print_case(case: dict[str, Any]) -> None:
    a = case["advice"]
    print(f"\n### {case['gpus']} GPUs, engine {case['engine']}\n")
    print(
        f"advice from days 0–21: {a['why']} "
        f"({a['replays']} replays, {a['seconds']:.0f} s; {a['load_before']})"
    )
    print(
        "nominal today → advised: " + ", ".join(f"{t} {a['today'][t]}→{g}" for t, g in a["nominal"].items())
    )
    if a["bootstrap"]:
        print(f"confidence: {a['bootstrap']}")
    print("\nfinalists (mean p95 h on the advisor's fit and validation days; teams that regress there):\n")
    for f in a["finalists"]:
        print(
            f"- {f['label']}: fit {f['fit_mean_p95_h']:.3f} {','.join(f['fit_regressions']) or '—'}; "
            f"validation {f['validation_mean_p95_h']:.3f} {','.join(f['validation_regressions']) or '—'}"
        )
    rows = case["test"]
    teams = list(rows[0]["teams_p95_h"])
    print("\ndays 21–31 replayed (p95 wait, hours):\n")
    print("| sizing | mean p95 h | vs today | violations h | worse teams | " + " | ".join(teams) + " |")
    print("|---" * (len(teams) + 5) + "|")
    for r in rows:
        cells = [f"{r['teams_p95_h'].get(t, 0):.2f}" for t in teams]
        print(
            f"| {r['label']} | {r['mean_p95_h']:.3f} | {r['change']:+.0%} | {r['violation_h']:.2f} | "
            f"{', '.join(r['worse_teams']) or '—'} | " + " | ".join(cells) + " |"
        )
    print()
    for check, ok in case["checks"].items():
        print(f"- {'PASS' if ok else 'FAIL'}: {check}")


def holdout(only: Sequence[str], out: Path | None, settings: AdviceSettings) -> None:
    base = load_policy(PHILLY_POLICY)
    with PHILLY.open(encoding="utf-8", newline="") as handle:
        jobs = read_trace(handle, str(PHILLY))
    cases = []
    for gpus in (704, 528):
        for engine in ("kueue", "commons"):
            if only and f"{gpus}:{engine}" not in only:
                continue
            case = holdout_case(base, jobs, gpus, engine, settings)
            print_case(case)
            cases.append(case)
            if out is not None:
                out.write_text(json.dumps(cases, indent=2))


# -- where a search's time goes ------------------------------------------------------------------------
def profile(engine: str) -> None:
    """cProfile of one fit-window replay as the search makes it: days 0–21's fit part, 704 GPUs."""
    import cProfile
    import pstats

    from gpucommons.planning.replay_score import ValidationSplit, score_replay, split_history

    started = time.process_time()
    policy = load_policy(PHILLY_POLICY)
    with PHILLY.open(encoding="utf-8", newline="") as handle:
        jobs = [j for j in read_trace(handle, str(PHILLY)) if j.submit_s < SPLIT_DAY * DAY]
    print(f"read {len(jobs):,} jobs: {time.process_time() - started:.2f} s CPU")
    settings = AdviceSettings()
    fit, _ = split_history(jobs, ValidationSplit(share=0.25), settings.half_life_s, settings.fit_window_s)
    profiler = cProfile.Profile()
    started = time.process_time()
    profiler.enable()
    score_replay(policy, fit, engine)
    profiler.disable()
    print(f"one replay of {fit.days:.2f} days ({len(fit.jobs):,} jobs, {engine}): "
          f"{time.process_time() - started:.1f} s CPU with the profiler; {uptime()}")  # fmt: skip
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(15)


# -- the command as a user runs it ---------------------------------------------------------------------
def cli_run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before = uptime()
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable, "-m", "gpucommons", "advise",
                "--policy", str(PHILLY_POLICY), "--history", str(PHILLY),
                "--out", str(Path(tmp) / "proposed.yaml"), "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "COLUMNS": "120"},
        )  # fmt: skip
        wall = time.perf_counter() - started
    if result.returncode != 0:
        print(result.stderr)
        raise SystemExit(result.returncode)
    data = json.loads(result.stdout)
    print(
        f"commons advise on Philly October at 704 GPUs: {wall:.0f} s wall, "
        f"{data['search']['replays']} replays"
    )
    print(f"before: {before}; after: {uptime()}")
    print(f"decision: {data['decision']['why']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--holdout", action="store_true")
    ap.add_argument("--cli", action="store_true")
    ap.add_argument("--only", action="append", default=[], help="e.g. 704:commons (repeatable)")
    ap.add_argument("--json", type=Path, default=None, help="write the holdout figures here")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--folds", type=int, default=None, help="holdout: --folds of commons advise")
    ap.add_argument("--floor", type=float, default=None, help="holdout: --floor as a share, e.g. 0.5")
    ap.add_argument("--profile", metavar="ENGINE", default=None, help="cProfile one fit-window replay")
    args = ap.parse_args()
    if not (args.timing or args.holdout or args.cli or args.profile):
        ap.error("choose --timing, --holdout, --cli and/or --profile ENGINE")
    if args.profile:
        profile(args.profile)
    if args.timing:
        timing(args.repeat)
    if args.holdout:
        defaults = AdviceSettings()
        holdout(
            args.only,
            args.json,
            replace(
                defaults,
                folds=defaults.folds if args.folds is None else args.folds,
                floor_share=defaults.floor_share if args.floor is None else args.floor,
            ),
        )
    if args.cli:
        cli_run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
