"""Every `commons` command pays for what the CLI imports at start-up, including the `commons checkpoint`
a task runs inside its preemption grace period. These tests keep the heavy libraries out of start-up:
each command imports them itself (behavioural checks on `sys.modules`, not timings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"

#: Libraries that cost tens to hundreds of milliseconds each to import (or, like authlib, warn on import).
HEAVY = (
    "fpdf",
    "authlib",
    "matplotlib",
    "fastapi",
    "sqlalchemy",
    "kubernetes",
    "numpy",
    "jsonschema",
    "uvicorn",
    "httpx",
)

#: Runs the CLI the way the `commons` entry point does, then reports which heavy modules got loaded.
PROBE = """
import json, sys
from gpucommons.cli.main import app
args = sys.argv[1:]
if args:
    try:
        app(args, prog_name="commons")
    except SystemExit:
        pass
heavy = json.loads({heavy!r})
loaded = sorted({{name.split(".")[0] for name in sys.modules}} & set(heavy))
sys.stderr.write("LOADED=" + json.dumps(loaded) + "\\n")
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    env.pop("PYTHONWARNINGS", None)
    code = PROBE.format(heavy=json.dumps(HEAVY))
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def _loaded(result: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(x for x in result.stderr.splitlines() if x.startswith("LOADED="))
    loaded: list[str] = json.loads(line.removeprefix("LOADED="))
    return loaded


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((), id="import-only"),
        pytest.param(("--version",), id="version"),
        pytest.param(("--help",), id="help"),
        pytest.param(("checkpoint", "--help"), id="checkpoint-help"),
        pytest.param(("chargeback", "--help"), id="chargeback-help"),
        pytest.param(("login", "--help"), id="login-help"),
    ],
)
def test_cli_start_up_imports_no_heavy_library(args: tuple[str, ...]) -> None:
    # --help builds every command's parameters from its annotations, so this also catches a heavy type
    # used in a command signature.
    result = _run(*args)
    assert _loaded(result) == [], result.stderr


def test_cli_start_up_prints_no_warning() -> None:
    # authlib warned about its deprecations on every command while `commons login` imported it at start-up.
    result = _run("--version")
    assert result.stdout.startswith("commons ")
    assert [x for x in result.stderr.splitlines() if not x.startswith("LOADED=")] == []


def test_cli_probe_sees_a_heavy_import() -> None:
    # The probe itself must notice a heavy module, or the tests above would pass vacuously.
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = PROBE.format(heavy=json.dumps(HEAVY)).replace("import json, sys", "import json, sys, httpx", 1)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert _loaded(result) == ["httpx"], result.stderr


def test_login_module_imports_authlib_without_its_httpx_deprecation_warning() -> None:
    # Without the optional httpx2 package authlib warns on import; `commons login` must not show it.
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYTHONWARNINGS", None)
    code = "import sys; sys.modules['httpx2'] = None; import gpucommons.cli.oidc_flows"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "deprecated" not in result.stderr, result.stderr


def test_authlib_says_nothing_about_httpx_when_the_server_or_login_starts() -> None:
    """Without the optional httpx2, authlib warns on import that httpx is deprecated; the server's
    OpenID client and `commons login` import it without that warning (httpx2 hidden here on purpose)."""
    code = (
        "import sys, warnings; sys.modules['httpx2'] = None; warnings.simplefilter('error'); "
        "import gpucommons.server.auth.oidc, gpucommons.cli.oidc_flows"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "deprecated" not in done.stderr
