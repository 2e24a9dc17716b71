"""Benchmark: what the local executor costs per attempt on this machine.

Every attempt is a real process group started through the runner wrapper
(`python -I -m gpucommons.backends.local.runner`), so the figures are what `commons up` pays per task:
  start      LocalExecutor.start() until it returns a Handle (fork + exec of the runner)
  run-true   start() of `true` until poll() reports its exit (runner start-up, command, exit file)
  poll       one poll() of a running attempt: as its parent (waitpid) and adopted (/proc + exit file)
  sigterm    signal(SIGTERM) to `sleep 600` until poll() sees it end
  burst      N `sleep 1` attempts started at once until all have ended (ideal: 1 s)
Run:  python bench/local_executor.py [--n 50] [--burst 20]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gpucommons.backends.local import LocalExecutor
from gpucommons.backends.ports import ExitStatus, Handle, Launch


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait_exit(executor: LocalExecutor, handle: Handle, pause: float = 0.001) -> ExitStatus:
    while (status := executor.poll(handle)) is None:
        time.sleep(pause)
    return status


def row(name: str, samples_s: list[float]) -> str:
    ms = [s * 1000 for s in samples_s]
    return (
        f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {percentile(ms, 0.99):.2f} | {max(ms):.2f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="attempts per measurement")
    parser.add_argument("--burst", type=int, default=20, help="attempts started at once")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="commons-bench-"))
    work = root / "work"
    work.mkdir()
    executor = LocalExecutor(root / "run")
    counter = iter(range(1_000_000))

    def launch(*command: str) -> Launch:
        task = f"b{next(counter)}"
        return Launch(task, "bench", command, {}, work, root / "logs" / f"{task}.log")

    starts: list[float] = []
    runs: list[float] = []
    for _ in range(args.n):
        t0 = time.perf_counter()
        handle = executor.start(launch("true"))
        starts.append(time.perf_counter() - t0)
        assert wait_exit(executor, handle).succeeded
        runs.append(time.perf_counter() - t0)

    sleeper = executor.start(launch("sleep", "600"))
    adopter = LocalExecutor(root / "run")
    polls_child = timed(lambda: executor.poll(sleeper), args.n * 10)
    polls_adopted = timed(lambda: adopter.poll(sleeper), args.n * 10)
    executor.kill(sleeper)
    wait_exit(executor, sleeper)

    stops: list[float] = []
    for _ in range(args.n // 5 or 1):
        handle = executor.start(launch("sleep", "600"))
        time.sleep(0.05)  # let the runner exec the command
        t0 = time.perf_counter()
        executor.signal(handle, signal.SIGTERM)
        assert wait_exit(executor, handle).signal == signal.SIGTERM
        stops.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    handles = [executor.start(launch("sleep", "1")) for _ in range(args.burst)]
    for handle in handles:
        wait_exit(executor, handle, pause=0.005)
    burst = time.perf_counter() - t0

    print("| measure | n | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for name, samples in (
        ("start() returns", starts),
        ("`true`: start() → exit seen", runs),
        ("poll() of a running attempt, as parent", polls_child),
        ("poll() of a running attempt, adopted", polls_adopted),
        ("SIGTERM → exit seen", stops),
    ):
        print(row(name, samples))
    print(f"\n{args.burst} × `sleep 1` started at once, all ended after {burst:.2f} s (ideal 1 s)")
    return 0


def timed(call: Callable[[], object], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return samples


if __name__ == "__main__":
    sys.exit(main())
