"""The batch script's end mark, run by a real `sh` as slurmstepd would run it (without Slurm).

What must hold: the mark appears only once the command has returned; the task's exit status reaches
Slurm unchanged (a code as the code, a signal as the signal); a stop signal sent to the whole batch
step (`scancel --full`) reaches the task, which may checkpoint, and does not kill the shell before the
mark is left; and with Slurm's own time limit the command is still exec'd (its warning reaches the
batch shell only).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpucommons.backends.slurm.end_marks import EndMarks
from gpucommons.backends.slurm.jobs import JobParseError, SlurmExit, SlurmJob, parse_wait_status
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
    assert mark.exists() and mark.read_bytes() == b""


def test_a_command_that_succeeds_leaves_the_mark_and_exit_0(tmp_path: Path) -> None:
    process, mark = start(tmp_path, ("true",))
    assert process.wait(10) == 0
    assert mark.exists()


def test_a_task_killed_by_a_signal_ends_the_batch_shell_with_that_signal(tmp_path: Path) -> None:
    process, mark = start(tmp_path, ("sh", "-c", "kill -KILL $$"))
    # Slurm records the batch shell's end: 0:9, as when the command was the batch step itself.
    assert process.wait(10) == -signal.SIGKILL
    assert mark.exists()


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
    assert saved.read_text() == "saved\n" and mark.exists()


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


def test_a_mark_is_only_a_hint_slurm_decides_and_a_forged_one_is_asked_about_ever_less_often(
    tmp_path: Path,
) -> None:
    clock, asked = Clock(), []
    answers = {"state": job("RUNNING")}

    def ask(job_ids: Sequence[str]) -> list[SlurmJob]:
        asked.append(tuple(job_ids))
        return [answers["state"]]

    marks = EndMarks(recheck_s=0.125, max_recheck_s=0.5, clock=clock)
    mark = end_mark_path(tmp_path, JOB_ID)
    marks.expect(JOB_ID, mark)
    marks.expect("4243", end_mark_path(tmp_path, "4243"))
    assert not marks.look(ask) and asked == []  # no mark: Slurm is not asked
    mark.touch()  # forged, or the script is about to end: Slurm still says RUNNING
    assert not marks.look(ask) and asked == [(JOB_ID,)] and marks.ended(JOB_ID) is None
    times = []
    for _ in range(40):  # 2.5 s in steps of 1/16 s: asked again after 1/8, 1/4, 1/2, 1/2, ... s
        clock.now += 0.0625
        before = len(asked)
        marks.look(ask)
        if len(asked) > before:
            times.append(clock.now - 100.0)
    assert times[:3] == [0.125, 0.375, 0.875]
    assert all(b - a == 0.5 for a, b in itertools.pairwise(times[2:]))
    clock.now += 1.0
    answers["state"] = job("COMPLETING", SlurmExit(3, 0))  # the script returned; Slurm cleans up
    assert marks.look(ask)
    ended = marks.ended(JOB_ID)
    assert ended is not None and ended.exit == SlurmExit(3, 0)
    marks.forget(JOB_ID)
    assert not mark.exists() and marks.ended(JOB_ID) is None


def test_squeue_prints_a_wait_status_which_is_read_as_code_and_signal() -> None:
    assert parse_wait_status("768") == SlurmExit(3, 0)
    assert parse_wait_status("15") == SlurmExit(0, 15)
    assert parse_wait_status("0") == SlurmExit(0, 0)
    with pytest.raises(JobParseError, match="not a number"):
        parse_wait_status("3:0")


def test_completing_counts_as_ended_only_with_an_exit_code() -> None:
    assert job("COMPLETING", SlurmExit(0, 0)).script_ended
    assert not job("COMPLETING").script_ended
    assert job("COMPLETED").script_ended and not job("RUNNING", SlurmExit(0, 0)).script_ended
