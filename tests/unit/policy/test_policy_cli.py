"""`commons policy check|schema`: exit codes, error lines without tracebacks, a real process run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from policy_helpers import EXAMPLE, MINIMAL, REPO
from typer.testing import CliRunner

from gpucommons.cli.main import app

runner = CliRunner()


def test_check_accepts_the_example_with_a_summary() -> None:
    result = runner.invoke(app, ["policy", "check", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "policy OK (2 pools, 3 teams, 4 priority classes)" in result.output
    assert "nlp" in result.output and "h100" in result.output


def test_check_quiet_prints_nothing_when_good() -> None:
    result = runner.invoke(app, ["policy", "check", "--quiet", str(EXAMPLE)])
    assert result.exit_code == 0 and result.output == ""


def test_check_lists_every_error_as_file_line_path_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        MINIMAL.replace("h100: {gpus: 8}", "h100: {gpus: 80, lend_limit: 90}\n      h200: {gpus: 1}")
    )
    result = runner.invoke(app, ["policy", "check", str(bad)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert (
        f"{bad}:4: cluster.pools[0]: the teams' nominal quotas in pool 'h100' add up to 80 GPUs" in lines[0]
    )
    assert f"{bad}:8: teams[0].quota.h100.lend_limit: lend_limit 90 GPUs is above" in lines[1]
    unknown = "unknown pool 'h200'; did you mean 'h100'? (defined pools: h100)"
    assert lines[2] == f"{bad}:9: teams[0].quota.h200: {unknown}"
    assert lines[-1] == f"{bad}: policy refused (3 problems)"
    assert "Traceback" not in result.output


def test_check_of_a_missing_file_says_so(tmp_path: Path) -> None:
    result = runner.invoke(app, ["policy", "check", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1
    assert f"{tmp_path / 'nope.yaml'}: no such file" in result.output


def test_check_of_a_directory_says_so(tmp_path: Path) -> None:
    result = runner.invoke(app, ["policy", "check", str(tmp_path)])
    assert result.exit_code == 1 and "directory" in result.output


def test_schema_prints_json_schema_with_descriptions() -> None:
    result = runner.invoke(app, ["policy", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["$schema"].endswith("2020-12/schema")
    assert schema["additionalProperties"] is False
    assert "description" in schema["properties"]["teams"]


def test_schema_out_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = runner.invoke(app, ["policy", "schema", "--out", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text())["title"].startswith("GPU Commons policy")


def _run_commons(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucommons", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_real_process_checks_good_and_bad_files(tmp_path: Path) -> None:
    good = _run_commons("policy", "check", str(EXAMPLE))
    assert good.returncode == 0, good.stderr
    assert "policy OK" in good.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  name: x\n  pools: []\nteams: [{name: a, quota: {gpu: {gpus: 1}}}]\n")
    refused = _run_commons("policy", "check", str(bad))
    assert refused.returncode == 1
    assert "Traceback" not in refused.stdout + refused.stderr
    assert f"{bad}:3: cluster.pools: must not be empty" in refused.stdout
    assert f"{bad}:4: teams[0].quota.gpu: unknown pool 'gpu'" in refused.stdout
