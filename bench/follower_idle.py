"""Benchmark: what a follower costs while nothing happens (issue 12; `commons up --workers N`).

    python bench/follower_idle.py                                   # 10,000 pending, 20 s
    python bench/follower_idle.py --pending 10000 --baseline-src /tmp/base/src

A follower keeps read-only views of the queue (`Scheduler.mirror`, every 2 s). This starts a real
`commons up --workers 2 --executor timer` on a fresh PostgreSQL database (`bench/api_load.py`'s
server and policy: 256 GPUs filled by `sleep 3600` tasks, `--pending` more queued behind them),
waits until the leader has seen them all, then lets it sit idle for `--seconds` and reads the CPU
of each process from /proc: the leader (`commons up` itself) and the worker (its child, a
follower). With `--baseline-src DIR` it does the same with the server's code from DIR first.
The last line is `follower idle cpu_pct=…` of this code's worker.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from api_load import children, fresh_database, prepare, process_cpu_s, running_server  # noqa: E402


def measure(src: Path | None, pending: int, seconds: float, settle: float) -> tuple[float, float]:
    """CPU % of one core over `seconds` of idleness: (leader, follower)."""
    workdir = Path(tempfile.mkdtemp(prefix="commons-follower-idle-"))
    with (
        fresh_database("postgres", workdir) as url,
        running_server(workdir, url, 0.5, False, src, workers=2) as server,
    ):
        prepare(server, pending)
        time.sleep(settle)  # the follower's next looks take in what was just stored
        (worker,) = children(server.proc.pid)
        leader0, follower0 = process_cpu_s(server.proc.pid), process_cpu_s(worker)
        time.sleep(seconds)
        leader1, follower1 = process_cpu_s(server.proc.pid), process_cpu_s(worker)
    return 100 * (leader1 - leader0) / seconds, 100 * (follower1 - follower0) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pending", type=int, default=10_000, help="tasks queued behind the full cluster")
    parser.add_argument("--seconds", type=float, default=20.0, help="idle window measured (s)")
    parser.add_argument("--settle", type=float, default=6.0, help="wait after filling, before measuring (s)")
    parser.add_argument("--baseline-src", type=Path, help="the server's code from this src/ folder first")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  load average {os.getloadavg()[0]:.2f} (1 min)")
    runs: list[tuple[str, Path | None]] = [("baseline", args.baseline_src)] if args.baseline_src else []
    runs.append(("this", None))
    results = {}
    print("| code | pending | leader CPU % | follower CPU % |")
    print("|---|---|---|---|")
    for code, src in runs:
        leader, follower = measure(src, args.pending, args.seconds, args.settle)
        results[code] = follower
        print(f"| {code} | {args.pending} | {leader:.1f} | {follower:.1f} |", flush=True)
    print(f"\nfollower idle cpu_pct={results['this']:.1f}")


if __name__ == "__main__":
    main()
