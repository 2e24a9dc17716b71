"""Benchmark: the quota advisor on the shared traces — how fast, and whether its advice helps.

Two parts:

- `--timing`: read + advise + write-and-check the proposed policy, for the Helios Earth May 2020
  usage file (142,848 five-minute samples, 16 teams) and the Philly October 2017 trace (47,192
  jobs, 11 teams). Wall and CPU seconds, median of `--repeat` runs.
- `--holdout`: advice from the first `--split-days` days of the Philly trace, replayed on the rest
  (times shifted to start at 0) under the current policy, the proposal (default rule), the
  proposal in whole nodes, and the proposal with borrow limits at the past peak, with the
  simulator's what-if comparison. Out of sample: the advice never saw the jobs it is judged on.

    python bench/advise.py --timing
    python bench/advise.py --holdout          # several minutes: eight replays
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from gpucommons.domain import Policy
from gpucommons.planning.advisor import AdvisorRule, advise, proposed_policy_text, trace_history
from gpucommons.planning.usage_history import read_usage_samples
from gpucommons.planning.whatif import Variant, compare, summary_rows, team_rows
from gpucommons.policy import load_policy
from gpucommons.sim import SimConfig, read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "examples" / "traces"
HELIOS = TRACES / "helios_earth_vc_usage_2020-05_5min.csv"
PHILLY = TRACES / "philly_vc_jobs_2017-10.csv"
PHILLY_POLICY = ROOT / "examples" / "philly-oct-704.yaml"
HELIOS_POLICY = ROOT / "examples" / "helios-earth.yaml"
DAY = 86400


def helios_policy() -> Policy:
    """The Helios Earth VCs with their May 2020 quotas (856 GPUs), as 107 nodes of 8."""
    return load_policy(HELIOS_POLICY)


def timed(label: str, repeat: int, run: object) -> None:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        run()  # type: ignore[operator]
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(f"| {label} | {statistics.median(walls) * 1000:,.1f} | {statistics.median(cpus) * 1000:,.1f} |")


def timing(repeat: int) -> None:
    helios, philly_policy = helios_policy(), load_policy(PHILLY_POLICY)
    print(f"median of {repeat} runs\n\n| step | wall ms | CPU ms |\n|---|---|---|")

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


def holdout(split_days: float) -> None:
    policy = load_policy(PHILLY_POLICY)
    with PHILLY.open(encoding="utf-8", newline="") as handle:
        jobs = read_trace(handle, str(PHILLY))
    split = split_days * DAY
    before = [j for j in jobs if j.submit_s < split]
    after = [replace(j, submit_s=j.submit_s - split) for j in jobs if j.submit_s >= split]
    print(f"advice from {len(before):,} jobs (days 0–{split_days:g}), replay of {len(after):,} jobs after")
    history = trace_history(policy, before)
    variants = [Variant("current", policy, "commons")]
    for label, rule in (
        ("proposed", AdvisorRule()),
        ("whole nodes", AdvisorRule(whole_nodes=True)),
        ("borrow limits", AdvisorRule(limit_borrowing=True)),
    ):
        candidate = advise(policy, history, rule).proposed
        print(f"{label}: " + ", ".join(f"{t.name} {t.nominal('gpu').gpus}" for t in candidate.teams))
        variants.append(Variant(label, candidate, "commons"))
    started = time.perf_counter()
    comparison = compare(variants, after, SimConfig())
    print(f"replays: {time.perf_counter() - started:.0f} s wall\n")
    labels = [v.label for v in variants]
    for first, rows in (
        ("metric", summary_rows(comparison)),
        ("team: wait p50 / p95 · fairness", team_rows(comparison)),
    ):
        print(f"\n| {first} | " + " | ".join(labels) + " |")
        print("|---" * (len(labels) + 1) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--holdout", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--split-days", type=float, default=15.0)
    args = ap.parse_args()
    if not (args.timing or args.holdout):
        ap.error("choose --timing and/or --holdout")
    if args.timing:
        timing(args.repeat)
    if args.holdout:
        holdout(args.split_days)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
