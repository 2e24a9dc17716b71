"""`commons chargeback` and `commons chargeback compare`: files in, files out, exit 1 on bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucommons.cli.main import app
from gpucommons.ledger import EndReason, write_usage_csv
from gpucommons.testing.chargeback import hours_interval

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "commons.yaml"
runner = CliRunner()


@pytest.fixture
def usage(tmp_path: Path) -> Path:
    ledger = [
        hours_interval("nlp", "h100", gpus=24, start_h=-4, end_h=96, priority="training"),
        hours_interval(
            "nlp",
            "a100",
            gpus=4,
            start_h=24,
            end_h=216,
            priority="interactive",
            end_reason=EndReason.PREEMPTED,
            lost_gpu_hours="12.5",
        ),
        hours_interval("vision", "h100", gpus=8, start_h=48, end_h=576, priority="production"),
        hours_interval("recsys", "h100", gpus=4, start_h=0, end_h=720, priority="production"),
    ]
    buffer = io.StringIO()
    write_usage_csv(ledger, buffer)
    path = tmp_path / "usage.csv"
    path.write_text(buffer.getvalue())
    return path


#: "Now" for the commands, unless a test says otherwise: after every period used here, so that no
#: test depends on today's date (a period that has not ended is charged only up to now).
LATER = "2030-01-01T00:00:00Z"


def run(*args: str | Path) -> tuple[int, str, str]:
    argv = [str(a) for a in args]
    if argv[0] == "chargeback" and "--period" in argv and "--as-of" not in argv:
        argv += ["--as-of", LATER]
    result = runner.invoke(app, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_chargeback_writes_contract_5_exactly_as_documented(usage: Path, tmp_path: Path) -> None:
    out = tmp_path / "C.json"
    code, stdout, _ = run(
        "chargeback", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--out", out
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert (
        data["platform_cents"] + sum(t["total_cents"] for t in data["teams"].values())
        == data["cluster_cost_cents"]
    )
    assert set(data["teams"]) == {"nlp", "vision", "recsys"}
    assert "cluster cost" in stdout and f"wrote {out}" in stdout


def test_chargeback_without_out_prints_the_json(usage: Path) -> None:
    code, stdout, _ = run(
        "chargeback", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11-01..2026-11-15"
    )
    assert code == 0
    assert json.loads(stdout)["period"] == {"start": "2026-11-01T00:00:00Z", "end": "2026-11-16T00:00:00Z"}


@pytest.mark.parametrize(
    ("fmt", "marker"),
    [
        ("csv", b"account,account_type"),
        ("focus", b"BilledCost,"),
        ("html", b"<!doctype html>"),
        ("pdf", b"%PDF-"),
    ],
)
def test_chargeback_writes_every_format(usage: Path, tmp_path: Path, fmt: str, marker: bytes) -> None:
    out = tmp_path / f"out.{fmt}"
    code, _, stderr = run(
        "chargeback",
        "--policy",
        EXAMPLE,
        "--usage",
        usage,
        "--period",
        "2026-11",
        "--format",
        fmt,
        "--team",
        "nlp",
        "--out",
        out,
    )
    assert code == 0, stderr
    assert marker in out.read_bytes()


def test_bad_ledger_rows_are_refused_with_line_numbers_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "task_id,team,pool,gpus,start,end,priority,borrowed_gpus,end_reason\n"
        "t1,nlp,h100,8,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded\n"
        "t2,nlp,h100,eight,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded\n"
        "t3,nlp,tpu,1,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded\n"
    )
    code, stdout, stderr = run("chargeback", "--policy", EXAMPLE, "--usage", bad, "--period", "2026-11")
    assert code == 1
    assert f"{bad}:3: gpus: 'eight' is not a whole number" in stderr
    assert f"{bad}:4: pool: 'tpu' is not a pool of the policy" in stderr
    assert "Traceback" not in stdout + stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--period", "2026-13"], "--period: no month 13"),
        (["--period", "2026-11", "--format", "xml"], "--format must be one of"),
        (["--period", "2026-11", "--format", "pdf"], "name the team with --team"),
        (["--period", "2026-11", "--format", "html", "--team", "ghost"], "no team 'ghost'"),
    ],
)
def test_bad_options_exit_1_with_a_message(usage: Path, args: list[str], message: str) -> None:
    code, _, stderr = run("chargeback", "--policy", EXAMPLE, "--usage", usage, *args)
    assert code == 1 and message in stderr


def test_missing_files_and_options_exit_1(tmp_path: Path, usage: Path) -> None:
    code, _, stderr = run(
        "chargeback", "--policy", EXAMPLE, "--usage", tmp_path / "nope.csv", "--period", "2026-11"
    )
    assert code == 1 and "no such usage ledger file" in stderr
    code, _, stderr = run("chargeback", "--usage", usage, "--period", "2026-11")
    assert code == 1 and "missing --policy" in stderr
    code, _, stderr = run(
        "chargeback", "--policy", tmp_path / "p.yaml", "--usage", usage, "--period", "2026-11"
    )
    assert code == 1 and "no such file" in stderr


def test_a_bad_bill_is_refused_by_line(usage: Path, tmp_path: Path) -> None:
    bill = tmp_path / "bill.csv"
    bill.write_text("pool,amount\nh100,50000\nh100,1\n")
    code, _, stderr = run(
        "chargeback", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--bill", bill
    )
    assert code == 1 and f"{bill}:3: pool: 'h100' is already billed on line 2" in stderr


def test_a_bill_sets_the_pool_cost(usage: Path, tmp_path: Path) -> None:
    bill = tmp_path / "bill.csv"
    bill.write_text("pool,amount\nh100,50000.00\n")
    out = tmp_path / "C.json"
    code, _, _ = run(
        "chargeback",
        "--policy",
        EXAMPLE,
        "--usage",
        usage,
        "--period",
        "2026-11",
        "--bill",
        bill,
        "--out",
        out,
    )
    assert code == 0
    # a100: 16 GPUs × 720 h × 1.60 = 18,432.00; admin 3,000.00
    assert json.loads(out.read_text())["cluster_cost_cents"] == 5_000_000 + 1_843_200 + 300_000


def test_compare_prints_every_model_and_writes_json_or_html(usage: Path, tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    code, stdout, _ = run(
        "chargeback", "compare", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--out", out
    )
    assert code == 0
    assert "*usage" in stdout and "platform" in stdout
    scenarios = json.loads(out.read_text())["scenarios"]
    assert {(s["idle"], s["admin_split"]) for s in scenarios} == {
        (i, a) for i in ("usage", "quota", "even", "platform") for a in ("weighted", "even")
    }
    html = tmp_path / "compare.html"
    code, _, _ = run(
        "chargeback", "compare", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--out", html
    )
    assert code == 0 and "<table>" in html.read_text()
    code, _, stderr = run(
        "chargeback",
        "compare",
        "--policy",
        EXAMPLE,
        "--usage",
        usage,
        "--period",
        "2026-11",
        "--out",
        tmp_path / "x.pdf",
    )
    assert code == 1 and ".json or an .html" in stderr


def test_a_month_in_progress_is_charged_up_to_now_and_says_so(usage: Path, tmp_path: Path) -> None:
    out = tmp_path / "C.json"
    code, _, stderr = run(
        "chargeback", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--out", out,
        "--as-of", "2026-11-03T00:00:00Z",
    )  # fmt: skip
    assert code == 0, stderr
    assert "2026-11 has not ended: charged up to 2026-11-03 00:00:00 UTC" in stderr
    data = json.loads(out.read_text())
    assert data["period"] == {"start": "2026-11-01T00:00:00Z", "end": "2026-11-03T00:00:00Z"}
    assert data["teams"]["recsys"]["gpu_hours"] == 4 * 48  # its 720 h interval, cut at "now"
    html = tmp_path / "i.html"
    code, _, _ = run(
        "chargeback", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--out", html,
        "--format", "html", "--team", "recsys", "--as-of", "2026-11-03T00:00:00Z",
    )  # fmt: skip
    assert code == 0 and "period 2026-11 to date" in html.read_text()
    full = tmp_path / "F.json"
    code, _, stderr = run(
        "chargeback", "--policy", EXAMPLE, "--usage", usage, "--period", "2026-11", "--out", full,
        "--as-of", "2026-11-03T00:00:00Z", "--full-period",
    )  # fmt: skip
    assert code == 0 and "has not ended" not in stderr
    assert json.loads(full.read_text())["period"]["end"] == "2026-12-01T00:00:00Z"


def test_a_period_not_begun_is_refused_and_one_without_usage_warns(usage: Path) -> None:
    args = ("chargeback", "--policy", EXAMPLE, "--usage", usage)
    code, _, stderr = run(*args, "--period", "2026-12", "--as-of", "2026-11-20T00:00Z")
    assert code == 1 and "2026-12 has not started yet" in stderr
    code, stdout, stderr = run(*args, "--period", "2025-01")
    assert code == 0 and json.loads(stdout)["platform_cents"] > 0
    assert "warning: no GPU use in 2025-01" in stderr
