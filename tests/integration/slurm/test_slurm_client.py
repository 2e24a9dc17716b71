"""SlurmClient against the real test cluster: inventory, an attempt submitted as the builder writes it
(one node; a gang over two whole nodes), its environment, the stop protocol (signal, grace, cancel),
exit codes, the team's Unix user, and the errors a broken set-up gives."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from gpucommons.backends.slurm.client import SlurmClient, SlurmError
from gpucommons.backends.slurm.inventory import build_inventory
from gpucommons.backends.slurm.jobs import JobPhase, SlurmExit, SlurmJob
from gpucommons.backends.slurm.submit import RunAs, SlurmSubmission, parse_job_name
from gpucommons.domain.model import Pool
from gpucommons.testing.slurm_cluster import SlurmCluster, wait_until

#: A task that checkpoints on SIGTERM: writes what it saw, then exits 0 (as examples/tasks/train.py does).
CHECKPOINTING = """
import os, signal, sys, time
node = os.environ.get("SLURMD_NODENAME", "?")
def stop(signum, frame):
    with open(os.path.join(os.environ["COMMONS_CHECKPOINT_DIR"], node), "w") as f:
        f.write("saved")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("running", node, os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
time.sleep(120)
"""
REPORT = (
    "import os; print(os.environ['SLURMD_NODENAME'], *(f'{k}={os.environ.get(k, \"-\")}' for k in "
    "('CUDA_VISIBLE_DEVICES', 'COMMONS_TASK_ID', 'COMMONS_TEAM', 'COMMONS_RESTART_COUNT', "
    "'COMMONS_CHECKPOINT_DIR', 'USER', 'SECRET_OF_THE_SERVER')))"
)


@pytest.fixture
def client(slurm: SlurmCluster) -> SlurmClient:
    return SlurmClient(slurm.conf, timeout_s=20)


@pytest.fixture
def shared(slurm: SlurmCluster, request: pytest.FixtureRequest) -> Path:
    """A folder every node and every user can write: the cluster's "shared file system"."""
    folder = slurm.root / "shared" / request.node.name
    (folder / "checkpoints").mkdir(parents=True)
    for path in (folder, folder / "checkpoints"):
        path.chmod(0o777)
    return folder


def attempt(
    shared: Path, command: tuple[str, ...], nodes: tuple[str, ...], gpus: int, **more: object
) -> SlurmSubmission:
    fields: dict[str, object] = {
        "task_id": "t" + "0" * 9 + str(len(nodes)),
        "team": "nlp",
        "attempt": 1,
        "command": command,
        "nodes": nodes,
        "gpus_per_node": gpus,
        "workdir": shared,
        "checkpoint_dir": shared / "checkpoints",
        "output_dir": shared,
        # The batch shell leaves an end mark, as the executor's submissions do.
        "end_mark_dir": shared,
    }
    fields.update(more)
    return SlurmSubmission(**fields)  # type: ignore[arg-type]


def ended(client: SlurmClient, job_id: str, timeout: float = 30) -> SlurmJob:
    def done() -> bool:
        job = client.job(job_id)
        return job is not None and job.phase is JobPhase.ENDED

    wait_until(f"job {job_id} to end", done, timeout)
    job = client.job(job_id)
    assert job is not None
    return job


def test_the_inventory_has_four_nodes_of_eight_gpus_and_the_gpus_in_use(
    client: SlurmClient, slurm: SlurmCluster
) -> None:
    nodes = client.nodes()
    assert [(n.name, n.gpus, n.state.schedulable) for n in nodes] == [(f"n{i}", 8, True) for i in range(1, 5)]
    pool = Pool("h100", "H100", nodes=4, gpus_per_node=8)
    assert build_inventory(nodes, [pool]).gpus("h100") == 32
    # This cluster has no slurmdbd, so GPUs are no TRES: what is in use comes from sinfo.
    slurm.run("sbatch", "--nodelist=n2", "--gres=gpu:3", "--output=/dev/null", "--wrap", "sleep 30")
    wait_until("the job to hold its GPUs", lambda: _gpus_free(client, "n2") == 5, 30)


def _gpus_free(client: SlurmClient, node: str) -> int:
    return next(n.gpus_free for n in client.nodes() if n.name == node)


def test_an_attempt_runs_on_its_node_with_its_gpus_and_our_environment_only(
    slurm: SlurmCluster, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_OF_THE_SERVER", "must not leak")
    client = SlurmClient(slurm.conf, timeout_s=20)  # the submitter's environment holds the secret
    submitted = client.submit(attempt(shared, (sys.executable, "-c", REPORT), ("n3",), 2))
    assert parse_job_name(submitted.job_name) == ("t0000000001", 1)
    job = ended(client, submitted.job_id)
    assert (job.nodes, job.exit, job.name) == (("n3",), SlurmExit(0, 0), submitted.job_name)
    assert submitted.output_path.read_text().split() == [
        "n3", "CUDA_VISIBLE_DEVICES=0,1", "COMMONS_TASK_ID=t0000000001", "COMMONS_TEAM=nlp",
        "COMMONS_RESTART_COUNT=1", f"COMMONS_CHECKPOINT_DIR={shared / 'checkpoints'}", "USER=root",
        "SECRET_OF_THE_SERVER=-",
    ]  # fmt: skip


def test_a_gang_over_two_whole_nodes_gives_each_node_its_own_gpus(client: SlurmClient, shared: Path) -> None:
    submitted = client.submit(attempt(shared, (sys.executable, "-c", REPORT), ("n1", "n4"), 8))
    job = ended(client, submitted.job_id)
    assert job.exit == SlurmExit(0, 0) and job.nodes == ("n1", "n4")
    lines = sorted(submitted.output_path.read_text().splitlines())
    assert [line.split()[:3] for line in lines] == [
        ["n1", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "COMMONS_TASK_ID=t0000000002"],
        ["n4", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "COMMONS_TASK_ID=t0000000002"],
    ]


@pytest.mark.parametrize("nodes", [("n2",), ("n2", "n3")], ids=["one-node", "gang"])
def test_the_stop_signal_reaches_every_task_which_checkpoints_and_exits_cleanly(
    client: SlurmClient, shared: Path, nodes: tuple[str, ...]
) -> None:
    submitted = client.submit(attempt(shared, (sys.executable, "-c", CHECKPOINTING), nodes, 4))
    wait_until("every task to run", lambda: _count(submitted.output_path, "running") == len(nodes), 30)
    assert client.signal(submitted.job_id, "SIGTERM", multi_node=len(nodes) > 1)
    job = ended(client, submitted.job_id)
    # srun never saw the signal (it would have SIGKILLed the tasks): every node saved and exited 0.
    assert sorted(p.name for p in (shared / "checkpoints").iterdir()) == list(nodes)
    assert (job.state, job.exit) == ("COMPLETED", SlurmExit(0, 0))
    assert not client.signal(submitted.job_id, "SIGTERM", multi_node=len(nodes) > 1)


def test_a_task_that_ignores_the_signal_is_cancelled_after_its_grace(
    client: SlurmClient, shared: Path
) -> None:
    stubborn = (sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('running', flush=True); time.sleep(120)")  # fmt: skip
    submitted = client.submit(attempt(shared, stubborn, ("n1",), 1))
    wait_until("the task to run", lambda: _count(submitted.output_path, "running") == 1, 30)
    client.signal(submitted.job_id, "SIGTERM", multi_node=False)
    time.sleep(1)
    job = client.job(submitted.job_id)
    assert job is not None and job.phase is JobPhase.RUNNING
    assert client.cancel(submitted.job_id)
    assert ended(client, submitted.job_id).state == "CANCELLED"


def test_a_failing_task_reports_its_exit_code(client: SlurmClient, shared: Path) -> None:
    submitted = client.submit(attempt(shared, ("sh", "-c", "exit 3"), ("n2",), 1))
    job = ended(client, submitted.job_id)
    assert (job.state, job.exit) == ("FAILED", SlurmExit(3, 0))


def test_an_attempt_runs_as_the_teams_unix_user(client: SlurmClient, shared: Path) -> None:
    submitted = client.submit(
        attempt(shared, ("sh", "-c", "id -un; echo $HOME"), ("n4",), 1, run_as=RunAs("nobody", "nogroup"))
    )
    job = ended(client, submitted.job_id)
    assert job.user == "nobody" and job.exit == SlurmExit(0, 0)
    assert submitted.output_path.read_text().split() == ["nobody", "/nonexistent"]


def test_the_queue_lists_pending_and_running_jobs_of_everyone(
    client: SlurmClient, slurm: SlurmCluster
) -> None:
    slurm.run(
        "sbatch", "--gres=gpu:8", "--nodes=4", "--job-name=big", "--output=/dev/null", "--wrap", "sleep 30"
    )
    slurm.run(
        "sbatch", "--gres=gpu:8", "--nodes=4", "--job-name=next", "--output=/dev/null", "--wrap", "true"
    )
    wait_until("the first to run", lambda: any(j.phase is JobPhase.RUNNING for j in client.queue()), 30)
    queue = {j.name: j for j in client.queue(partition="gpu")}
    assert (queue["big"].phase, queue["big"].gpus, len(queue["big"].nodes)) == (JobPhase.RUNNING, 32, 4)
    assert (queue["next"].phase, queue["next"].gpus, queue["next"].nodes) == (JobPhase.PENDING, 32, ())


def test_a_missing_configuration_or_command_is_one_clear_error(tmp_path: Path) -> None:
    missing = SlurmClient(tmp_path / "no-such.conf", timeout_s=5)
    with pytest.raises(
        SlurmError, match=f"the Slurm configuration {tmp_path / 'no-such.conf'} does not exist"
    ):
        missing.nodes()
    with pytest.raises(SlurmError, match="no-such-command is not installed on this machine"):
        SlurmClient().run(["no-such-command"])


def test_a_controller_that_does_not_answer_times_out_with_a_hint(slurm: SlurmCluster, tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    lines = slurm.conf.read_text().splitlines()
    conf.write_text(
        "\n".join("SlurmctldPort=9" if line.startswith("SlurmctldPort=") else line for line in lines)
    )
    with pytest.raises(
        SlurmError,
        match=f"did not answer within 1 s: is slurmctld running and reachable with SLURM_CONF={conf}",
    ):
        SlurmClient(conf, timeout_s=1).queue()


def test_a_job_slurmctld_does_not_know_is_none(client: SlurmClient) -> None:
    assert client.job("999999") is None


def test_the_end_mark_holds_the_tasks_exit_status_and_slurm_records_the_same(
    client: SlurmClient, shared: Path
) -> None:
    failing = client.submit(attempt(shared, ("sh", "-c", "exit 3"), ("n2",), 1))
    killed = client.submit(attempt(shared, ("sh", "-c", "kill -TERM $$"), ("n3",), 1))
    running = client.submit(attempt(shared, ("sleep", "60"), ("n4",), 1))
    marks = {job.job_id: shared / f"slurm-{job.job_id}.end" for job in (failing, killed, running)}
    for job in (failing, killed):
        wait_until(f"job {job.job_id}'s end mark", marks[job.job_id].exists, 30)
    assert marks[failing.job_id].read_text() == "3\n" and marks[killed.job_id].read_text() == "143\n"
    # The task's signal is the job's, as when the command was the batch step itself.
    assert ended(client, failing.job_id).exit == SlurmExit(3, 0)
    assert ended(client, killed.job_id).exit == SlurmExit(0, 15)
    assert not marks[running.job_id].exists()
    client.cancel(running.job_id)


def _count(path: Path, word: str) -> int:
    return path.read_text().split().count(word) if path.exists() else 0
