"""The local executor with real processes: environment, logs, exit statuses, signals, re-adoption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpucommons.backends.clock import SystemClock
from gpucommons.backends.local import LOST, LaunchError, LocalExecutor, StopAction, StopPlan, next_stop_step
from gpucommons.backends.local.accounts import IsolationMode
from gpucommons.backends.local.procfs import read_stat, start_marker
from gpucommons.backends.ports import ExitStatus, Handle, Launch
from gpucommons.cli.doctor_checks import task_path_check

PY = sys.executable


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"condition not met within {timeout}s")


def wait_for_exit(executor: LocalExecutor, handle: Handle, timeout: float = 10.0) -> ExitStatus:
    wait_until(lambda: executor.poll(handle) is not None, timeout)
    status = executor.poll(handle)
    assert status is not None
    return status


def python(code: str) -> tuple[str, ...]:
    return (PY, "-c", textwrap.dedent(code))


def wait_for_file_then_exit(go: Path, code: int) -> tuple[str, ...]:
    """A task that runs until the test creates `go`, then exits with `code`."""
    return python(f"""
        import pathlib, time
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        raise SystemExit({code})
    """)


@pytest.fixture
def executor(tmp_path: Path) -> LocalExecutor:
    return LocalExecutor(tmp_path / "run", base_env={"PATH": os.environ["PATH"], "SECRET_DB_URL": "x"})


@pytest.fixture
def make_launch(tmp_path: Path) -> Callable[..., Launch]:
    workdir = tmp_path / "work"
    workdir.mkdir()

    def make(command: tuple[str, ...], task_id: str = "t1", gpus: tuple[int, ...] = (), **env: str) -> Launch:
        return Launch(
            task_id=task_id,
            team="nlp",
            command=command,
            env={"COMMONS_TASK_ID": task_id, "COMMONS_TEAM": "nlp", **env},
            workdir=workdir,
            log_path=tmp_path / "logs" / f"{task_id}.log",
            gpu_indices=gpus,
        )

    return make


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[list[Handle]]:
    """Handles registered here are SIGKILLed after the test, whatever it did."""
    started: list[Handle] = []
    yield started
    for handle in started:
        if start_marker(handle.pid) == handle.start_marker:
            os.killpg(handle.pid, signal.SIGKILL)


def test_task_sees_its_environment_and_assigned_gpus_and_no_server_secrets(
    executor: LocalExecutor, make_launch: Callable[..., Launch]
) -> None:
    launch = make_launch(
        python("""
            import json, os
            keys = ["CUDA_VISIBLE_DEVICES", "COMMONS_TASK_ID", "COMMONS_TEAM", "COMMONS_CHECKPOINT_DIR",
                    "COMMONS_RESTART_COUNT", "SECRET_DB_URL"]
            print(json.dumps({k: os.environ.get(k) for k in keys} | {"cwd": os.getcwd()}))
        """),
        gpus=(2, 5),
        COMMONS_CHECKPOINT_DIR="/ckpt/t1",
        COMMONS_RESTART_COUNT="1",
        CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7",
    )
    handle = executor.start(launch)
    assert wait_for_exit(executor, handle) == ExitStatus(code=0)
    seen = json.loads(launch.log_path.read_text())
    assert seen == {
        "CUDA_VISIBLE_DEVICES": "2,5",  # the assigned GPUs win over anything else
        "COMMONS_TASK_ID": "t1",
        "COMMONS_TEAM": "nlp",
        "COMMONS_CHECKPOINT_DIR": "/ckpt/t1",
        "COMMONS_RESTART_COUNT": "1",
        "SECRET_DB_URL": None,
        "cwd": str(launch.workdir),
    }


def test_stdout_and_stderr_are_appended_to_the_log_across_attempts(
    executor: LocalExecutor, make_launch: Callable[..., Launch]
) -> None:
    launch = make_launch(python("import sys; print('out'); print('err', file=sys.stderr)"))
    for _ in range(2):
        assert wait_for_exit(executor, executor.start(launch)).succeeded
    assert launch.log_path.read_text().split() == ["out", "err", "out", "err"]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("raise SystemExit(0)", ExitStatus(code=0)),
        ("raise SystemExit(3)", ExitStatus(code=3)),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)",
            ExitStatus(code=None, signal=signal.SIGUSR1),
        ),
    ],
    ids=["success", "failure-code", "killed-by-signal"],
)
def test_exit_codes_and_signals_are_mapped(
    executor: LocalExecutor, make_launch: Callable[..., Launch], code: str, expected: ExitStatus
) -> None:
    assert wait_for_exit(executor, executor.start(make_launch(python(code)))) == expected


def test_command_that_does_not_exist_fails_with_127_and_says_why(
    executor: LocalExecutor, make_launch: Callable[..., Launch]
) -> None:
    launch = make_launch(("/no/such/program", "--flag"))
    assert wait_for_exit(executor, executor.start(launch)) == ExitStatus(code=127)
    assert "cannot start '/no/such/program'" in launch.log_path.read_text()


def test_launch_with_missing_workdir_or_unknown_account_is_refused(
    executor: LocalExecutor, make_launch: Callable[..., Launch], tmp_path: Path
) -> None:
    base = make_launch(("true",))
    with pytest.raises(LaunchError, match="working directory"):
        executor.start(Launch("t9", "nlp", ("true",), {}, tmp_path / "missing", base.log_path))
    with pytest.raises(LaunchError, match="empty command"):
        executor.start(Launch("t9", "nlp", (), {}, base.workdir, base.log_path))
    if os.geteuid() == 0:
        with pytest.raises(LaunchError, match="no Unix account"):
            executor.start(
                Launch("t9", "nlp", ("true",), {}, base.workdir, base.log_path, run_as="nobody-xyz-q")
            )


def test_sigterm_reaches_a_child_of_the_task(
    executor: LocalExecutor, make_launch: Callable[..., Launch], tmp_path: Path, no_leftovers: list[Handle]
) -> None:
    marker = tmp_path / "child-got-sigterm"
    child = f"""
        import signal, sys, time, pathlib
        def on_term(*_):
            pathlib.Path({str(marker)!r}).write_text("saved")
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        print("child ready", flush=True)
        time.sleep(60)
    """
    parent = f"""
        import signal, subprocess, sys
        # The parent ignores it: only a signal to the whole group reaches the child.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.run([{PY!r}, "-c", {textwrap.dedent(child)!r}])
    """
    launch = make_launch(python(parent))
    handle = executor.start(launch)
    no_leftovers.append(handle)
    wait_until(lambda: "child ready" in launch.log_path.read_text())
    executor.signal(handle, signal.SIGTERM)
    assert wait_for_exit(executor, handle) == ExitStatus(code=0)
    assert marker.read_text() == "saved"


def test_task_ignoring_sigterm_is_killed_after_its_grace_period(
    executor: LocalExecutor, make_launch: Callable[..., Launch], no_leftovers: list[Handle]
) -> None:
    launch = make_launch(
        python("""
            import signal, time
            signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
            print("ready", flush=True)
            time.sleep(60)
        """)
    )
    handle = executor.start(launch)
    no_leftovers.append(handle)
    wait_until(lambda: "ready" in launch.log_path.read_text())
    clock = SystemClock()
    plan = StopPlan(issued_at=clock.now(), grace_s=0.5)
    signal_sent = kill_sent = False
    actions: list[StopAction] = []
    while (status := executor.poll(handle)) is None:
        step = next_stop_step(plan, clock.now(), signal_sent=signal_sent, kill_sent=kill_sent)
        if not actions or actions[-1] != step.action:
            actions.append(step.action)
        if step.action is StopAction.SEND_SIGNAL:
            assert step.signum is not None
            executor.signal(handle, step.signum)
            signal_sent = True
        elif step.action is StopAction.KILL:
            executor.kill(handle)
            kill_sent = True
        time.sleep(0.02)
    assert status == ExitStatus(code=None, signal=signal.SIGKILL)
    assert actions[:3] == [StopAction.SEND_SIGNAL, StopAction.WAIT, StopAction.KILL]
    assert clock.now() >= plan.deadline
    assert "ignoring SIGTERM" in launch.log_path.read_text()


def test_processes_the_task_leaves_behind_are_killed_when_it_exits(
    executor: LocalExecutor, make_launch: Callable[..., Launch], tmp_path: Path
) -> None:
    pid_file = tmp_path / "orphan.pid"
    launch = make_launch(
        python(f"""
            import subprocess, pathlib
            p = subprocess.Popen(["sleep", "60"])
            pathlib.Path({str(pid_file)!r}).write_text(str(p.pid))
        """)
    )
    handle = executor.start(launch)
    assert wait_for_exit(executor, handle) == ExitStatus(code=0)
    orphan = int(pid_file.read_text())
    stat = read_stat(orphan)
    assert stat is None or stat.is_zombie


def test_kill_reaches_processes_that_left_the_process_group(
    executor: LocalExecutor, make_launch: Callable[..., Launch], tmp_path: Path
) -> None:
    pid_file = tmp_path / "escapee.pid"
    launch = make_launch(
        python(f"""
            import subprocess, pathlib, time
            p = subprocess.Popen(["sleep", "60"], process_group=0)
            pathlib.Path({str(pid_file)!r}).write_text(str(p.pid))
            time.sleep(60)
        """)
    )
    handle = executor.start(launch)
    wait_until(pid_file.exists)
    escapee = int(pid_file.read_text())
    assert read_stat(escapee) is not None and read_stat(escapee).pgrp != handle.pid  # type: ignore[union-attr]
    executor.kill(handle)
    assert wait_for_exit(executor, handle).signal == signal.SIGKILL
    wait_until(lambda: (s := read_stat(escapee)) is None or s.is_zombie)


def test_a_fresh_executor_adopts_a_running_attempt_and_reads_how_it_ended(
    tmp_path: Path, make_launch: Callable[..., Launch], no_leftovers: list[Handle]
) -> None:
    go = tmp_path / "go"
    launch = make_launch(wait_for_file_then_exit(go, 7))
    first = LocalExecutor(tmp_path / "run")
    handle = first.start(launch)
    no_leftovers.append(handle)
    del first  # the server goes away; the attempt does not

    second = LocalExecutor(tmp_path / "run")
    assert second.is_alive(handle)
    assert second.poll(handle) is None
    go.touch()
    assert wait_for_exit(second, handle) == ExitStatus(code=7)
    assert second.poll(handle) == ExitStatus(code=7)  # asking again gives the same answer


#: A stand-in server: starts one attempt, prints its handle, then waits to be killed.
SERVER = """
import json, sys, time
from pathlib import Path
from gpucommons.backends.local import LocalExecutor
from gpucommons.backends.ports import Launch
run, work, log = map(Path, sys.argv[1:4])
command = tuple(json.loads(sys.argv[4]))
h = LocalExecutor(run).start(Launch("t-crash", "nlp", command, {}, work, log))
print(json.dumps({"pid": h.pid, "marker": h.start_marker, "exit_file": str(h.exit_file)}), flush=True)
time.sleep(60)
"""


def test_exit_status_is_known_after_the_task_ended_while_the_server_was_killed(
    tmp_path: Path, make_launch: Callable[..., Launch], no_leftovers: list[Handle]
) -> None:
    launch = make_launch(("true",))
    go = tmp_path / "go"
    server = subprocess.Popen(
        [
            *(PY, "-c", SERVER, str(tmp_path / "run"), str(launch.workdir), str(launch.log_path)),
            json.dumps(wait_for_file_then_exit(go, 4)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    started = json.loads(server.stdout.readline())
    handle = Handle("t-crash", started["pid"], started["marker"], Path(started["exit_file"]))
    no_leftovers.append(handle)
    server.kill()  # kill -9 of the server
    server.wait()

    restarted = LocalExecutor(tmp_path / "run")
    assert restarted.poll(handle) is None  # the attempt survived its server
    go.touch()  # ... and ends while no server runs
    wait_until(lambda: handle.exit_file is not None and handle.exit_file.exists())
    wait_until(lambda: read_stat(handle.pid) is None)  # reaped by init: nobody's child any more
    assert LocalExecutor(tmp_path / "run").poll(handle) == ExitStatus(code=4)


def test_a_recycled_or_foreign_pid_is_neither_adopted_nor_signalled(tmp_path: Path) -> None:
    foreign = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        marker = start_marker(foreign.pid)
        assert marker is not None
        # Same pid, but the start marker of some earlier process that had it.
        stale = Handle("t-old", foreign.pid, marker + "0", tmp_path / "run" / "t-old.exit")
        executor = LocalExecutor(tmp_path / "run")
        assert executor.poll(stale) == LOST
        assert not executor.is_alive(stale)
        executor.signal(stale, signal.SIGTERM)
        executor.kill(stale)
        time.sleep(0.1)
        assert foreign.poll() is None, "a foreign process was signalled"
    finally:
        foreign.kill()
        foreign.wait()


def test_an_attempt_whose_wrapper_vanished_unrecorded_reports_sigkill(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    handle = Handle("t-gone", gone.pid, "boot:1", tmp_path / "never-written.exit")
    assert LocalExecutor(tmp_path / "run").poll(handle) == ExitStatus(code=None, signal=signal.SIGKILL)


def test_release_forgets_the_attempt_and_removes_its_exit_file(
    executor: LocalExecutor, make_launch: Callable[..., Launch]
) -> None:
    handle = executor.start(make_launch(("true",)))
    assert wait_for_exit(executor, handle).succeeded
    assert handle.exit_file is not None and handle.exit_file.exists()
    executor.release(handle)
    assert not handle.exit_file.exists()


def test_the_log_is_private_to_the_server_even_if_it_existed_before(
    executor: LocalExecutor, make_launch: Callable[..., Launch]
) -> None:
    launch = make_launch(("true",))
    launch.log_path.parent.mkdir(parents=True, exist_ok=True)
    launch.log_path.write_text("--- server note\n")
    launch.log_path.chmod(0o644)
    assert wait_for_exit(executor, executor.start(launch)).succeeded
    assert launch.log_path.stat().st_mode & 0o777 == 0o640
    assert launch.log_path.read_text() == "--- server note\n"


def test_a_finished_attempt_is_never_signalled_again(
    executor: LocalExecutor, make_launch: Callable[..., Launch], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = executor.start(make_launch(("true",)))
    assert wait_for_exit(executor, handle).succeeded
    wait_until(lambda: read_stat(handle.pid) is None)
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append((pgid, sig)))
    # Its pid may now name somebody else's process group: neither signal nor kill may reach it.
    executor.signal(handle, signal.SIGTERM)
    executor.kill(handle)
    assert sent == []


def test_an_attempt_started_but_never_recorded_is_found_again_by_its_task_id(
    executor: LocalExecutor,
    make_launch: Callable[..., Launch],
    tmp_path: Path,
    no_leftovers: list[Handle],
) -> None:
    """The server died between starting a runner and storing its handle: a new server (another
    executor on the same run directory) finds the running attempt, and later its exit file."""
    go = tmp_path / "go"
    handle = executor.start(make_launch(wait_for_file_then_exit(go, 3), task_id="t-lost"))
    no_leftovers.append(handle)
    other = LocalExecutor(tmp_path / "run")
    assert other.find_attempt("t-other") is None
    # Found by the runner's command line, which the forked child shows once it has exec'd (under
    # load that can be a moment after start() returns; a recovering server looks much later).
    wait_until(lambda: other.find_attempt("t-lost") is not None)
    found = other.find_attempt("t-lost")
    assert found == handle, "the same process, marker and exit file"
    assert other.poll(found) is None
    go.touch()
    assert wait_for_exit(executor, handle) == ExitStatus(code=3)
    ended = other.find_attempt("t-lost")
    assert ended is not None and ended.pid == 0 and ended.exit_file == handle.exit_file
    assert other.poll(ended) == ExitStatus(code=3)
    other.signal(ended, signal.SIGTERM)  # an ended attempt known by its file only: nothing to signal
    other.kill(ended)
    other.release(ended)
    assert other.find_attempt("t-lost") is None


def test_a_task_of_the_servers_own_user_finds_commons_and_doctor_reports_its_path(
    tmp_path: Path, make_launch: Callable[..., Launch]
) -> None:
    """Logical isolation: a server started without its virtualenv on PATH (`.venv/bin/commons up`)
    used to give tasks a PATH without `commons` (`sh: 1: commons: not found`, exit 127) while doctor,
    run from an activated shell, said all was well. Tasks now get the platform's bin directory, and
    doctor reports the very PATH the task sees."""
    if not (Path(PY).parent / "commons").exists():
        pytest.skip(f"no `commons` script beside {PY} (GPU Commons is not installed in this interpreter)")
    server_path = "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"  # no virtualenv on it
    executor = LocalExecutor(tmp_path / "run", python=PY, base_env={"PATH": server_path})
    launch = make_launch(("/bin/sh", "-c", 'echo "$PATH"; commons --version'))
    handle = executor.start(launch)
    assert wait_for_exit(executor, handle) == ExitStatus(code=0), launch.log_path.read_text()
    path, version = launch.log_path.read_text().splitlines()[:2]
    assert path.split(os.pathsep) == [*server_path.split(os.pathsep), str(Path(PY).parent)]
    assert version.strip()
    check = task_path_check(IsolationMode.LOGICAL, server_path, PY)
    assert check.status == "ok", check.detail
    assert f"tasks get PATH={path} " in check.detail
