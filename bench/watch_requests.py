"""Benchmark: the load one `commons tasks --watch` puts on the server, polling and following events.

    python bench/watch_requests.py                      # 60 s per cell: 3 scenarios × 2 modes
    python bench/watch_requests.py --seconds 30 --scenario steady

Each cell starts a real `commons up --executor timer` (api_load's server: SQLite in a temporary
home, 256 GPUs, 8 teams) and one `commons tasks --watch` subprocess, piped (it prints a `# time`
line per refresh), for `--seconds`:

  poll     `--watch --poll`: what --watch did before the event stream, a list fetch every 2 s
  events   `--watch`: follows `GET /api/v1/events`, refreshes on an event (≤ 2 per s, ≥ 1 per min)

The scenarios: `idle` (nothing happens), `trickle` and `steady` (a `sleep 2` task every 20 s,
every 3 s: each is submitted, admitted, running, succeeded), `burst` (a batch of 1,000 `sleep 3600`
tasks at 5 s, filling the cluster and queueing the rest). Counted on the server (`/metrics`,
`commons_api_request_duration_seconds_count` by route) over the cell: `GET /api/v1/tasks` requests
and `GET /api/v1/events` streams opened; the tables the watcher printed; in `trickle` and `steady`,
how long after each submission's answer its task showed in the watcher's output (p50 / max). The
last line is `watch tasks_per_min_poll=… tasks_per_min_events=…` of the idle scenario (or the
first run): the load of a watcher that nothing disturbs, which polling paid all the time.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_load import Server, running_server, task_body

#: Seconds between two submissions of a `sleep 2` task, per scenario that submits one at a time.
EVERY_S = {"trickle": 20.0, "steady": 3.0}
SCENARIOS = ("idle", "trickle", "steady", "burst")
MODES = ("poll", "events")
METRIC = re.compile(r"commons_api_request_duration_seconds_count\{([^}]*)\} ([0-9.e+]+)")


def route_counts(server: Server) -> dict[str, float]:
    """Requests answered so far, by `METHOD route` (every status)."""
    text = httpx.get(server.url + "/metrics", headers=server.headers, timeout=10).text
    out: dict[str, float] = {}
    for labels, value in METRIC.findall(text):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        key = f"{fields.get('method')} {fields.get('route')}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


class Watcher:
    """`commons tasks --watch` (piped) and what it printed, line by line with the time it came."""

    def __init__(self, server: Server, mode: str) -> None:
        env = {**os.environ, "COMMONS_URL": server.url, "COMMONS_TOKEN": server.token}
        argv = [
            sys.executable,
            "-m",
            "gpucommons",
            "tasks",
            "--watch",
            *(["--poll"] if mode == "poll" else []),
        ]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: dict[str, float] = {}  # task id -> when it first showed
        self.tables = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            if line.startswith("# "):
                self.tables += 1
            first = line.split(" ", 1)[0]
            if first.startswith("t") and first not in self.seen:
                self.seen[first] = now

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def run_cell(scenario: str, mode: str, seconds: float) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp,
        running_server(Path(tmp), None, 0.5, False) as server,
    ):
        client = httpx.Client(base_url=server.url, headers=server.headers, timeout=60)
        before = route_counts(server)
        watcher = Watcher(server, mode)
        began = time.monotonic()
        submitted: dict[str, float] = {}
        burst_done = False
        i = 0
        while (elapsed := time.monotonic() - began) < seconds:
            if scenario in EVERY_S and elapsed >= EVERY_S[scenario] * i:
                body = {**task_body(i % 8, f"steady-{i}"), "command": ["sleep", "2"]}
                task = client.post("/api/v1/tasks", json=body).json()["id"]
                submitted[task] = time.monotonic()
                i += 1
            if scenario == "burst" and not burst_done and elapsed >= 5:
                bodies = [task_body(k % 8, f"burst-{k}") for k in range(1000)]
                client.post("/api/v1/tasks/batch", json={"tasks": bodies}).raise_for_status()
                burst_done = True
            time.sleep(0.05)
        took = time.monotonic() - began
        watcher.stop()
        after = route_counts(server)
        client.close()
    lists = after.get("GET /api/v1/tasks", 0) - before.get("GET /api/v1/tasks", 0)
    streams = after.get("GET /api/v1/events", 0) - before.get("GET /api/v1/events", 0)
    delays = [watcher.seen[t] - at for t, at in submitted.items() if t in watcher.seen]
    return {
        "seconds": took,
        "lists": lists,
        "lists_per_min": lists * 60 / took,
        "streams": streams,
        "tables": watcher.tables,
        "submitted": len(submitted),
        "shown": len(delays),
        "delay_p50": statistics.median(delays) if delays else float("nan"),
        "delay_max": max(delays) if delays else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each cell")
    parser.add_argument("--scenario", choices=SCENARIOS, action="append", help="default: all three")
    args = parser.parse_args()
    scenarios = args.scenario or list(SCENARIOS)
    rows = []
    started = time.strftime("%H:%M:%S", time.gmtime())
    load_before = os.getloadavg()[0]
    for scenario in scenarios:
        for mode in MODES:
            cell = run_cell(scenario, mode, args.seconds)
            rows.append((scenario, mode, cell))
            print(
                f"  {scenario:6} {mode:6} done: {cell['lists']:.0f} list requests",
                file=sys.stderr,
                flush=True,
            )
    print(f"{started}–{time.strftime('%H:%M:%S', time.gmtime())} UTC, load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after; {args.seconds:.0f} s per cell")  # fmt: skip
    print("| scenario | --watch | GET /api/v1/tasks | per minute | streams opened | tables printed "
          "| task shown after submit: p50 / max s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for scenario, mode, c in rows:
        delay = (
            f"{c['delay_p50']:.2f} / {c['delay_max']:.2f} ({c['shown']}/{c['submitted']})"
            if c["submitted"]
            else "-"
        )
        print(f"| {scenario} | {mode} | {c['lists']:.0f} | {c['lists_per_min']:.1f} | {c['streams']:.0f} "
              f"| {c['tables']} | {delay} |")  # fmt: skip
    pick = [r for r in rows if r[0] == "idle"] or rows
    per_mode = {mode: c["lists_per_min"] for _, mode, c in pick}
    print(f"watch tasks_per_min_poll={per_mode.get('poll', float('nan')):.1f} "
          f"tasks_per_min_events={per_mode.get('events', float('nan')):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
