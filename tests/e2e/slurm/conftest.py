"""`commons up --backend slurm` as a real subprocess against the real test Slurm (munge, slurmctld,
four slurmd × 8 fake GPUs), and the `commons` CLI against it.

The server and the CLI run this checkout's code (PYTHONPATH = its `src`), whatever the virtualenv
has installed. Skipped with the reason where the cluster cannot start (not root, Slurm missing).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.e2e.server.conftest import Platform

from gpucommons.testing.slurm_cluster import SlurmCluster

SRC = Path(__file__).resolve().parents[3] / "src"
SCRIPT = str(Path(__file__).parent.parent / "task_script.py")

#: Four nodes × 8 GPUs, two teams with half each, reclaim allowed.
TWO_TEAMS = """
cluster:
  name: slurm-e2e
  pools:
    - {name: gpu, gpu_type: H100, nodes: 4, gpus_per_node: 8, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 10s, min_runtime: 0s}
default_priority_class: normal
teams:
  - name: a
    quota:
      gpu: {gpus: 16}
    preemption: {reclaim: any, within_team: lower_priority}
  - name: b
    quota:
      gpu: {gpus: 16}
    preemption: {reclaim: any, within_team: lower_priority}
"""


class SlurmPlatform(Platform):
    """A `commons up --backend slurm` on `cluster`, with this checkout's code."""

    def __init__(self, home: Path, policy: Path, cluster: SlurmCluster) -> None:
        super().__init__(home, policy)
        self.cluster = cluster
        self.extra_args = ["--backend", "slurm", "--slurm-conf", str(cluster.conf)]
        path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
        self.extra_env = {"PYTHONPATH": path, "SLURM_CONF": str(cluster.conf)}

    def states(self) -> dict[str, str]:
        """Every task's state from the API (one HTTP call: the waits poll it several times a second,
        and a CLI process per poll would cost a second each on a busy machine); the CLI is exercised
        by submit, queue, logs and usage export."""
        tasks = self.api("/api/v1/tasks?limit=10000")
        assert isinstance(tasks, list)
        return {str(t["id"]): str(t["state"]) for t in tasks}

    def post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        response = httpx.post(
            self.url + path, json=body, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )
        response.raise_for_status()
        return dict(response.json())

    def submit_api(self, team: str, gpus: int, *command: str, checkpoint: str | None = None) -> str:
        """What `commons submit` sends, without a CLI process (a second or more on a busy machine):
        for the tasks a test needs in numbers; each test submits some through the CLI too."""
        body: dict[str, object] = {"team": team, "gpus": gpus, "command": list(command)}
        if checkpoint:
            body["checkpoint"] = checkpoint
        return str(self.post("/api/v1/tasks", body)["id"])

    def queue_text(self) -> str:
        """The pending tasks' reasons as the API gives them (what `commons queue` prints)."""
        return str(self.api("/api/v1/queue"))

    def journal(self, path: Path) -> list[dict[str, object]]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def task_script(self, journal: Path, steps: int, *timing: float) -> list[str]:
        return [sys.executable, SCRIPT, str(journal), str(steps), *(str(t) for t in timing)]


@pytest.fixture
def slurm_platform(slurm: SlurmCluster, tmp_path: Path) -> Iterator[Callable[..., SlurmPlatform]]:
    """`make(policy)`: a started server on the session's cluster (its queue emptied afterwards)."""
    made: list[SlurmPlatform] = []
    # Jobs run as root here (logical isolation) but must reach the journal and the home.
    tmp_path.chmod(0o755)

    def make(policy: str = TWO_TEAMS, cluster: SlurmCluster | None = None) -> SlurmPlatform:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
        platform = SlurmPlatform(tmp_path / "home", policy_file, cluster or slurm)
        made.append(platform)
        platform.start()
        return platform

    yield make
    for p in made:
        p.stop()
