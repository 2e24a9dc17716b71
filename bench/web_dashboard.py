"""Benchmark: how fast the dashboard shows a busy cluster, and what its polling costs the server.

    python bench/web_dashboard.py [--tasks 500] [--repeat 10]

Starts `commons up --executor timer` (tasks are in-process timers: the control plane alone) with the
dashboard tests' policy (one pool of 8 GPUs, teams alpha and beta), submits N one-GPU `sleep 3600`
tasks alternating between the teams (8 run, the rest wait with a reason each), then drives Debian's
chromium, signed in as the admin. Reports (median and p95 over the repeats):
  overview       hash change to #/ until the pool card shows 8 GPUs used (both requests + render)
  tasks          hash change to #/tasks?state= until the table (newest 200) and the queue are shown
  poll bytes     JSON one tasks-page poll downloads (/api/v1/tasks + /api/v1/queue), and the overview's
  api            latency of each endpoint the pages poll, over HTTP on loopback (httpx, no browser)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from gpucommons.api import schemas
from gpucommons.client.http import CommonsClient
from gpucommons.testing.web import chromium, running_server, wait_for

POLICY = Path(__file__).resolve().parents[1] / "tests" / "e2e" / "web" / "dashboard-policy.yaml"
#: static/data.js TASK_LIST_LIMIT: the task table asks for the newest 200.
TASK_LIST_LIMIT = 200


def summary(samples_s: list[float]) -> str:
    ordered = sorted(samples_s)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {1000 * statistics.median(ordered):7.1f} ms   p95 {1000 * p95:7.1f} ms"


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=500, help="tasks to submit (the API lists 500 at most)")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory() as home,
        running_server(POLICY, Path(home), executor="timer") as server,
    ):
        with server.client() as client:
            for i in range(args.tasks):
                team = "alpha" if i % 2 == 0 else "beta"
                request = schemas.TaskSubmit(team=team, gpus=1, command=["sleep", "3600"], name=f"{team}-{i}")
                client.submit(request)
            wait_for("8 GPUs in use", lambda: sum(t.used_gpus for t in client.teams()) == 8, timeout=60)
            queued = wait_for(
                "every waiting task to have a reason", lambda: _all_reasoned(client), timeout=60
            )
        print(f"{args.tasks} tasks: 8 running, {queued} waiting; repeat {args.repeat}")

        headers = {"Authorization": f"Bearer {server.admin_token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            tasks_bytes = len(http.get("/api/v1/tasks", params={"limit": TASK_LIST_LIMIT}).content)
            queue_bytes = len(http.get("/api/v1/queue").content)
            overview_bytes = len(http.get("/api/v1/teams").content) + len(http.get("/ui/api/context").content)
            print(
                f"poll bytes     tasks page {(tasks_bytes + queue_bytes) / 1024:7.1f} KiB"
                f"   overview {overview_bytes / 1024:5.1f} KiB   (every 3 s while a page is open)"
            )
            for path, params in (
                ("/api/v1/tasks", {"limit": TASK_LIST_LIMIT}),
                ("/api/v1/queue", {}),
                ("/api/v1/teams", {}),
                ("/ui/api/context", {}),
            ):
                samples = timed(
                    lambda p=path, q=params: http.get(p, params=q).raise_for_status(), 5 * args.repeat
                )
                print(f"api {path:<20} {summary(samples)}")

        with chromium() as browser:
            # bypass_csp: Playwright's wait_for_function evaluates its predicate, which the CSP forbids.
            page = browser.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
            page.goto(server.url + "/")
            page.fill("#token", server.admin_token)
            page.click("#signin-button")
            page.wait_for_selector("h1:has-text('Cluster overview')")
            rows = min(args.tasks, TASK_LIST_LIMIT)

            def show_overview() -> None:
                page.evaluate("location.hash = '#/usage'")
                page.wait_for_selector("h1:has-text('Usage and costs')")
                start = time.perf_counter()
                page.evaluate("location.hash = '#/'")
                used = "article[data-pool='gpu'] dd[data-stat='used']"
                page.wait_for_function(f'document.querySelector("{used}")?.textContent === "8"')
                overview.append(time.perf_counter() - start)

            def show_tasks() -> None:
                page.evaluate("location.hash = '#/'")
                page.wait_for_selector("h1:has-text('Cluster overview')")
                start = time.perf_counter()
                page.evaluate("location.hash = '#/tasks?state='")
                page.wait_for_function(
                    f"document.querySelectorAll('tbody tr[data-task-id]').length === {rows}"
                    " && document.querySelectorAll('li.queue-item').length > 0"
                )
                tasks.append(time.perf_counter() - start)

            overview: list[float] = []
            tasks: list[float] = []
            for _ in range(args.repeat):
                show_overview()
                show_tasks()
            print(f"overview       {summary(overview)}")
            print(f"tasks ({rows} rows) {summary(tasks)}")


def _all_reasoned(client: CommonsClient) -> int | None:
    """How many tasks wait, once the engine has said why each team's first waiting task waits."""
    queue = client.queue()
    teams = {q.team for q in queue}
    return len(queue) if queue and teams == {q.team for q in queue if q.reason_code} else None


if __name__ == "__main__":
    main()
