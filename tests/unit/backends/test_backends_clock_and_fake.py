"""The clocks, and the in-memory executor that server tests drive."""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpucommons.backends.clock import ManualClock, SystemClock
from gpucommons.backends.fake import FakeExecutor, Script
from gpucommons.backends.local import LaunchError
from gpucommons.backends.ports import Clock, Executor, ExitStatus, Launch


def launch(task_id: str = "t1") -> Launch:
    return Launch(task_id, "nlp", ("train",), {}, Path("/w"), Path("/l"), gpu_indices=(0,))


def test_system_clock_reads_the_wall_clock() -> None:
    clock: Clock = SystemClock()
    assert abs(clock.now() - time.time()) < 1


def test_manual_clock_moves_only_forward_when_told() -> None:
    clock = ManualClock(10)
    assert clock.advance(5) == 15 == clock.now()
    clock.set(20)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.set(19)


def test_fake_attempt_runs_until_its_scripted_time_is_up() -> None:
    clock = ManualClock()
    fake: Executor = FakeExecutor(clock)
    assert isinstance(fake, FakeExecutor)
    fake.script("t1", Script(run_s=60, exit=ExitStatus(code=2)))
    handle = fake.start(launch())
    clock.advance(59)
    assert fake.is_alive(handle)
    clock.advance(1)
    assert fake.poll(handle) == ExitStatus(code=2)


def test_fake_attempt_dies_of_its_signal_unless_scripted_otherwise() -> None:
    fake = FakeExecutor(ManualClock())
    plain = fake.start(launch("plain"))
    fake.signal(plain, signal.SIGTERM)
    assert fake.poll(plain) == ExitStatus(code=None, signal=signal.SIGTERM)

    fake.script("saver", Script(on_signal=ExitStatus(code=0)))
    saver = fake.start(launch("saver"))
    fake.signal(saver, signal.SIGTERM)
    assert fake.poll(saver) == ExitStatus(code=0)

    fake.script("stubborn", Script(ignore_signals=True))
    stubborn = fake.start(launch("stubborn"))
    fake.signal(stubborn, signal.SIGTERM)
    assert fake.is_alive(stubborn)
    fake.kill(stubborn)
    assert fake.poll(stubborn) == ExitStatus(code=None, signal=signal.SIGKILL)
    assert fake.attempts[-1].signals == [signal.SIGTERM, signal.SIGKILL]


def test_fake_survives_a_restart_and_records_launches() -> None:
    fake = FakeExecutor(ManualClock())
    handle = fake.start(launch())
    after = fake.restarted()
    assert after.is_alive(handle)
    after.finish("t1", ExitStatus(code=1))
    assert fake.poll(handle) == ExitStatus(code=1)
    assert [la.gpu_indices for la in after.launches("t1")] == [(0,)]
    assert after.running("t1") is None
    with pytest.raises(KeyError):
        after.finish("t1")


def test_fake_refuses_scripted_starts_and_unknown_handles() -> None:
    fake = FakeExecutor(ManualClock())
    fake.script("bad", Script(fail_start=LaunchError("no workdir")))
    with pytest.raises(LaunchError, match="no workdir"):
        fake.start(launch("bad"))
    handle = fake.start(launch())
    stranger = replace(handle, start_marker="other")
    assert fake.poll(stranger) == ExitStatus(code=None, signal=signal.SIGKILL)
