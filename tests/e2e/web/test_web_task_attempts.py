"""The task page of a task that was preempted and runs again, in a real browser on a real server.

Its own server and cluster (one pool of 4 GPUs, one team), so that preempting a task disturbs no
other test: a low-priority task holds the pool and reports a checkpoint with `commons checkpoint`
as the README has tasks do (the moment it starts, so while the server may still have it admitted), a
high-priority task of the same team takes its GPUs for a few seconds, and the first task starts
again. The page said "Exit code 143" beside "running" and "Last checkpoint –" after a checkpoint was
reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucommons.api import schemas
from gpucommons.testing.web import Server, running_server, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

POLICY = """
cluster:
  name: attempts
  pools:
    - {name: gpu, gpu_type: L4, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 1.00}
priority_classes:
  - {name: high, value: 1000, grace_period: 1s}
  - {name: low, value: 100, grace_period: 1s}
default_priority_class: low
teams:
  - name: alpha
    groups: [alpha]
    quota:
      gpu: {gpus: 4}
    preemption: {reclaim: any, within_team: lower_priority}
"""

#: A training script's shape: report a checkpoint as each attempt starts (`commons checkpoint`, found
#: on the task's PATH), and exit 143 (128 + 15) on the SIGTERM of a preemption.
RESUMER = [
    "sh",
    "-c",
    'trap "exit 143" TERM; '
    'commons checkpoint --path "$COMMONS_CHECKPOINT_DIR/step" --note "attempt $COMMONS_RESTART_COUNT" '
    "|| exit 9; while :; do sleep 0.2; done",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Overrides conftest's: this module's cluster, on a server of its own."""
    home = tmp_path_factory.mktemp("commons-attempts")
    policy = home / "attempts.yaml"
    policy.write_text(POLICY)
    with running_server(policy, home) as srv:
        yield srv


def task_when(server: Server, task_id: str, what: str, ok: Callable[[schemas.Task], bool]) -> schemas.Task:
    with server.client() as client:

        def reached() -> schemas.Task | None:
            task = client.task(task_id)
            return task if ok(task) else None

        return wait_for(what, reached, timeout=60)


def fact(page: Any, name: str) -> str:
    """The value of the task page's fact `name` (its <dt>)."""
    row = page.locator("dl.facts div").filter(has=page.locator(f"dt:text-is('{name}')"))
    return str(row.locator("dd").inner_text()).strip()


def test_a_task_running_again_names_its_previous_attempts_exit_and_shows_its_checkpoint(
    server: Server, open_page: Any, shots: Path
) -> None:
    with server.client() as client:
        task = client.submit(
            schemas.TaskSubmit(team="alpha", gpus=4, name="resumer", command=RESUMER, checkpoint="on-signal")
        )
        first = task_when(
            server, task.id, "the task's first checkpoint", lambda t: t.last_checkpoint_at is not None
        )
        urgent = client.submit(
            schemas.TaskSubmit(team="alpha", gpus=4, name="urgent", priority="high", command=["sleep", "3"])
        )
    assert first.last_checkpoint_at is not None
    again = task_when(
        server,
        task.id,
        "the task to run again and report its second checkpoint",
        lambda t: (
            t.state == "running"
            and t.restart_count >= 1
            and t.last_checkpoint_at is not None
            and t.last_checkpoint_at > first.last_checkpoint_at
        ),  # type: ignore[operator]
    )
    task_when(server, urgent.id, "the urgent task to end", lambda t: t.state == "succeeded")
    assert again.exit_code == 143  # how its first attempt ended, on the preemption's SIGTERM
    assert again.last_checkpoint_at is not None

    page = open_page(server.admin_token, path=f"#/tasks/{task.id}")
    page.wait_for_selector("h1:has-text('resumer')")
    page.wait_for_selector("h1 .badge.state-running")
    previous = fact(page, "Previous attempt")
    assert previous == f"ended with exit code 143 (attempt {again.restart_count} is running)"
    assert page.locator("dl.facts dt:text-is('Exit code')").count() == 0  # not beside "running"
    checkpoint = fact(page, "Last checkpoint")
    assert checkpoint.startswith(again.last_checkpoint_at.strftime("%Y-%m-%d %H:%M:%S UTC")), checkpoint
    assert checkpoint.endswith(" ago)")
    page.screenshot(path=str(shots / "task-attempts.png"), full_page=True)
