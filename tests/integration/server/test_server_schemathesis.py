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
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.integration.server.conftest import LiveServer

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 8
SEED = "20261201"
CONFIG = Path(__file__).with_name("schemathesis.toml")
#: Signing out revokes the presented token: those operations run alone, after everything else.
SIGN_OUT = "^(/auth/logout|/api/v1/auth/session)$"


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
    # A stream of events ends after the server's maximum: short here, or every case would wait it out.
    with LiveServer(tmp_path / "home", database_url, events_max_stream_s=0.2) as server:
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
