"""Benchmark: a month's chargeback over 1,000,000 ledger intervals (issue 12: the whole command ≤ 2 s).

Generates a seeded ledger for November 2026 on a 3-pool, 24-team cluster (intervals cross the
month's edges, teams borrow above their quotas, some preempted rows carry lost work), writes it as a
contract-4 CSV and the policy as YAML into a temporary folder, then times, best of R runs:
  parse    read_usage_table over the CSV text (every row validated; bad rows by line number)
  compute  compute_chargeback (cut at the edges, integrate H/B/Q, price, split, round, check the
           invariant)
  command  the whole `commons chargeback --policy P --usage U --period 2026-11 --out C.json`, a fresh
           interpreter each time (start-up, policy, reading the file, the JSON and the summary table)
parse and compute run in a subprocess too, so that `--baseline-src DIR` can time another checkout's
code (`git archive main src | tar -x -C /tmp/base`, then `--baseline-src /tmp/base/src`) in the same
run: the ratios are printed, and both must write the same JSON.

    python bench/chargeback.py [--intervals N] [--repeat R] [--baseline-src DIR]

The last line is `chargeback command_s=… command_cpu_s=… library_s=…`; the exit code is 1 when the
whole command took longer than `--budget-s` (2 s) of wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from decimal import ROUND_DOWN, Decimal
from pathlib import Path

from gpucommons.domain import (
    AdminSplit,
    ChargebackConfig,
    IdlePolicy,
    Policy,
    Pool,
    PriorityClass,
    Quota,
    Resources,
    Team,
)
from gpucommons.ledger import EndReason, Period, UsageInterval, write_usage_csv
from gpucommons.policy import dump_policy

PERIOD = Period.parse("2026-11")
POOLS = (
    Pool("h100", "H100", nodes=64, gpus_per_node=8, price_per_gpu_hour=Decimal("2.50")),
    Pool("a100", "A100", nodes=128, gpus_per_node=8, price_per_gpu_hour=Decimal("1.60")),
    Pool("l4", "L4", nodes=64, gpus_per_node=4, price_per_gpu_hour=Decimal("0.45")),
)
CLASSES = ("production", "interactive", "training", "experiment")


def bench_policy(teams: int = 24) -> Policy:
    quotas_per_team = [
        (
            Quota("h100", Resources(gpus=512 * 3 // 4 // teams)),
            Quota("a100", Resources(gpus=1024 * 3 // 4 // teams)),
            Quota("l4", Resources(gpus=256 // teams)),
        )
        for _ in range(teams)
    ]
    return Policy(
        cluster_name="bench",
        pools=POOLS,
        priority_classes=tuple(
            PriorityClass(c, v) for c, v in zip(CLASSES, (1000, 800, 500, 100), strict=True)
        ),
        default_priority_class="experiment",
        teams=tuple(Team(f"team-{i:02d}", q) for i, q in enumerate(quotas_per_team)),
        chargeback=ChargebackConfig(
            idle=IdlePolicy.USAGE,
            admin_monthly=Decimal("3000"),
            admin_split=AdminSplit.WEIGHTED,
            borrowed_rate=Decimal("0.8"),
        ),
    )


def generate_ledger(n: int, policy: Policy, seed: int = 6) -> list[UsageInterval]:
    """`n` intervals, ~80 % of capacity on average, a few hours spilling over each edge of the month."""
    rng = random.Random(seed)
    teams = policy.team_names
    pools = [p.name for p in POOLS]
    span_s = int((PERIOD.end - PERIOD.start).total_seconds()) + 6 * 3600
    origin = PERIOD.start - timedelta(hours=3)
    gpu_choices = (1, 1, 2, 4, 8)
    out: list[UsageInterval] = []
    for i in range(n):
        start = origin + timedelta(seconds=rng.randrange(span_s))
        duration = timedelta(seconds=int(rng.expovariate(1 / 1800)) + 1)
        gpus = rng.choice(gpu_choices)
        preempted = rng.random() < 0.05
        lost = Decimal(0)
        if preempted:
            held_gpu_s = Decimal(gpus * int(duration.total_seconds()))
            share = Decimal(rng.randrange(1000)) / 1000
            lost = (held_gpu_s * share / 3600).quantize(Decimal("0.0001"), rounding=ROUND_DOWN)
        out.append(
            UsageInterval(
                task_id=f"t{i}",
                team=teams[rng.randrange(len(teams))],
                pool=pools[rng.randrange(len(pools))],
                gpus=gpus,
                start=start,
                end=start + duration,
                priority=CLASSES[rng.randrange(len(CLASSES))],
                borrowed_gpus=0,
                end_reason=EndReason.PREEMPTED if preempted else EndReason.SUCCEEDED,
                lost_gpu_hours=lost,
            )
        )
    return out


#: Run in a subprocess (so that another checkout's code can be timed, `--baseline-src`): the library
#: alone, from the file's text to the result, best of R runs, as JSON.
LIBRARY = """
import io, json, sys, time
from pathlib import Path
from gpucommons.chargeback import compute_chargeback
from gpucommons.ledger import Period, read_usage_table
from gpucommons.policy import load_policy
policy = load_policy(Path(sys.argv[1]))
text = Path(sys.argv[2]).read_text(encoding="utf-8")
best = {}
for _ in range(int(sys.argv[3])):
    w0, c0 = time.perf_counter(), time.process_time()
    table = read_usage_table(io.StringIO(text), pools=[p.name for p in policy.pools])
    w1, c1 = time.perf_counter(), time.process_time()
    result = compute_chargeback(policy, table, Period.parse("2026-11"))
    w2, c2 = time.perf_counter(), time.process_time()
    for name, wall, cpu in (("parse", w1 - w0, c1 - c0), ("compute", w2 - w1, c2 - c1)):
        if name not in best or wall < best[name][0]:
            best[name] = (wall, cpu)
    assert result.platform_cents + sum(t.total_cents for t in result.teams) == result.cluster_cost_cents
    del table
print(json.dumps(best))
"""


def _env(src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    return env


def time_library(src: Path | None, policy: Path, usage: Path, repeat: int) -> dict[str, tuple[float, float]]:
    argv = [sys.executable, "-c", LIBRARY, str(policy), str(usage), str(repeat)]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(src), check=True)
    best: dict[str, tuple[float, float]] = json.loads(done.stdout)
    return best


def time_command(src: Path | None, policy: Path, usage: Path, out: Path, repeat: int) -> tuple[float, float]:
    """Best wall time of the whole `commons chargeback` (a fresh interpreter each run) and its CPU time."""
    argv = [sys.executable, "-m", "gpucommons", "chargeback", "--policy", str(policy), "--usage", str(usage)]
    argv += ["--period", "2026-11", "--out", str(out)]
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        w0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=_env(src), check=True)
        wall = time.perf_counter() - w0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, (wall, cpu))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--intervals", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="take the best of R runs")
    parser.add_argument(
        "--budget-s", type=float, default=2.0, help="fail when the whole command takes longer (wall)"
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also time another checkout's code (its src/ folder, e.g. from `git archive main src`), "
        "in the same run, and print the ratios",
    )
    args = parser.parse_args()

    policy = bench_policy()
    t0 = time.perf_counter()
    intervals = generate_ledger(args.intervals, policy)
    with tempfile.TemporaryDirectory(prefix="commons-chargeback-bench-") as tmp:
        policy_path, usage_path, out = Path(tmp, "policy.yaml"), Path(tmp, "usage.csv"), Path(tmp, "c.json")
        policy_path.write_text(dump_policy(policy), encoding="utf-8")
        with usage_path.open("w", encoding="utf-8") as f:
            write_usage_csv(intervals, f)
        del intervals
        size = usage_path.stat().st_size
        print(
            f"generated {args.intervals:,} intervals ({size / 1e6:.1f} MB of CSV) in "
            f"{time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.1f}"
        )
        rows: dict[str, dict[str, tuple[float, float]]] = {}
        outputs: dict[str, str] = {}
        for code, src in (("baseline", args.baseline_src), ("this", None)):
            if code == "baseline" and src is None:
                continue
            lib = time_library(src, policy_path, usage_path, args.repeat)
            lib["command"] = time_command(src, policy_path, usage_path, out, args.repeat)
            rows[code] = lib
            outputs[code] = out.read_text(encoding="utf-8")
    print()
    print(
        "| code | parse wall / CPU s | compute wall / CPU s | library wall / CPU s "
        "| whole command wall / CPU s |"
    )
    print("|---|---|---|---|---|")
    for code, r in rows.items():
        (pw, pc), (cw, cc), (ww, wc) = r["parse"], r["compute"], r["command"]
        print(
            f"| {code} | {pw:.2f} / {pc:.2f} | {cw:.2f} / {cc:.2f} | {pw + cw:.2f} / {pc + cc:.2f} "
            f"| {ww:.2f} / {wc:.2f} |"
        )
    if "baseline" in rows:
        b, t = rows["baseline"], rows["this"]

        def ratio(key: str, i: int) -> str:
            return f"{t[key][i] / b[key][i]:.2f}"

        lib_b = b["parse"][0] + b["compute"][0]
        lib_t = t["parse"][0] + t["compute"][0]
        print(
            f"| this ÷ baseline | {ratio('parse', 0)} / {ratio('parse', 1)} | {ratio('compute', 0)} / "
            f"{ratio('compute', 1)} | {lib_t / lib_b:.2f} | {ratio('command', 0)} / {ratio('command', 1)} |"
        )
        same = outputs["baseline"] == outputs["this"]
        print(f"\nthe two codes wrote {'the same' if same else 'DIFFERENT'} chargeback JSON")
        if not same:
            return 1
    print(f"(best of {args.repeat}; load average {os.getloadavg()[0]:.1f})")
    wall, cpu = rows["this"]["command"]
    library = rows["this"]["parse"][0] + rows["this"]["compute"][0]
    print(f"chargeback command_s={wall:.2f} command_cpu_s={cpu:.2f} library_s={library:.2f}")
    return 0 if wall <= args.budget_s else 1


if __name__ == "__main__":
    sys.exit(main())
