"""Building an attempt's `Launch`: its team's workspace and account, its checkpoint directory, its
log, its GPUs as this machine numbers them, and the environment of docs/design.md (contract 6)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpucommons.backends.ports import Executor, Launch, Workplace
from gpucommons.store.models import TaskRow


@dataclass(frozen=True, slots=True)
class TaskPaths:
    """Where a task's files live under $COMMONS_HOME."""

    home: Path

    def checkpoints(self, team: str, task_id: str) -> Path:
        return self.home / "checkpoints" / team / task_id

    def log(self, task_id: str) -> Path:
        return self.home / "logs" / f"{task_id}.log"


class LaunchBuilder:
    """Everything an attempt needs besides its row: where files go, the environment; the backend
    prepares the place (accounts, workspaces) and numbers the GPUs."""

    def __init__(self, paths: TaskPaths, executor: Executor, *, server_url: str = "") -> None:
        self.paths = paths
        self.executor = executor
        self.server_url = server_url

    def launch(self, row: TaskRow, token: str) -> Launch:
        """The attempt's launch: the team's workspace and account, its checkpoint dir, its env.
        Raises `LaunchError` (or OSError, ValueError) saying why it cannot start."""
        place = self.executor.workplace(row.team, row.id) or Workplace(
            self.paths.home, self.paths.checkpoints(row.team, row.id)
        )
        workdir, ckpt, run_as = place.workdir, place.checkpoint_dir, place.run_as
        log_path = self.paths.log(row.id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {
            "COMMONS_TASK_ID": row.id,
            "COMMONS_TEAM": row.team,
            "COMMONS_CHECKPOINT_DIR": str(ckpt),
            "COMMONS_RESTART_COUNT": str(row.restart_count),
            "COMMONS_TOKEN": token,
        }
        if self.server_url:
            env["COMMONS_URL"] = self.server_url
        attempt = row.attempt
        if attempt is None:
            raise ValueError(f"task {row.id} has no reserved attempt to launch")
        devices = tuple(attempt.gpu_indices)
        if attempt.pool and devices:
            devices = self.executor.device_indices(attempt.pool, devices)
        return Launch(
            task_id=row.id,
            team=row.team,
            command=tuple(row.command),
            env=env,
            workdir=workdir,
            log_path=log_path,
            gpu_indices=devices,
            run_as=run_as,
            pool=attempt.pool,
            placement=tuple((int(node), len(idx)) for node, idx in (attempt.placement or [])),
        )
