"""schemathesis against a real uvicorn server on loopback, on SQLite and PostgreSQL: every check
(`--checks all`: no 5xx, every status, content type, header and body as the OpenAPI document says,
schema-violating requests refused, credentials not ignored, the Allow header right) over the
examples, coverage, fuzzing and stateful phases (the document's links from a created task, token
or planning run to the routes that take its id). Tasks run on the timer executor, so that the random
commands schemathesis submits are never executed.

CI runs `MAX_EXAMPLES` cases per operation with a fixed seed (about 1,500 cases per database). The
bigger run, for a release (about 4,500 cases per database, 3 to 4 minutes each on the development
machine under load; docs/api.md), lifts the suite's per-test timeout:

    COMMONS_SCHEMATHESIS_EXAMPLES=100 python -m pytest --timeout 1800 \
        tests/integration/server/test_server_schemathesis.py
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from tests.integration.server.conftest import SMALL_POLICY

from gpucommons.identity.roles import Role
from gpucommons.server.app import build_context, create_app
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.settings import Settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 8
SEED = "20261201"
CONFIG = Path(__file__).with_name("schemathesis.toml")
#: Signing out revokes the presented token: those operations run alone, after everything else.
SIGN_OUT = "^(/auth/logout|/api/v1/auth/session)$"


class LiveServer:
    def __init__(self, home: Path, database_url: str | None = None) -> None:
        policy = home / "policy.yaml"
        home.mkdir(parents=True, exist_ok=True)
        policy.write_text(SMALL_POLICY)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        settings_ = Settings(
            home=home, database_url=database_url, policy=policy, executor="timer", port=self.port,
            isolation="logical",
            # The fuzzer presents bad credentials on purpose (to see them refused) and would soon be
            # throttled; the throttle has its own tests.
            auth_failure_limit=0,
        )  # fmt: skip
        self.ctx = build_context(settings_)
        with self.ctx.db.session() as session:
            token = issue_token(
                session, name="fuzz", now=time.time(), subject="fuzz", role=Role.PLATFORM_ADMIN
            ).token
        self.headers = {"Authorization": f"Bearer {token}"}
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(context=self.ctx), host="127.0.0.1", port=self.port, log_level="error"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the server did not start")

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.ctx.db.dispose()


def schemathesis(server: LiveServer, report: Path, examples: int, *args: str) -> dict[str, Any]:
    """Run the schemathesis CLI against `server` with every check; its JSON report."""
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    command = [
        cli, "--config-file", str(CONFIG), "--no-color", "run", f"{server.url}/openapi.json",
        "--header", f"Authorization: {server.headers['Authorization']}",
        "--checks", "all", "--workers", "1", "--seed", SEED, "--max-examples", str(examples),
        "--report", "json", "--report-json-path", str(report), *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(report.read_text())
    result["output"] = done.stdout
    return result


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    database_url: str, tmp_path: Path
) -> None:
    examples = int(os.environ.get("COMMONS_SCHEMATHESIS_EXAMPLES") or MAX_EXAMPLES)
    with LiveServer(tmp_path / "home", database_url) as server:
        everything = schemathesis(
            server, tmp_path / "main.json", examples,
            "--phases", "examples,coverage,fuzzing,stateful", "--exclude-path-regex", SIGN_OUT,
        )  # fmt: skip
        sign_out = schemathesis(
            server, tmp_path / "sign-out.json", examples,
            "--phases", "examples,coverage,fuzzing", "--include-path-regex", SIGN_OUT,
        )  # fmt: skip
    for run in (everything, sign_out):
        summary = run["output"][-4000:]
        print(f"schemathesis: {run['test_cases']}, phases {run['phases']}, {run['running_time']:.0f} s")
        assert run["failures"] == [], summary
        assert run["errors"] == [], summary
        assert run["exit_code"] == 0, summary
    assert everything["operations"]["tested"] >= 30
    assert everything["phases"]["stateful"]["status"] == "success", everything["phases"]
    assert everything["test_cases"]["generated"] >= 20 * everything["operations"]["tested"]
