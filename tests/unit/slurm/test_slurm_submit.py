"""The sbatch command of a task attempt, and the commands that stop it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gpucommons.backends.slurm.submit import (
    RunAs,
    RunAsVia,
    SlurmSubmission,
    SubmitError,
    build_sbatch,
    cancel_command,
    job_name,
    parse_job_name,
    parse_sbatch_output,
    sbatch_environment,
    signal_command,
    task_environment,
)


def submission(**changes: object) -> SlurmSubmission:
    base: dict[str, object] = {
        "task_id": "t0a1b2c3d4e",
        "team": "nlp",
        "attempt": 2,
        "command": ("python3", "train.py", "--lr", "3e-4"),
        "nodes": ("n1",),
        "gpus_per_node": 4,
        "workdir": Path("/shared/nlp"),
        "checkpoint_dir": Path("/shared/nlp/.checkpoints/t0a1b2c3d4e"),
        "output_dir": Path("/shared/logs"),
        "account": "nlp",
    }
    base.update(changes)
    return SlurmSubmission(**base)  # type: ignore[arg-type]


def flags(argv: tuple[str, ...]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in argv if a.startswith("--"))


def test_a_single_node_task_is_one_job_on_exactly_its_node_with_its_gpus() -> None:
    command = build_sbatch(submission())
    f = flags(command.argv)
    assert command.argv[0] == "sbatch"
    assert (f["nodes"], f["nodelist"], f["gres"], f["account"]) == ("1", "n1", "gpu:4", "nlp")
    assert f["job-name"] == "gpucommons:t0a1b2c3d4e:2"
    assert f["output"] == "/shared/logs/t0a1b2c3d4e-2.out" and command.output_path == Path(f["output"])
    assert "no-requeue" in f and "parsable" in f
    # ALL of sbatch's own environment, which the client reduces to `sbatch_environment`.
    assert f["export"] == "ALL" and "open-mode" not in f
    assert f["chdir"] == "/shared/nlp"
    # The batch step is the task itself.
    assert command.script.splitlines()[-1] == "exec python3 train.py --lr 3e-4"


def test_a_gang_is_one_job_over_whole_nodes_and_srun_starts_one_task_per_node() -> None:
    command = build_sbatch(submission(nodes=("n3", "n1", "n2"), gpus_per_node=8, cpus_per_node=16))
    f = flags(command.argv)
    assert (f["nodes"], f["nodelist"], f["gres"], f["cpus-per-task"]) == ("3", "n[1-3]", "gpu:8", "16")
    last = shlex.split(command.script.splitlines()[-1])
    assert last[:2] == ["exec", "srun"]
    assert "--export=ALL" in last and "--nodes=3" in last and "--ntasks-per-node=1" in last
    assert "--gres=gpu:8" in last and "--kill-on-bad-exit=1" in last
    assert last[last.index("--") + 1 :] == ["python3", "train.py", "--lr", "3e-4"]


def test_the_environment_is_exported_by_the_script_quoted_and_never_cuda_visible_devices() -> None:
    s = submission(
        env={"CUDA_VISIBLE_DEVICES": "0,1", "WANDB_TAGS": "a,b c", "PYTHONUNBUFFERED": "0"},
        checkpoint_dir=Path("/shared/it's here"),
    )
    env = task_environment(s)
    assert env["COMMONS_TASK_ID"] == "t0a1b2c3d4e" and env["COMMONS_RESTART_COUNT"] == "2"
    assert env["COMMONS_TEAM"] == "nlp" and env["COMMONS_CHECKPOINT_DIR"] == "/shared/it's here"
    assert env["PYTHONUNBUFFERED"] == "0" and "CUDA_VISIBLE_DEVICES" not in env
    script = build_sbatch(s).script
    assert "export WANDB_TAGS='a,b c'" in script
    assert "export COMMONS_CHECKPOINT_DIR='/shared/it'\"'\"'s here'" in script


def test_an_own_path_replaces_the_exported_one() -> None:
    command = build_sbatch(submission(path="/opt/conda/bin:/usr/bin"))
    assert flags(command.argv)["export"] == "ALL"
    assert "export PATH=/opt/conda/bin:/usr/bin" in command.script


def test_sbatch_runs_with_only_what_a_task_may_inherit() -> None:
    server = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "SLURM_CONF": "/etc/slurm.conf"}
    server |= {"COMMONS_DATABASE_URL": "postgresql://u:secret@db/x", "COMMONS_TOKEN": "t"}
    assert sbatch_environment(server) == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "SLURM_CONF": "/etc/slurm.conf",
    }
    assert sbatch_environment(server, "/opt/bin")["PATH"] == "/opt/bin"


def test_an_output_file_of_the_task_is_appended_to() -> None:
    command = build_sbatch(submission(output=Path("/home/commons/logs/t0a1b2c3d4e.log")))
    f = flags(command.argv)
    assert f["output"] == "/home/commons/logs/t0a1b2c3d4e.log" and f["open-mode"] == "append"
    assert command.output_path == Path("/home/commons/logs/t0a1b2c3d4e.log")


def test_partition_qos_memory_and_time_limit_when_given() -> None:
    f = flags(
        build_sbatch(
            submission(
                partition="gpu",
                qos="gpucommons",
                memory_mb_per_node=64000,
                time_limit_s=3601,
                stop_signal="SIGUSR1",
                grace_period_s=90,
            )
        ).argv
    )
    assert (f["partition"], f["qos"], f["mem"], f["time"]) == ("gpu", "gpucommons", "64000M", "61")
    assert f["signal"] == "B:USR1@90"
    gang = flags(build_sbatch(submission(nodes=("n1", "n2"), time_limit_s=60)).argv)
    assert gang["signal"] == "TERM@30"


def test_the_team_user_by_uid_option_or_by_runuser() -> None:
    by_uid = build_sbatch(submission(run_as=RunAs("commons-nlp", "commons-nlp"))).argv
    assert "--uid=commons-nlp" in by_uid and "--gid=commons-nlp" in by_uid
    by_runuser = build_sbatch(submission(run_as=RunAs("commons-nlp", None, RunAsVia.RUNUSER))).argv
    assert by_runuser[:5] == ("runuser", "-u", "commons-nlp", "--", "sbatch")
    assert not any(a.startswith("--uid") for a in by_runuser)


def test_a_percent_sign_in_the_output_path_is_not_a_slurm_pattern() -> None:
    assert (
        flags(build_sbatch(submission(output_dir=Path("/logs/100%"))).argv)["output"]
        == "/logs/100%%/t0a1b2c3d4e-2.out"
    )


def test_no_gpu_means_no_gres() -> None:
    assert "gres" not in flags(build_sbatch(submission(gpus_per_node=0)).argv)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"command": ()}, "the command is empty"),
        ({"nodes": ()}, "no node was given"),
        ({"nodes": ("n1", "n1")}, "named twice"),
        ({"task_id": "t 1"}, "task id"),
        ({"env": {"BAD-NAME": "x"}}, "not a shell name"),
        ({"workdir": Path("/a\nb")}, "newline"),
        ({"time_limit_s": 0}, "time_limit_s"),
    ],
)
def test_a_submission_sbatch_cannot_take_is_refused_saying_why(
    changes: dict[str, object], words: str
) -> None:
    with pytest.raises(SubmitError, match=words):
        build_sbatch(submission(**changes))


def test_job_names_identify_our_attempts_and_nothing_else() -> None:
    assert parse_job_name(job_name("t0a1b2c3d4e", 3)) == ("t0a1b2c3d4e", 3)
    assert parse_job_name("train-big") is None
    assert parse_job_name("gpucommons:t1:x") is None


def test_stop_commands_signal_the_batch_step_of_one_node_and_only_the_tasks_of_a_gang() -> None:
    assert signal_command("42", "SIGTERM", multi_node=False) == ("scancel", "--signal=TERM", "--full", "42")
    # srun would turn a SIGTERM of its own into SIGKILL for every task: the gang's step only.
    assert signal_command("42", "SIGUSR1", multi_node=True) == ("scancel", "--signal=USR1", "42")
    assert cancel_command("42") == ("scancel", "42")
    with pytest.raises(SubmitError, match="not a Slurm job id"):
        cancel_command("--user=alice")


def test_sbatch_parsable_output_gives_the_job_id() -> None:
    assert parse_sbatch_output("123\n") == "123"
    assert parse_sbatch_output("124;cluster\n") == "124"
    with pytest.raises(SubmitError, match="not a job id"):
        parse_sbatch_output("sbatch: error: Batch job submission failed\n")
