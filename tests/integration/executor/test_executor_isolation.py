"""Team isolation with real accounts and real processes: team A cannot read team B's workspace.

Runs only as root (CI does). Accounts get a unique prefix per run and are deleted afterwards.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpucommons
from gpucommons.backends.local import LocalExecutor
from gpucommons.backends.local.accounts import IsolationMode, TeamAccounts
from gpucommons.backends.local.task_path import reachable_by_others, runnable_by_others
from gpucommons.backends.ports import ExitStatus, Handle, Launch
from gpucommons.cli.doctor_checks import task_path_check
from gpucommons.testing.accounts import scratch_team_accounts

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="team accounts need root and useradd"
)


@pytest.fixture
def accounts() -> Iterator[TeamAccounts]:
    with scratch_team_accounts(("alpha", "beta")) as teams:
        yield teams


def run(
    executor: LocalExecutor, teams: TeamAccounts, team: str, task_id: str, script: str
) -> tuple[Handle, Path]:
    place = teams.prepare_task(team, task_id)
    log = teams.home / "logs" / f"{task_id}.log"
    launch = Launch(
        task_id=task_id,
        team=team,
        command=("/bin/sh", "-c", script),
        env={"COMMONS_CHECKPOINT_DIR": str(place.checkpoint_dir)},
        workdir=place.workdir,
        log_path=log,
        run_as=place.run_as,
    )
    return executor.start(launch), log


def finish(executor: LocalExecutor, handle: Handle) -> ExitStatus:
    deadline = time.monotonic() + 10
    while (status := executor.poll(handle)) is None:
        assert time.monotonic() < deadline, "task did not finish"
        time.sleep(0.02)
    return status


def test_a_team_task_cannot_read_another_teams_workspace(accounts: TeamAccounts) -> None:
    executor = LocalExecutor(accounts.home / "run", base_env={"PATH": "/usr/bin:/bin"})
    beta_ws = accounts.workspace("beta")

    handle, log = run(
        executor,
        accounts,
        "beta",
        "t-beta",
        'id -un; echo "beta secret" > secret.txt; echo saved > "$COMMONS_CHECKPOINT_DIR/state"',
    )
    assert finish(executor, handle) == ExitStatus(code=0), log.read_text()
    assert log.read_text().splitlines()[0] == accounts.account("beta")
    secret = beta_ws / "secret.txt"
    assert secret.read_text() == "beta secret\n"
    assert stat.S_IMODE(secret.stat().st_mode) & 0o007 == 0  # umask 007: nothing for other accounts
    assert pwd.getpwuid(secret.stat().st_uid).pw_name == accounts.account("beta")
    assert stat.S_IMODE(beta_ws.stat().st_mode) == 0o770

    handle, log = run(
        executor,
        accounts,
        "alpha",
        "t-alpha",
        f"echo mine > own.txt && cat own.txt; cat {secret}; echo cat=$?; ls {beta_ws}; echo ls=$?; "
        f"cat {accounts.checkpoint_dir('beta', 't-beta')}/state; echo ckpt=$?",
    )
    assert finish(executor, handle) == ExitStatus(code=0)
    out = log.read_text()
    assert "mine" in out
    assert "beta secret" not in out and "saved" not in out
    assert "cat=1" in out and "ls=2" in out and "ckpt=1" in out
    assert out.count("Permission denied") >= 3


def test_a_team_task_cannot_signal_another_teams_task(accounts: TeamAccounts) -> None:
    executor = LocalExecutor(accounts.home / "run", base_env={"PATH": "/usr/bin:/bin"})
    victim, victim_log = run(executor, accounts, "beta", "t-victim", "echo $$; exec sleep 30")
    try:
        deadline = time.monotonic() + 10
        while not victim_log.exists() or not victim_log.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        victim_pid = int(victim_log.read_text().split()[0])
        attacker, log = run(
            executor, accounts, "alpha", "t-attacker", f"kill -TERM {victim_pid}; echo kill=$?"
        )
        assert finish(executor, attacker) == ExitStatus(code=0)
        assert "kill=1" in log.read_text()
        assert executor.poll(victim) is None
    finally:
        executor.kill(victim)
    assert finish(executor, victim).signal == signal.SIGKILL


def test_a_team_task_gets_a_path_it_can_use_even_when_the_servers_is_private(
    accounts: TeamAccounts, tmp_path: Path
) -> None:
    """The README's first task, as root: the server's PATH starts with a shim directory in a home
    the team account cannot enter (pytest's tmp_path is 0700, like /root), and `python3` must still
    be found — in the system directories — instead of failing with "Permission denied"."""
    private_shims = tmp_path / "shims"
    private_shims.mkdir()
    (private_shims / "python3").write_text("#!/bin/sh\necho shim\n")
    (private_shims / "python3").chmod(0o755)
    executor = LocalExecutor(accounts.home / "run", base_env={"PATH": f"{private_shims}:/usr/bin:/bin"})
    place = accounts.prepare_task("alpha", "t-readme")
    launch = Launch(
        task_id="t-readme",
        team="alpha",
        command=("python3", "-c", "import os, sys; print(os.environ['PATH']); print(sys.executable)"),
        env={},
        workdir=place.workdir,
        log_path=accounts.home / "logs" / "t-readme.log",
        run_as=place.run_as,
    )
    handle = executor.start(launch)
    assert finish(executor, handle) == ExitStatus(code=0), launch.log_path.read_text()
    path, python = launch.log_path.read_text().splitlines()[-2:]
    assert str(private_shims) not in path.split(os.pathsep)
    assert python.startswith(("/usr/", "/bin/"))


def test_a_program_not_on_the_path_says_where_it_was_looked_for(accounts: TeamAccounts) -> None:
    executor = LocalExecutor(accounts.home / "run", base_env={"PATH": "/usr/bin:/bin"})
    handle = executor.start(
        Launch(
            task_id="t-missing2",
            team="alpha",
            command=("no-such-program-commons",),
            env={},
            workdir=accounts.prepare_task("alpha", "t-missing2").workdir,
            log_path=accounts.home / "logs" / "t-missing2.log",
            run_as=accounts.account("alpha"),
        )
    )
    assert finish(executor, handle).code == 127
    text = (accounts.home / "logs" / "t-missing2.log").read_text()
    assert "cannot start 'no-such-program-commons'" in text
    assert f"as {accounts.account('alpha')}, PATH=/usr/local/sbin:" in text


@pytest.fixture
def readable_install() -> Iterator[Path]:
    """GPU Commons installed where team accounts may run it (as under /opt/commons): a virtualenv of
    the system's python3 in /tmp whose site-packages reach this checkout and its dependencies, with
    the `commons` script pip would write. Returns its interpreter."""
    system_python = Path("/usr/bin/python3")
    if not system_python.exists():
        pytest.skip("no /usr/bin/python3 to build a virtualenv team accounts can run")
    root = Path(tempfile.mkdtemp(prefix="commons-opt-", dir="/tmp"))
    root.chmod(0o755)
    venv = root / "venv"
    subprocess.run([system_python, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python3"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    source = Path(gpucommons.__file__).resolve().parents[1]
    dependencies = Path(sysconfig.get_paths()["purelib"])  # typer, rich, ... of the test's interpreter
    (site / "commons-under-test.pth").write_text(f"{source}\n{dependencies}\n")
    script = venv / "bin" / "commons"
    script.write_text(f"#!{python}\nimport sys\nfrom gpucommons.cli.main import app\nsys.exit(app())\n")
    script.chmod(0o755)
    if not (runnable_by_others(python) and reachable(source) and reachable(dependencies)):
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"{source} or {dependencies} is closed to other users")
    try:
        yield python
    finally:
        shutil.rmtree(root, ignore_errors=True)


def reachable(directory: Path) -> bool:
    return reachable_by_others(directory) and bool(directory.stat().st_mode & stat.S_IROTH)


def test_a_team_task_runs_commons_from_a_readable_install_and_doctor_reports_its_path(
    accounts: TeamAccounts, readable_install: Path
) -> None:
    """Root with team accounts: the platform's bin directory is on a team task's PATH when the
    account may run its interpreter, so `commons --version` (and `commons checkpoint`) work in the
    task; doctor reports exactly the PATH the task saw."""
    server_path = "/usr/local/bin:/usr/bin:/bin"
    executor = LocalExecutor(
        accounts.home / "run", python=str(readable_install), base_env={"PATH": server_path}
    )
    handle, log = run(executor, accounts, "alpha", "t-commons", 'echo "$PATH"; id -un; commons --version')
    assert finish(executor, handle) == ExitStatus(code=0), log.read_text()
    path, user, version = log.read_text().splitlines()[:3]
    assert user == accounts.account("alpha")
    assert str(readable_install.parent) in path.split(os.pathsep) and version.strip()
    check = task_path_check(IsolationMode.ACCOUNTS, server_path, str(readable_install))
    assert check.status == "ok", check.detail
    assert f"team accounts get PATH={path} " in check.detail
