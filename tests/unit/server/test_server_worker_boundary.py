"""Nothing outside the workers reaches into the worker that runs tasks (issue 11, item 10; ADR 0013).

The API, the web UI, the metrics and the budget watcher read `worker.view` and hand commands to
`worker.desk`; the lock, the live state, the reasons and the internal steps belong to the worker.
Strict mypy already refuses these through `TaskWorker`; this also catches code typed `Any` or
reaching the concrete class.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpucommons.server

SERVER = Path(gpucommons.server.__file__).parent
#: The worker's own side: its state, lock and steps are theirs to touch.
WORKER_SIDE = {
    "attempts", "cluster", "cluster_commands", "cluster_inbox", "cluster_ledger", "cluster_reports",
    "cluster_steps", "commands", "foreign", "launching", "outputs", "port", "scheduler",
    "scheduler_actuator", "scheduler_instant", "scheduler_supervisor",
}  # fmt: skip
INTERNALS = {"lock", "state", "pending", "usage", "forget_pending", "mark_dirty", "publish_policy"}
WORKER_NAMES = {"scheduler", "worker"}


def _clients() -> list[Path]:
    return [
        path
        for path in sorted(SERVER.rglob("*.py"))
        if not (path.parent.name == "workers" and path.stem in WORKER_SIDE)
    ]


def _names_a_worker(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in WORKER_NAMES
    return isinstance(node, ast.Attribute) and node.attr in WORKER_NAMES


def reaches_in(source: str) -> list[str]:
    """`scheduler.lock`, `ctx.scheduler.state`, `worker.forget_pending(...)` and the like in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in INTERNALS and _names_a_worker(node.value):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_what_the_routers_used_to_do() -> None:
    before = (
        "def cancel(ctx):\n"
        "    with ctx.scheduler.lock:\n"
        "        ctx.scheduler.forget_pending('t')\n"
        "    return scheduler.state, worker.pending\n"
    )
    assert len(reaches_in(before)) == 4
    assert reaches_in("ctx.scheduler.view.usage; ctx.scheduler.desk.execute(c)") == []


def test_no_client_of_the_worker_reads_its_lock_state_or_internals() -> None:
    clients = _clients()
    assert any(p.name == "tasks.py" and p.parent.name == "routers" for p in clients)
    assert any(p.name == "budgets.py" for p in clients)
    offences = {
        str(path.relative_to(SERVER)): found
        for path in clients
        if (found := reaches_in(path.read_text(encoding="utf-8")))
    }
    assert offences == {}
