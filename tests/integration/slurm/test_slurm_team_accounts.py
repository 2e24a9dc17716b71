"""Team Unix accounts on a real Slurm: `SlurmExecutor` with `COMMONS_ISOLATION=accounts`.

Each team's attempt is an `sbatch --uid commons-<team>` job in the team's workspace: it runs as that
account, cannot read another team's workspace, writes its output and end mark where the account may
write, and the output reaches the task's log (in the server's private `logs/`) when it ends.

Runs only as root with useradd (CI does); accounts get a unique prefix per run and are deleted.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest

from gpucommons.backends.local.accounts import TeamAccounts
from gpucommons.backends.ports import ExitStatus, Handle, Launch
from gpucommons.backends.slurm.client import SlurmClient
from gpucommons.backends.slurm.executor import SlurmExecutor
from gpucommons.backends.slurm.jobs import JobPhase
from gpucommons.policy.loader import parse_policy
from gpucommons.testing.accounts import scratch_team_accounts
from gpucommons.testing.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="team accounts need root and useradd"
)

POLICY = """
cluster:
  name: slurm-accounts
  pools:
    - {name: gpu, gpu_type: H100, nodes: 4, gpus_per_node: 8, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100}
default_priority_class: normal
teams:
  - {name: alpha, quota: {gpu: {gpus: 16}}}
  - {name: beta, quota: {gpu: {gpus: 16}}}
"""


@pytest.fixture
def accounts() -> Iterator[TeamAccounts]:
    with scratch_team_accounts(("alpha", "beta"), tag="cs") as teams:
        (teams.home / "logs").mkdir(mode=0o700)
        yield teams


@pytest.fixture
def executor(slurm: SlurmCluster, accounts: TeamAccounts) -> Iterator[SlurmExecutor]:
    # A forged end mark is caught after 1 s here (10 s by default).
    client = SlurmClient(slurm.conf, timeout_s=20)
    made = SlurmExecutor(client, accounts=accounts, log_dir=accounts.home / "logs", mark_verify_s=1.0)
    made.use_policy(parse_policy(POLICY))
    made.on_exit(lambda: None)
    yield made
    made.close()


def start(
    executor: SlurmExecutor, accounts: TeamAccounts, team: str, task_id: str, script: str, node: int
) -> Handle:
    place = executor.workplace(team, task_id)
    assert place is not None and place.run_as == accounts.account(team)
    return executor.start(
        Launch(
            task_id=task_id,
            team=team,
            command=("/bin/sh", "-c", script),
            env={"COMMONS_CHECKPOINT_DIR": str(place.checkpoint_dir), "COMMONS_RESTART_COUNT": "0"},
            workdir=place.workdir,
            log_path=accounts.home / "logs" / f"{task_id}.log",
            run_as=place.run_as,
            pool="gpu",
            placement=((node, 1),),
        )
    )


def ended(executor: SlurmExecutor, handle: Handle, timeout: float = 60) -> ExitStatus:
    deadline = time.monotonic() + timeout
    while (status := executor.poll(handle)) is None:
        assert time.monotonic() < deadline, f"job {handle.pid} did not end"
        time.sleep(0.05)
    return status


def test_each_teams_job_runs_as_its_account_in_its_workspace_and_its_log_arrives_when_it_ends(
    executor: SlurmExecutor, accounts: TeamAccounts
) -> None:
    secret = accounts.workspace("beta") / "secret.txt"
    accounts.ensure_team("beta")
    secret.write_text("beta's data\n")
    os.chown(secret, *_ids(accounts.account("beta")))
    secret.chmod(0o600)
    script = (
        'echo "user=$(id -un) home=$HOME pwd=$(pwd)"; '
        f"cat {secret} 2>/dev/null && echo read-beta || echo cannot-read-beta; "
        'echo saved > "$COMMONS_CHECKPOINT_DIR/state"; exit 3'
    )
    handle = start(executor, accounts, "alpha", "talpha00001", script, node=1)
    status = ended(executor, handle)
    assert (status.code, status.signal, status.lost) == (3, None, None)

    log = (accounts.home / "logs" / "talpha00001.log").read_text()
    alpha = accounts.account("alpha")
    assert f"user={alpha}" in log and f"pwd={accounts.workspace('alpha')}" in log, log
    assert "cannot-read-beta" in log and "beta's data" not in log, log
    assert (accounts.checkpoint_dir("alpha", "talpha00001") / "state").read_text() == "saved\n"
    # The output and the end mark were the team's files in its workspace, and both are gone now.
    output = accounts.workspace("alpha") / ".commons" / "output"
    assert list(output.iterdir()) == []
    executor.release(handle)


def test_a_teams_job_ends_by_its_mark_and_a_forged_mark_of_a_running_job_gets_it_cancelled(
    executor: SlurmExecutor, accounts: TeamAccounts
) -> None:
    handle = start(executor, accounts, "beta", "tbeta000001", "sleep 60", node=2)
    output = accounts.workspace("beta") / ".commons" / "output"
    wait = time.monotonic() + 30
    while not any(True for _ in _running(executor, handle)):
        assert time.monotonic() < wait, "the job did not start"
        time.sleep(0.1)
    # The team (its account owns the folder) writes a mark for a job that still runs.
    forged = output / f"slurm-{handle.pid}.end"
    forged.write_text("0\n")
    os.chown(forged, *_ids(accounts.account("beta")))
    assert ended(executor, handle).code == 0  # taken at its word: the attempt is settled
    executor.release(handle)
    client = executor.client
    deadline = time.monotonic() + 30
    while (job := client.job(str(handle.pid))) is not None and job.phase is not JobPhase.ENDED:
        assert time.monotonic() < deadline, "the job with a forged mark was not cancelled"
        time.sleep(0.2)
    assert job is None or job.state.startswith("CANCELLED"), job


def _running(executor: SlurmExecutor, handle: Handle) -> list[str]:
    job = executor.client.job(str(handle.pid))
    return [job.state] if job is not None and job.state == "RUNNING" else []


def _ids(account: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(account)
    return entry.pw_uid, entry.pw_gid
