"""Benchmark: what starting the `commons` CLI costs (issue 12: `commons --version` ≤ 0.1 s of CPU).

    python bench/cli_start.py [--repeat 10] [--baseline-src DIR]

Runs each command `--repeat` times in a fresh interpreter (`python -m gpucommons …`, what the
`commons` script runs) and reports the CPU time (user + system, from the children's rusage) and the
wall time, median and minimum, in two settings:
  cached     compiled bytecode available, as after `pip install` (a private PYTHONPYCACHEPREFIX,
             filled by one warm-up run, so nothing is written next to the sources)
  uncached   nothing compiled and nothing written (PYTHONDONTWRITEBYTECODE=1, an empty prefix): what
             a checkout run with that variable set pays on every start
`--baseline-src DIR` times another checkout's code (its src/, e.g. from `git archive main src`) in
the same run and prints the ratios. The floor is `python -c pass` in the same interpreter. The last
line is `cli start_cpu_s=…` of `--version`, cached, median.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (("--version",), ("--help",), ("checkpoint", "--help"))


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def measure(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, float, float]:
    """Median CPU, minimum CPU and median wall (s)."""
    runs = [run_once(argv, env) for _ in range(repeat)]
    cpu = [c for c, _ in runs]
    return statistics.median(cpu), min(cpu), statistics.median(w for _, w in runs)


def environment(src: Path | None, cache: Path, cached: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(cache), "COLUMNS": "100"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--baseline-src", type=Path, help="also time this src/ folder's code")
    args = parser.parse_args()

    rows: dict[tuple[str, str, str], tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="commons-cli-start-") as tmp:
        floor = measure([sys.executable, "-c", "pass"], dict(os.environ), args.repeat)
        codes = [("baseline", args.baseline_src)] if args.baseline_src else []
        for code, src in [*codes, ("this", None)]:
            for cached in (True, False):
                cache = Path(tmp, f"{code}-{'cached' if cached else 'uncached'}")
                env = environment(src, cache, cached)
                for command in COMMANDS:
                    argv = [sys.executable, "-m", "gpucommons", *command]
                    if cached:
                        run_once(argv, env)  # fills the bytecode cache
                    setting = "cached" if cached else "uncached"
                    rows[(code, setting, " ".join(command))] = measure(argv, env, args.repeat)
    print(
        f"# load average {os.getloadavg()[0]:.1f}; {args.repeat} runs each; floor `python -c pass`: "
        f"CPU {floor[0]:.3f} s median, wall {floor[2]:.3f} s"
    )
    print("| code | bytecode | command | CPU median s | CPU min s | wall median s |")
    print("|---|---|---|---|---|---|")
    for (code, setting, command), (median, low, wall) in rows.items():
        print(f"| {code} | {setting} | `commons {command}` | {median:.3f} | {low:.3f} | {wall:.3f} |")
    if args.baseline_src:
        print("\n| bytecode | command | CPU median this ÷ baseline |")
        print("|---|---|---|")
        for (code, setting, command), (median, _, _) in rows.items():
            if code == "this":
                base = rows[("baseline", setting, command)][0]
                print(f"| {setting} | `commons {command}` | {median / base:.2f} |")
    print(f"cli start_cpu_s={rows[('this', 'cached', '--version')][0]:.3f}")


if __name__ == "__main__":
    main()
