"""Building an attempt's `Launch`: its team's workspace and account, its checkpoint directory, its
log, its GPUs as this machine numbers them, and the environment of docs/design.md (contract 6)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpucommons.backends.local.accounts import TeamAccounts
from gpucommons.backends.local.inventory import Inventory
from gpucommons.backends.ports import Launch
from gpucommons.domain.model import Policy
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
    """Everything an attempt needs besides its row: where files go, accounts, GPU numbering."""

    def __init__(
        self,
        paths: TaskPaths,
        *,
        server_url: str = "",
        accounts: TeamAccounts | None = None,
        inventory: Callable[[Policy], Inventory] | None = None,
    ) -> None:
        self.paths = paths
        self.server_url = server_url
        #: Team accounts and workspaces (None: no files are prepared, e.g. the timer executor).
        self.accounts = accounts
        #: Maps the engine's pool-wide GPU numbers to this machine's CUDA indices (None: identity);
        #: found again whenever the policy changes (its pools may have).
        self._discover = inventory
        self.inventory: Inventory | None = None

    def use_policy(self, policy: Policy) -> None:
        if self._discover is not None:
            self.inventory = self._discover(policy)

    def launch(self, row: TaskRow, token: str) -> Launch:
        """The attempt's launch: the team's workspace and account, its checkpoint dir, its env."""
        if self.accounts is not None:
            place = self.accounts.prepare_task(row.team, row.id)
            workdir, ckpt, run_as = place.workdir, place.checkpoint_dir, place.run_as
        else:
            workdir, ckpt, run_as = self.paths.home, self.paths.checkpoints(row.team, row.id), None
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
        devices = tuple(row.gpu_indices)
        if self.inventory is not None and row.assigned_pool and devices:
            devices = self.inventory.device_indices(row.assigned_pool, devices)
        return Launch(
            task_id=row.id,
            team=row.team,
            command=tuple(row.command),
            env=env,
            workdir=workdir,
            log_path=log_path,
            gpu_indices=devices,
            run_as=run_as,
        )
