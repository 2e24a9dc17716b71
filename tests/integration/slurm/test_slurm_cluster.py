"""The test cluster itself is a real Slurm: jobs land on the nodes asked for, GPUs are handed out per
node, signals reach the batch script, accounting records plain sbatch jobs, and stop leaves nothing."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from gpucommons.testing.slurm_cluster import (
    MARKER_VARIABLE,
    ClusterShape,
    SlurmCluster,
    slurm_cluster,
    wait_until,
)


def outputs(slurm: SlurmCluster, name: str) -> Path:
    folder = slurm.root / "test-output" / name
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)
    return folder


def sbatch(slurm: SlurmCluster, *args: str) -> str:
    return slurm.run("sbatch", "--parsable", *args).stdout.strip()


def job_field(slurm: SlurmCluster, job_id: str, key: str) -> str:
    text = slurm.run("scontrol", "show", "job", "--oneliner", job_id).stdout
    return next(w.split("=", 1)[1] for w in text.split() if w.startswith(key + "="))


def wait_ended(slurm: SlurmCluster, *job_ids: str, timeout: float = 30) -> None:
    wait_until("the jobs to end", lambda: not set(job_ids) & set(slurm.job_ids()), timeout)


def test_a_job_lands_on_each_node_asked_for(slurm: SlurmCluster) -> None:
    out = outputs(slurm, "per-node")
    ids = [
        sbatch(slurm, f"--nodelist={node}", "--gres=gpu:1", f"--output={out}/{node}.out",
               "--wrap", "echo $SLURMD_NODENAME")
        for node in slurm.node_names
    ]  # fmt: skip
    wait_ended(slurm, *ids)
    assert {node: (out / f"{node}.out").read_text().strip() for node in slurm.node_names} == {
        node: node for node in slurm.node_names
    }


def test_gres_gpu_4_sets_cuda_visible_devices(slurm: SlurmCluster) -> None:
    out = outputs(slurm, "gres")
    job = sbatch(slurm, "--gres=gpu:4", f"--output={out}/job.out", "--wrap", "echo $CUDA_VISIBLE_DEVICES")
    wait_ended(slurm, job)
    assert (out / "job.out").read_text().strip() == "0,1,2,3"


def test_a_two_node_job_sees_its_gpus_on_each_node(slurm: SlurmCluster) -> None:
    out = outputs(slurm, "two-nodes")
    job = sbatch(
        slurm, "--nodes=2", "--nodelist=n2,n3", "--gres=gpu:3", f"--output={out}/job.out",
        "--wrap", "srun --ntasks-per-node=1 sh -c 'echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'",
    )  # fmt: skip
    wait_ended(slurm, job)
    assert sorted((out / "job.out").read_text().split("\n")[:2]) == ["n2 0,1,2", "n3 0,1,2"]


def test_scancel_signal_term_full_reaches_the_batch_script(slurm: SlurmCluster) -> None:
    out = outputs(slurm, "signal")
    script = "#!/bin/sh\ntrap 'echo got TERM; exit 0' TERM\necho started\nwhile true; do sleep 0.2; done\n"
    job = slurm.run(
        "sbatch", "--parsable", "--gres=gpu:1", f"--output={out}/job.out", input=script
    ).stdout.strip()
    wait_until("the script to start", lambda: "started" in _read(out / "job.out"), 30)
    slurm.run("scancel", "--signal=TERM", "--full", job)
    wait_ended(slurm, job)
    lines = _read(out / "job.out").splitlines()
    # slurmstepd adds its own "*** JOB n CANCELLED ***" line between the two.
    assert lines[0] == "started" and lines[-1] == "got TERM"
    assert job_field(slurm, job, "ExitCode") == "0:0"


def test_a_plain_sbatch_job_under_an_account_shows_in_squeue_and_sacct(
    slurm_accounting: SlurmCluster,
) -> None:
    slurm = slurm_accounting
    slurm.run("sacctmgr", "-i", "add", "account", "vision", "Description=test")
    slurm.run("sacctmgr", "-i", "add", "user", "root", "Account=vision")
    job = sbatch(slurm, "--account=vision", "--gres=gpu:2", "--output=/dev/null", "--wrap", "sleep 2")
    squeue = slurm.run("squeue", "--noheader", "--format=%i %a", f"--jobs={job}").stdout.split()
    assert squeue == [job, "vision"]
    wait_ended(slurm, job)

    def recorded() -> str:
        return slurm.run("sacct", "--parsable2", "--noheader", "--allocations", f"--jobs={job}",
                         "--format=JobID,Account,State,ExitCode,AllocTRES").stdout.strip()  # fmt: skip

    wait_until("sacct to record the job", lambda: "COMPLETED" in recorded(), 20)
    job_id, account, state, exit_code, tres = recorded().split("|")
    assert (job_id, account, state, exit_code) == (job, "vision", "COMPLETED", "0:0")
    assert "gres/gpu=2" in tres.split(",")


def test_stop_cancels_jobs_and_leaves_no_process_of_the_cluster() -> None:
    shape = ClusterShape(nodes=2, gpus_per_node=2)
    with slurm_cluster(shape=shape) as cluster:
        root = cluster.root
        pids = [p.pid for p in cluster.processes.values()]
        cluster.run("sbatch", "--gres=gpu:1", "--output=/dev/null", "--wrap", "sleep 300")
        wait_until(
            "the job to run", lambda: cluster.run("squeue", "-h", "-o", "%T").stdout.strip() == "RUNNING", 30
        )
        started = time.monotonic()
    assert time.monotonic() - started < 15
    assert not root.exists()
    for pid in pids:
        assert not _alive(pid)
    assert not _processes_carrying(f"{MARKER_VARIABLE}={root}")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _processes_carrying(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


assert signal.SIGTERM  # the module's subject
