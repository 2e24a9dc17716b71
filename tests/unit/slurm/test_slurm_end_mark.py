"""The batch script's end mark, run by a real `sh` as slurmstepd would run it (without Slurm).

What must hold: the mark appears only once the command has returned; the task's exit status reaches
Slurm unchanged (a code as the code, a signal as the signal); a stop signal sent to the whole batch
step (`scancel --full`) reaches the task, which may checkpoint, and does not kill the shell before the
mark is left; and with Slurm's own time limit the command is still exec'd (its warning reaches the
batch shell only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpucommons.backends.ports import ExitStatus
from gpucommons.backends.slurm.end_marks import EndMarks, status_of_mark
from gpucommons.backends.slurm.jobs import SlurmExit, SlurmJob
from gpucommons.backends.slurm.submit import SlurmSubmission, build_sbatch, end_mark_path

JOB_ID = "4242"


def submission(tmp_path: Path, command: tuple[str, ...], **changes: object) -> SlurmSubmission:
    base: dict[str, object] = {
        "task_id": "t0a1b2c3d4e",
        "team": "nlp",
        "attempt": 0,
        "command": command,
        "nodes": ("n1",),
        "gpus_per_node": 1,
        "workdir": tmp_path,
        "checkpoint_dir": tmp_path / "ckpt",
        "output_dir": tmp_path / "out",
        "end_mark_dir": tmp_path / "marks",
    }
    base.update(changes)
    return SlurmSubmission(**base)  # type: ignore[arg-type]


def start(tmp_path: Path, command: tuple[str, ...]) -> tuple[subprocess.Popen[bytes], Path]:
    """The batch script in its own process group (slurmstepd's batch step), and where its mark goes."""
    (tmp_path / "marks").mkdir(exist_ok=True)
    script = tmp_path / "batch.sh"
    script.write_text(build_sbatch(submission(tmp_path, command)).script)
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": JOB_ID}
    process = subprocess.Popen(["sh", str(script)], env=env, cwd=tmp_path, start_new_session=True)
    return process, end_mark_path(tmp_path / "marks", JOB_ID)


def wait_for(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.01)


def test_the_mark_appears_when_the_command_returns_and_its_exit_code_is_the_scripts(tmp_path: Path) -> None:
    process, mark = start(tmp_path, ("sh", "-c", f"test ! -e {tmp_path}/marks/slurm-{JOB_ID}.end && exit 3"))
    assert process.wait(10) == 3
    assert mark.read_text() == "3\n" and not mark.with_name(mark.name + ".tmp").exists()


def test_a_command_that_succeeds_leaves_the_mark_and_exit_0(tmp_path: Path) -> None:
    process, mark = start(tmp_path, ("true",))
    assert process.wait(10) == 0
    assert mark.read_text() == "0\n"


def test_a_task_killed_by_a_signal_ends_the_batch_shell_with_that_signal(tmp_path: Path) -> None:
    process, mark = start(tmp_path, ("sh", "-c", "kill -KILL $$"))
    # Slurm records the batch shell's end: 0:9, as when the command was the batch step itself.
    assert process.wait(10) == -signal.SIGKILL
    assert mark.read_text() == "137\n"
    assert status_of_mark(mark.read_text(), 5.0) == ExitStatus(code=None, signal=9, ended_at=5.0)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT])
def test_a_stop_signal_to_the_whole_batch_step_reaches_the_task_and_the_mark_is_still_left(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """`scancel --signal=X --full`: every process of the batch step gets X; the task checkpoints and
    exits 0, the shell outlives X, leaves the mark and ends with the task's status."""
    ready, saved = tmp_path / "ready", tmp_path / "saved"
    on_stop = f"trap 'echo saved > {saved}; exit 0' {stop.name.removeprefix('SIG')}"
    task = f"{on_stop}; touch {ready}; while :; do sleep 0.05; done"
    process, mark = start(tmp_path, ("sh", "-c", task))
    wait_for(ready)
    assert not mark.exists()
    os.killpg(process.pid, stop)
    assert process.wait(10) == 0
    assert saved.read_text() == "saved\n" and mark.read_text() == "0\n"


def test_a_task_that_dies_of_the_stop_signal_ends_the_batch_shell_with_it(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    process, mark = start(tmp_path, ("sh", "-c", f"touch {ready}; exec sleep 30"))
    wait_for(ready)
    time.sleep(0.1)  # the exec
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(10) == -signal.SIGTERM
    assert mark.exists()


def test_with_slurms_own_time_limit_the_command_is_the_batch_step(tmp_path: Path) -> None:
    script = build_sbatch(submission(tmp_path, ("python3", "train.py"), time_limit_s=600)).script
    assert script.splitlines()[-1] == "exec python3 train.py"
    assert "slurm-" not in script


def test_without_an_end_mark_folder_the_command_is_the_batch_step(tmp_path: Path) -> None:
    script = build_sbatch(submission(tmp_path, ("python3", "train.py"), end_mark_dir=None)).script
    assert script.splitlines()[-1] == "exec python3 train.py"


def test_a_gang_runs_srun_in_the_foreground_and_leaves_the_mark_after_it(tmp_path: Path) -> None:
    script = build_sbatch(submission(tmp_path, ("python3", "train.py"), nodes=("n1", "n2"))).script
    lines = script.splitlines()
    run = next(i for i, line in enumerate(lines) if line.startswith("srun "))
    assert lines[run].endswith("-- python3 train.py") and not lines[run].startswith("exec")
    assert lines[run + 1] == "code=$?" and "slurm-" in lines[run + 2]


def job(state: str, exit: SlurmExit | None = None) -> SlurmJob:
    return SlurmJob(JOB_ID, "gpucommons:t0a1b2c3d4e:0", state, None, "nlp", "u", "gpu", ("n1",), 1, exit=exit)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_mark_is_read_at_once_and_checked_against_slurm_afterwards(tmp_path: Path) -> None:
    now = Clock()
    wall = iter([1000.0, 1000.0, 1300.0, 1300.0])
    marks = EndMarks(verify_s=10.0, monotonic=now, clock=lambda: next(wall))
    mark, forged = end_mark_path(tmp_path, JOB_ID), end_mark_path(tmp_path, "4243")
    marks.expect(JOB_ID, mark)
    marks.expect("4243", forged)
    assert not marks.look() and marks.ended(JOB_ID) is None  # no mark yet (looked at 1000)
    mark.write_text("3\n")
    os.utime(mark, (1234.5, 1234.5))  # written when the script returned, read at 1300
    forged.write_text("0\n")  # a team's file: its job goes on running; backdated to cut the bill
    os.utime(forged, (10.0, 10.0))
    assert marks.look()
    assert marks.ended(JOB_ID) == ExitStatus(code=3, ended_at=1234.5)
    assert marks.ended("4243") == ExitStatus(code=0, ended_at=1000.0)  # not before the last look
    marks.forget(JOB_ID)
    marks.forget("4243")
    assert not mark.exists() and marks.ended(JOB_ID) is None
    # Slurm's next rounds: the real one has ended; the forged one still runs, and is cancelled once
    # it has run `verify_s` past its mark.
    rounds = {JOB_ID: job("COMPLETING", SlurmExit(3, 0)), "4243": replace(job("RUNNING"), job_id="4243")}
    now.now += 5
    assert marks.check(rounds, now.now) == []
    now.now += 6
    assert marks.check(rounds, now.now) == ["4243"]
    assert marks.check(rounds, now.now) == []  # once


def test_a_round_asked_for_before_the_mark_was_read_confirms_nothing(tmp_path: Path) -> None:
    now = Clock()
    marks = EndMarks(verify_s=1.0, monotonic=now)
    mark = end_mark_path(tmp_path, JOB_ID)
    marks.expect(JOB_ID, mark)
    assert not marks.look()
    mark.write_text("0\n")
    before = now.now - 0.1
    assert marks.look()
    now.now += 5
    assert marks.check({JOB_ID: job("RUNNING")}, before) == []
    assert marks.check({JOB_ID: job("RUNNING")}, now.now) == [JOB_ID]


@pytest.mark.parametrize("text", ["", "3:0", "-1", "256", "x" * 40])
def test_what_the_batch_script_does_not_write_is_no_mark(tmp_path: Path, text: str) -> None:
    marks = EndMarks()
    mark = end_mark_path(tmp_path, JOB_ID)
    marks.expect(JOB_ID, mark)
    assert not marks.look()
    mark.write_text(text)
    assert not marks.look() and marks.ended(JOB_ID) is None


def test_a_link_or_a_pipe_in_the_teams_folder_is_not_followed_nor_waited_on(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("0\n")
    marks = EndMarks()
    marks.expect(JOB_ID, end_mark_path(tmp_path, JOB_ID))
    end_mark_path(tmp_path, JOB_ID).symlink_to(secret)
    marks.expect("4243", end_mark_path(tmp_path, "4243"))
    os.mkfifo(end_mark_path(tmp_path, "4243"))
    assert not marks.look()
    assert not marks.look()


def test_a_mark_there_before_the_first_look_is_left_to_slurms_records(tmp_path: Path) -> None:
    """A job that ended while a restarted server was down: its EndTime, not its mark, closes it."""
    marks = EndMarks()
    mark = end_mark_path(tmp_path, JOB_ID)
    mark.write_text("0\n")
    marks.expect(JOB_ID, mark)
    assert not marks.look() and not marks.look() and marks.ended(JOB_ID) is None


def test_completing_counts_as_ended_only_with_an_exit_code() -> None:
    assert job("COMPLETING", SlurmExit(0, 0)).script_ended
    assert not job("COMPLETING").script_ended
    assert job("COMPLETED").script_ended and not job("RUNNING", SlurmExit(0, 0)).script_ended
