"""`commons doctor`: tables and JSON from a policy file, checks, and clear errors."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucommons.backends.local.accounts import IsolationMode
from gpucommons.backends.local.inventory import assign_devices, parse_nvidia_smi, virtual_inventory
from gpucommons.cli import doctor_checks
from gpucommons.cli.doctor_checks import (
    configured_isolation,
    database_check,
    disk_check,
    inventory_checks,
    isolation_check,
    server_check,
    task_path_check,
)
from gpucommons.cli.main import app
from gpucommons.domain import Policy, Pool, PriorityClass, Quota, Resources, Team

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "commons.yaml"
runner = CliRunner()


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMONS_URL", "http://127.0.0.1:9")  # discard port: nothing answers
    monkeypatch.delenv("COMMONS_POLICY", raising=False)
    monkeypatch.delenv("COMMONS_DATABASE_URL", raising=False)


@pytest.fixture
def open_home() -> Iterator[Path]:
    """A home team accounts could reach (pytest's tmp_path lies under a 0700 directory)."""
    base = Path(tempfile.mkdtemp(prefix="commons-doctor-", dir="/tmp"))
    base.chmod(0o711)
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


def test_doctor_json_reports_every_team_the_inventory_and_the_checks(open_home: Path) -> None:
    result = runner.invoke(app, ["doctor", "--policy", str(EXAMPLE), "--home", str(open_home), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [t["team"] for t in report["teams"]] == ["nlp", "vision", "recsys"]
    assert report["isolation_mode"] in ("accounts", "logical")
    assert report["inventory"]["source"] in ("nvml", "nvidia-smi", "virtual")
    for team in report["teams"]:
        assert team["separated_by"] and team["not_separated"] and team["verdict"]
    names = {c["name"] for c in report["checks"]}
    assert {"team accounts", "GPU inventory", "database", "disk space", "server", "chromium / node"} <= names
    server = next(c for c in report["checks"] if c["name"] == "server")
    assert server["status"] == "info"
    assert "regulated data" in report["answer"]


def test_doctor_tables_name_the_teams_and_the_answer(open_home: Path) -> None:
    result = runner.invoke(app, ["doctor", "--policy", str(EXAMPLE), "--home", str(open_home)])
    assert result.exit_code == 0, result.output
    for text in ("separated from other teams by", "nlp", "recsys", "shared by every team", "environment"):
        assert text in result.output.lower()


def test_doctor_refuses_a_missing_policy_with_a_message(tmp_path: Path) -> None:
    result = runner.invoke(app, ["doctor", "--policy", str(tmp_path / "none.yaml")])
    assert result.exit_code == 1
    assert "no such file" in result.output
    assert "Traceback" not in result.output


def test_doctor_without_policy_or_server_says_what_to_give(tmp_path: Path) -> None:
    result = runner.invoke(app, ["doctor", "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert "give --policy FILE" in result.output


def test_doctor_fails_when_the_database_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMMONS_DATABASE_URL", "postgresql://postgres:pw@127.0.0.1:9/none")
    result = runner.invoke(app, ["doctor", "--policy", str(EXAMPLE), "--home", str(tmp_path), "--json"])
    assert result.exit_code == 1
    database = next(c for c in json.loads(result.output)["checks"] if c["name"] == "database")
    assert database["status"] == "fail" and "pw" not in database["detail"]


def test_database_check_for_sqlite_and_unknown_schemes(tmp_path: Path) -> None:
    assert database_check(None, tmp_path / "home").status == "ok"
    assert database_check(f"sqlite:///{tmp_path}/x.db", tmp_path).status == "ok"
    assert database_check("mysql://x", tmp_path).status == "warn"


@pytest.mark.postgres
def test_database_check_reaches_the_test_postgres() -> None:
    check = database_check("postgresql+psycopg://postgres@127.0.0.1:5432/test", Path("/tmp"))
    if check.status == "fail":
        pytest.skip(f"no PostgreSQL answers on 127.0.0.1:5432: {check.detail}")
    assert check.status == "ok" and check.detail.startswith("PostgreSQL")


def test_disk_check_warns_and_fails_on_low_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def free(gib: float) -> None:
        usage = shutil._ntuple_diskusage(100, 0, int(gib * doctor_checks.GIB))  # type: ignore[attr-defined]
        monkeypatch.setattr(doctor_checks.shutil, "disk_usage", lambda _p: usage)

    free(50)
    assert disk_check(tmp_path / "not-yet").status == "ok"
    free(5)
    assert disk_check(tmp_path).status == "warn"
    free(0.5)
    assert disk_check(tmp_path).status == "fail"


def test_isolation_and_inventory_checks_say_what_they_found() -> None:
    assert isolation_check(IsolationMode.LOGICAL, "alice").status == "warn"
    pool = Pool("h100", "H100", 1, 4)
    policy = Policy("t", (pool,), (PriorityClass("d", 0),), "d", (Team("a", (Quota("h100", Resources(1)),)),))
    virtual = inventory_checks(virtual_inventory(policy, ("no GPU found",)))
    assert [c.status for c in virtual] == ["info", "info"]
    short = assign_devices(policy, parse_nvidia_smi("0, NVIDIA H100, GPU-1, 1 MiB"), "nvidia-smi")
    assert [c.status for c in inventory_checks(short)] == ["ok", "warn"]


def test_server_check_is_informational_when_nothing_answers() -> None:
    check = server_check("http://127.0.0.1:9", None)
    assert check.status == "info" and "no server answers" in check.detail


def test_doctor_follows_the_isolation_the_server_is_configured_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMMONS_ISOLATION", "logical")
    result = runner.invoke(app, ["doctor", "--policy", str(EXAMPLE), "--home", str(tmp_path), "--json"])
    report = json.loads(result.output)
    assert report["isolation_mode"] == "logical"
    assert all(t["account"] is None for t in report["teams"])
    assert configured_isolation({"COMMONS_ISOLATION": "auto"}) is None
    assert configured_isolation({}) is None
    assert configured_isolation({"COMMONS_ISOLATION": "Accounts"}) is IsolationMode.ACCOUNTS


def test_a_home_team_accounts_cannot_reach_fails_the_doctor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = isolation_check(IsolationMode.ACCOUNTS, "root", "/root")
    assert check.status == "fail" and "/var/lib/commons" in check.detail
    monkeypatch.setenv("COMMONS_ISOLATION", "accounts")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    args = ["doctor", "--policy", str(EXAMPLE), "--home", str(closed / "home"), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    accounts = next(c for c in json.loads(result.output)["checks"] if c["name"] == "team accounts")
    assert accounts["status"] == "fail"


def test_task_path_check_fails_when_team_accounts_find_no_python3(tmp_path: Path) -> None:
    # No system directory lacks sh here, so point the check at an interpreter and a PATH with
    # nothing in them and look at what the team accounts' PATH would be missing.
    check = task_path_check(IsolationMode.LOGICAL, str(tmp_path), str(tmp_path / "python3"))
    assert check.status == "fail"
    assert "tasks find no sh or python3" in check.detail and str(tmp_path) in check.detail


def test_task_path_check_warns_when_the_platforms_interpreter_is_closed_to_team_accounts(
    tmp_path: Path,
) -> None:
    private = tmp_path / "home"
    (private / "bin").mkdir(parents=True)
    python = private / "bin" / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    private.chmod(0o700)
    check = task_path_check(IsolationMode.ACCOUNTS, f"{private / 'bin'}:/usr/bin:/bin", str(python))
    assert check.status == "warn", check.detail
    assert "team accounts get PATH=" in check.detail and str(private) not in check.detail.split(";")[0]
    assert "cannot enter" in check.detail


def test_task_path_check_reports_the_executors_path_and_warns_without_commons(tmp_path: Path) -> None:
    """Doctor names the PATH `task_path` gives tasks (the executor's), not the shell's as it is; a
    platform bin directory without `commons` means `commons checkpoint` fails inside tasks."""
    from gpucommons.backends.local.task_path import task_path

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    shell = "/usr/bin:/bin"
    check = task_path_check(IsolationMode.LOGICAL, shell, str(python))
    expected = task_path(shell, str(python), team_account=False)
    assert expected == f"{shell}:{bin_dir}"
    assert f"tasks get PATH={expected} " in check.detail
    assert check.status == "warn" and "`commons checkpoint` fails inside tasks" in check.detail
    commons = bin_dir / "commons"
    commons.write_text("#!/bin/sh\n")
    commons.chmod(0o755)
    check = task_path_check(IsolationMode.LOGICAL, shell, str(python))
    assert check.status == "ok" and f"commons is {commons}" in check.detail


def test_doctor_says_which_engine_build_runs_and_why() -> None:
    from gpucommons import _native

    check = doctor_checks.engine_build_check({})
    assert check.status == ("ok" if _native.compiled() else "info")
    if not _native.compiled():
        assert "Python sources" in check.detail and "scripts/build_native.py" in check.detail
    forced = doctor_checks.engine_build_check({_native.PURE_ENV: "1"})
    if not _native.compiled():
        assert forced.detail.startswith(f"Python sources ({_native.PURE_ENV} is set)")
