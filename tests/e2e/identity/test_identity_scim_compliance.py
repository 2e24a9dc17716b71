"""The SCIM service against the two public checkers, as CI runs them: a real server on loopback.

- scim2-tester (`scim2 --url … test`, package scim2-cli): ~135 checks of discovery, CRUD, every
  PATCH per attribute, attribute selection, errors; exit 1 on any failure.
- scim-sanity (`scim-sanity probe … --i-accept-side-effects`): the lifecycle an IdP drives, PATCH
  answering 200 with the resource, a group member `fake-member-id` that does not exist (pending).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucommons.identity.principal import Role
from gpucommons.store.db import Database
from gpucommons.testing.identity import (
    identity_app,
    identity_database,
    identity_policy,
    live_server,
    service_token,
)

pytestmark = pytest.mark.slow


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} is not installed: pip install scim2-cli scim-sanity (the [dev] extras)")
    return found


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = identity_database(tmp_path)
    yield database
    database.dispose()


@pytest.fixture
def scim_server(db: Database) -> Iterator[tuple[str, str]]:
    token = service_token(db, Role.SCIM, name="okta")
    with live_server(identity_app(db, identity_policy())) as url:
        yield f"{url}/scim/v2", token


def test_scim2_tester_passes_every_check(scim_server: tuple[str, str]) -> None:
    url, token = scim_server
    run = subprocess.run(
        [_tool("scim2"), "--url", url, "test"],
        env={**os.environ, "SCIM_CLI_HEADERS": f"Authorization: Bearer {token}", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    verdicts = [line.split()[0] for line in report.splitlines() if line[:1].isupper() and " " in line]
    assert verdicts.count("SUCCESS") >= 130, report
    assert not {"ERROR", "CRITICAL"} & set(verdicts), report


def test_scim_sanity_probe_passes(scim_server: tuple[str, str]) -> None:
    url, token = scim_server
    run = subprocess.run(
        [_tool("scim-sanity"), "probe", url, "--token", token, "--i-accept-side-effects"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    assert "All tests passed" in report and "[FAIL]" not in report, report


def test_checkers_are_refused_without_a_scim_token(db: Database) -> None:
    finance = service_token(db, Role.FINANCE, name="fin")
    with live_server(identity_app(db, identity_policy())) as url:
        run = subprocess.run(
            [_tool("scim-sanity"), "probe", f"{url}/scim/v2", "--token", finance, "--i-accept-side-effects"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode != 0
