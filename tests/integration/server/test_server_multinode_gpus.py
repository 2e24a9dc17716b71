"""Pools of several nodes through the live server: every running task gets GPUs that exist, no GPU is
handed out twice, and every GPU of the pool can be used (the engine numbers GPUs across the pool;
the server must not number them again)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.integration.server.conftest import Harness

PY = sys.executable


def pool_policy(nodes: int, gpus_per_node: int) -> str:
    return f"""
cluster:
  name: multinode
  pools:
    - {{name: h100, gpu_type: H100, nodes: {nodes}, gpus_per_node: {gpus_per_node}}}
priority_classes:
  - {{name: production, value: 1000, preemptible: false}}
default_priority_class: production
teams:
  - {{name: nlp, quota: {{h100: {{gpus: {nodes * gpus_per_node}}}}}}}
"""


def reporter(out: Path) -> list[str]:
    """A task that writes the GPUs it was given, then waits to be cancelled."""
    script = (
        "import os, pathlib, time; "
        f"pathlib.Path({str(out)!r}, os.environ['COMMONS_TASK_ID']).write_text("
        "os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(120)"
    )
    return [PY, "-c", script]


@pytest.mark.parametrize(
    ("nodes", "sizes"),
    [
        (2, [8, 8]),  # one whole node each
        (4, [8, 8, 8, 8]),  # the README's example: four 8-GPU tasks on a 4 × 8 pool
        (4, [4, 2, 8, 1, 1, 8, 4, 4]),  # mixed sizes filling all 32 GPUs
        (2, [16]),  # a gang over both nodes
    ],
)
def test_every_gpu_of_a_multinode_pool_is_handed_out_once_and_exists(
    make_harness: Callable[..., Harness], tmp_path: Path, nodes: int, sizes: list[int]
) -> None:
    harness = make_harness(pool_policy(nodes, 8))
    out = tmp_path / "devices"
    out.mkdir()
    tasks = [harness.submit(team="nlp", gpus=n, command=reporter(out)) for n in sizes]
    ids = [str(t["id"]) for t in tasks]
    harness.run_until(
        lambda: (
            all((out / i).exists() for i in ids) or any(harness.task(i)["state"] == "failed" for i in ids)
        ),
        timeout=30,
        what="every task to report its GPUs",
    )
    states = {i: harness.task(i) for i in ids}
    assert all(t["state"] == "running" for t in states.values()), {
        i: (t["state"], t["message"]) for i, t in states.items()
    }
    seen: list[int] = []
    for task_id, size in zip(ids, sizes, strict=True):
        devices = [int(d) for d in (out / task_id).read_text().split(",")]
        assert len(devices) == size
        assert all(0 <= d < nodes * 8 for d in devices), devices
        seen += devices
    assert sorted(seen) == list(range(sum(sizes)))  # distinct, and all of the pool when it is full
    for task_id in ids:
        harness.http.post(f"/api/v1/tasks/{task_id}/cancel", headers=harness.admin)
    for task_id in ids:
        harness.wait_state(task_id, "cancelled", timeout=20)
