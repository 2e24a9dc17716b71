"""Record what Slurm prints, for the parsers' unit tests (tests/data/slurm/).

Starts the test cluster (gpucommons.testing.slurm_cluster: 4 nodes × 8 fake GPUs, accounting in the
machine's MariaDB), plays a scenario through `SlurmClient` — the very commands the backend runs — and
writes each listing to tests/data/slurm/. Run it as root after changing those commands:

    python scripts/record_slurm_outputs.py        # about a minute: it waits for a node to be declared down

Scenario: two GPU Commons attempts (one node, 4 GPUs; a gang on two nodes, 8 GPUs each), a plain
`sbatch` job under the account nlp that exits 7, a 4-node job that cannot start, a job run as `nobody`
that kills itself with SIGTERM; a node drained by hand; one attempt preempted (SIGTERM, then cancel);
the slurmd of a gang node killed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gpucommons.backends.slurm.client import SlurmClient
from gpucommons.backends.slurm.jobs import SACCT_FIELDS, squeue_format
from gpucommons.backends.slurm.submit import SlurmSubmission
from gpucommons.testing.slurm_cluster import ClusterShape, slurm_cluster, wait_until

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "slurm"
SHAPE = ClusterShape(features={"n1": ("h100", "ib"), "n2": ("h100",), "n3": ("a100",)})


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with slurm_cluster(shape=SHAPE, accounting=True) as cluster:
        client = SlurmClient(cluster.conf)
        # Plain sbatch jobs record the submitter's directory (WorkDir=): keep this checkout's path out.
        os.chdir(cluster.root)
        work = cluster.root / "jobs"
        work.mkdir(mode=0o777)
        work.chmod(0o777)
        client.sacctmgr("add", "account", "nlp", "Description=team nlp", "Organization=research")
        client.sacctmgr("add", "user", "root", "Account=nlp")
        client.sacctmgr("add", "user", "nobody", "Account=nlp")

        def attempt(task: str, nodes: tuple[str, ...], gpus: int) -> str:
            return client.submit(
                SlurmSubmission(
                    task_id=task, team="nlp", attempt=0, command=("sleep", "60"), nodes=nodes,
                    gpus_per_node=gpus, workdir=work, checkpoint_dir=work / task, output_dir=work,
                    account="nlp",
                )
            ).job_id  # fmt: skip

        single = attempt("t0000000001", ("n1",), 4)
        gang = attempt("t0000000002", ("n2", "n3"), 8)
        sbatch = ["sbatch", "--parsable", "--output=/dev/null"]
        client.run([*sbatch, "--account=nlp", "--gres=gpu:1", "--job-name=plain", "--wrap", "exit 7"])
        waits = client.run([*sbatch, "-N4", "--gres=gpu:8", "--job-name=waits", "--wrap", "true"]).strip()
        client.run(
            [*sbatch, "--uid=nobody", "--account=nlp", "--gres=gpu:2", "--job-name=asnobody",
             "--wrap", "kill -TERM $$"]
        )  # fmt: skip
        wait_until("both attempts to run", lambda: _running(client, single, gang), 30)
        client.run(["scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=disk failing soon"])
        _save("nodes_mixed_drain.txt", client.run(["scontrol", "show", "nodes", "--oneliner"]))
        _save("jobs_running_pending.txt", client.run(["scontrol", "show", "job", "--oneliner"]))
        _save("squeue.txt", client.run(["squeue", "--noheader", "--all", f"--Format={squeue_format()}"]))

        client.cancel(waits)
        client.signal(single, "SIGTERM", multi_node=False)
        time.sleep(1)
        client.cancel(single)
        time.sleep(2)
        _save("jobs_ended.txt", client.run(["scontrol", "show", "job", "--oneliner"]))

        cluster.kill_node("n3")
        wait_until("n3 to stop answering", lambda: "NOT_RESPONDING" in _state(client, "n3"), 90)
        _save("nodes_not_responding.txt", client.run(["scontrol", "show", "nodes", "--oneliner"]))
        wait_until("n3 to be down", lambda: _state(client, "n3").startswith("DOWN"), 90)
        _save("nodes_down.txt", client.run(["scontrol", "show", "nodes", "--oneliner"]))
        wait_until("the gang to end", lambda: "NODE_FAIL" in _job_state(client, gang), 60)
        _save("jobs_node_failure.txt", client.run(["scontrol", "show", "job", "--oneliner", gang]))
        ids = [j.job_id for j in client.jobs()]
        time.sleep(3)  # sacct rows lag the controller
        _save(
            "sacct.txt",
            client.run(["sacct", "--parsable2", "--allusers", f"--format={','.join(SACCT_FIELDS)}",
                        f"--jobs={','.join(ids)}"]),
        )  # fmt: skip
    print(f"recorded into {OUT}")
    return 0


def _running(client: SlurmClient, *ids: str) -> bool:
    return all(_job_state(client, i) == "RUNNING" for i in ids)


def _job_state(client: SlurmClient, job_id: str) -> str:
    job = client.job(job_id)
    return job.state if job else ""


def _state(client: SlurmClient, node: str) -> str:
    return next(n.state.text for n in client.nodes() if n.name == node)


def _save(name: str, text: str) -> None:
    (OUT / name).write_text(text)


if __name__ == "__main__":
    sys.exit(main())
