"""Every table a command prints keeps ids, names and headers whole in an 80-column terminal and when
piped (no COLUMNS: rich would assume 80 and cut), as `commons tasks` does (cli/tables.py).

The file commands run as a user runs them: in a subprocess, once in a pseudo-terminal 80 columns
wide (COLUMNS=80) and once into a pipe. The server commands (audit, token list) and the cluster
ones (k8s apply, slurm apply) print their rows through the same `print_table`, checked here on a
console of 80 columns and on a pipe.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table
from gpucommons.ledger import write_usage_csv
from gpucommons.testing.chargeback import hours_interval
from gpucommons.testing.repo_data import trace_file

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
HELIOS_POLICY = REPO / "examples" / "helios-earth.yaml"
HELIOS_USAGE = trace_file("helios_earth_vc_usage_2020-05_5min.csv")
HELIOS_TEAMS = ("vc3sl", "vc6YE", "vc8Sj", "vcJLV", "vcJkd", "vcLJZ", "vcMod", "vcSoL", "vcTJs", "vccaA")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: Names as long as real teams' (63 characters are allowed): an 80-column table cannot cut them.
TEAMS = ("natural-language-processing", "computer-vision-research", "recommendation-systems")
POLICY = f"""
cluster:
  name: narrow
  pools:
    - {{name: h100-sxm5-80gb, gpu_type: H100, nodes: 2, gpus_per_node: 8, price_per_gpu_hour: 2.50}}
priority_classes:
  - {{name: production, value: 1000, grace_period: 0s}}
  - {{name: experiment, value: 100, grace_period: 0s}}
default_priority_class: experiment
cohorts: [{{name: research-and-development}}]
teams:
  - {{name: {TEAMS[0]}, cohort: research-and-development, quota: {{h100-sxm5-80gb: {{gpus: 8}}}}}}
  - {{name: {TEAMS[1]}, cohort: research-and-development, quota: {{h100-sxm5-80gb: {{gpus: 4}}}}}}
  - {{name: {TEAMS[2]}, cohort: research-and-development, quota: {{h100-sxm5-80gb: {{gpus: 4}}}}}}
"""


def in_terminal(args: Sequence[str | Path], cwd: Path, columns: int = 80) -> str:
    """`commons ARGS` in a pseudo-terminal `columns` wide (COLUMNS too), escape codes removed."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "xterm"}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpucommons", *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    finally:
        os.close(leader)
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def piped(args: Sequence[str | Path], cwd: Path) -> str:
    """`commons ARGS | cat` with no COLUMNS (the audit's case): in this process, whose stdout is then
    not a terminal, as in a pipe."""
    here = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner(env={"COLUMNS": None, "LINES": None}).invoke(app, [str(a) for a in args])
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return result.stdout


def words(text: str) -> set[str]:
    return set(text.split())


def assert_whole(text: str, names: Sequence[str], headers: Sequence[str] = ()) -> None:
    assert "…" not in text, text
    found = words(text)
    for name in names:
        assert name in found, f"{name!r} not whole in:\n{text}"
    for header in headers:
        assert header in text, f"header {header!r} not whole in:\n{text}"


def header_line(text: str, first: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [first])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("narrow")
    (root / "commons.yaml").write_text(POLICY)
    rows = ["job_id,team,submit_time_s,duration_s,gpus"]
    for i in range(30):
        rows.append(f"j{i},{TEAMS[i % 3]},{i * 900},{3600 + 600 * (i % 4)},{(2, 4, 8)[i % 3]}")
    (root / "trace.csv").write_text("\n".join(rows) + "\n")
    ledger = [
        hours_interval(TEAMS[0], "h100-sxm5-80gb", gpus=8, start_h=0, end_h=100, priority="production"),
        hours_interval(TEAMS[1], "h100-sxm5-80gb", gpus=6, start_h=10, end_h=300),
        hours_interval(TEAMS[2], "h100-sxm5-80gb", gpus=2, start_h=0, end_h=700),
    ]
    buffer = io.StringIO()
    write_usage_csv(ledger, buffer)
    (root / "usage.csv").write_text(buffer.getvalue())
    return root


ADVISE_RULE = ("advise", "--policy", HELIOS_POLICY, "--history", HELIOS_USAGE)
RULE_HEADERS = ("team", "active", "p50", "nominal", "borrow limit", "lend limit")


def test_advise_keeps_team_names_and_headers_whole_at_80_columns(tmp_path: Path) -> None:
    """The audit's command: `te…  act…  …  p…` and `vc…` before."""
    text = in_terminal([*ADVISE_RULE, "--out", "p.yaml"], tmp_path)
    assert_whole(text, HELIOS_TEAMS, RULE_HEADERS)
    table = text[text.index("team ") : text.index("active: share")]
    assert all(len(line.rstrip()) <= 80 for line in table.splitlines()), table
    # the columns the bullets repeat went first; --wide brings them back
    assert "borrows" not in header_line(text, "team").split()
    wide = header_line(in_terminal([*ADVISE_RULE, "--wide"], tmp_path), "team").split()
    assert {"active", "peak", "borrows", "covered"} <= set(wide)


def test_advise_piped_prints_every_column_whole(tmp_path: Path) -> None:
    text = piped([*ADVISE_RULE, "--out", "p.yaml"], tmp_path)
    assert_whole(text, HELIOS_TEAMS, (*RULE_HEADERS, "borrows", "covered", "peak", "p95"))
    row = next(line for line in text.splitlines() if line.startswith("vc6YE"))
    assert row.split()[:3] == ["vc6YE", "96%", "211"]  # one line per team, nothing cut


def test_advise_by_replay_keeps_names_whole(files: Path) -> None:
    args = ("advise", "--policy", "commons.yaml", "--history", "trace.csv", "--workers", "1")
    args += ("--max-replays", "4", "--validate", "last:40%")
    for text in (in_terminal(args, files), piped(args, files)):
        assert_whole(text, TEAMS, ("p95 wait validation", "sizing", "rules kept"))


def test_simulate_and_whatif_keep_names_whole(files: Path) -> None:
    simulate = (
        "simulate",
        "--policy",
        "commons.yaml",
        "--trace",
        "trace.csv",
        "--out",
        "r.json",
        "--no-fairness",
    )
    whatif = ("whatif", "--policy", "commons.yaml", "--trace", "trace.csv", "--out", "w.html")
    whatif += ("--engine", "commons", "--engine", "static")
    for text in (in_terminal(simulate, files), piped(simulate, files)):
        assert_whole(text, TEAMS, ("team", "quota", "p95", "broken"))
    for text in (in_terminal(whatif, files), piped(whatif, files)):
        assert_whole(text, (*TEAMS, "commons", "static"))


def test_simulate_legend_explains_only_the_columns_shown_and_breaks_between_items(files: Path) -> None:
    simulate = ("simulate", "--policy", "commons.yaml", "--trace", "trace.csv", "--out", "r.json")
    for columns in (60, 80, 200):
        text = in_terminal(simulate, files, columns=columns)
        lines = text.splitlines()
        header = next(line for line in lines if line.startswith("team "))
        for column, item in (("JCT", "JCT: mean completion time"), ("fair", "fair: JCT ÷ JCT under static")):
            assert (item in text) == (column in header.split()), (columns, column, text)
        assert "p50/p95: wait to first start" in text
        assert not any(line.rstrip().endswith("·") for line in lines), text
        # Both sides are exercised: the narrowest drops JCT, the widest shows it.
        assert ("JCT" in header.split()) == (columns == 200), header
    piped_text = piped(simulate, files)
    assert "JCT: mean completion time · borrow: hours above quota" in piped_text


def test_chargeback_and_policy_check_keep_names_whole(files: Path) -> None:
    charge = ("chargeback", "--policy", "commons.yaml", "--usage", "usage.csv", "--period", "2026-11")
    charge += ("--as-of", "2030-01-01T00:00:00Z")
    for text in (
        in_terminal([*charge, "--out", "c.json"], files),
        piped([*charge, "--out", "c.json"], files),
    ):
        assert_whole(text, TEAMS, ("GPU-hours", "total"))
    compare = ("chargeback", "compare", *charge[1:])
    for text in (in_terminal(compare, files), piped(compare, files)):
        assert_whole(text, (*TEAMS, "platform"))
    check = ("policy", "check", "commons.yaml")
    for text in (in_terminal(check, files), piped(check, files)):
        assert_whole(text, (*TEAMS, "h100-sxm5-80gb", "research-and-development"))


def test_doctor_keeps_team_names_and_paths_whole(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMONS_URL", "http://127.0.0.1:9")  # nothing answers
    monkeypatch.delenv("COMMONS_POLICY", raising=False)
    monkeypatch.delenv("COMMONS_DATABASE_URL", raising=False)
    # A home team accounts could reach (pytest's tmp_path lies under a 0700 directory).
    base = Path(tempfile.mkdtemp(prefix="commons-narrow-", dir="/tmp"))
    base.chmod(0o711)
    args = ("doctor", "--policy", "commons.yaml", "--home", base / "home")
    try:
        terminal, pipe = in_terminal(args, files), piped(args, files)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for text in (terminal, pipe):
        assert "…" not in text
        for team in TEAMS:
            assert team in text
    assert {"TEAM", "SEPARATED", "BY"} <= words(terminal)  # the grid in a terminal (headers may wrap)
    assert "separated from other teams by:" in pipe  # blocks of text in a pipe
    path_line = next(line for line in pipe.splitlines() if line.startswith("task PATH"))
    assert "PATH=" in path_line and "…" not in path_line  # a PATH is a long word: folded, not cut


# -- the server's and the clusters' tables: the same print_table, on 80 columns and on a pipe ---------


def printed(cols: Sequence[Col], rows: list[list[str]], terminal: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=terminal, color_system=None, highlight=False)
    print_table(console, cols, rows)
    return out.getvalue()


def test_audit_and_token_tables_keep_ids_and_names_whole() -> None:
    from gpucommons.api.identity import AuditEntry, TokenInfo
    from gpucommons.cli import audit, token

    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    entry = AuditEntry(
        id=1,
        at=at,
        actor="platform-admin@research.example.org",
        credential_id=None,
        action="policy.apply",
        method="PUT",
        path="/api/v1/policy",
        team=TEAMS[0],
        target="policy-version-12",
        outcome="ok",
        status_code=200,
        remote_addr="2001:db8:1234:5678::42",
    )
    info = TokenInfo(
        id="tok_4f9c2a7e1b3d5f60",
        name="okta-scim-provisioning",
        kind="api",
        subject="service:okta-scim-provisioning",
        role="team_admin",
        team=TEAMS[1],
        created_at=at,
        created_by="alice@research.example.org",
    )
    for terminal in (True, False):
        text = printed(audit.AUDIT_COLUMNS, audit._rows([entry]), terminal)
        assert_whole(text, [entry.actor or "", "policy.apply", f"team={TEAMS[0]},", "policy-version-12"])
        text = printed(token._columns(False), token._rows([info], False), terminal)
        assert_whole(text, [info.id, info.name, info.subject, f"team_admin@{TEAMS[1]}"])


def test_k8s_and_slurm_apply_tables_keep_names_whole() -> None:
    from gpucommons.backends.kubernetes.apply import Action, ApplyReport, ObjectResult
    from gpucommons.backends.slurm.accounts_plan import Action as SlurmAction
    from gpucommons.backends.slurm.accounts_plan import Change
    from gpucommons.cli import k8s_apply, slurm_apply

    name = f"gpucommons-{TEAMS[0]}-h100-sxm5-80gb-local-queue"
    report = ApplyReport(
        (ObjectResult("LocalQueue", f"team-{TEAMS[0]}", name, Action.CREATED, "not checked by the server"),),
        dry_run=True,
    )
    change = Change(SlurmAction.CREATE, "association", f"{TEAMS[1]}/commons-{TEAMS[1]}", note="new")
    for terminal in (True, False):
        text = printed(k8s_apply.REPORT_COLUMNS, k8s_apply.report_rows(report), terminal)
        assert_whole(text, ["LocalQueue", f"team-{TEAMS[0]}", name])
        text = printed(slurm_apply.PLAN_COLUMNS, slurm_apply.plan_rows([change], dry_run=True), terminal)
        assert_whole(text, ["association", f"{TEAMS[1]}/commons-{TEAMS[1]}"])


def test_columns_that_must_stay_are_printed_whole_even_when_wider_than_the_terminal() -> None:
    """Nothing left to drop and still too wide: the lines are longer than the terminal (which wraps
    them), never cropped at its edge."""
    cols = (Col("TEAM", keep=True), Col("POOL", keep=True), Col("NOTE", wrap=True))
    rows = [[TEAMS[0], "h100-sxm5-80gb", "a note that wraps over several lines when space is short"]]
    out = io.StringIO()
    print_table(Console(file=out, width=40, force_terminal=True, color_system=None), cols, rows)
    assert_whole(out.getvalue(), [TEAMS[0], "h100-sxm5-80gb"])


def _help_at_80(command: str) -> str:
    args = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80", "NO_COLOR": "1", "TERM": "xterm"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["simulate", "submit", "tasks", ""])
def test_help_at_80_columns_keeps_option_names_whole_and_flags_without_a_type(command: str) -> None:
    """typer 0.29 shows a type beside every option in its rich help, `<bool>` for flags too, and one
    table for all options: `--restart-overh…` beside help squeezed to a few characters."""
    shown = _help_at_80(command)
    assert "…" not in shown, shown
    assert "<bool>" not in shown and " range>" not in shown, shown
    assert all(len(line) <= 80 for line in shown.splitlines()), shown


def test_simulate_help_at_80_columns_gives_each_option_room_for_its_help() -> None:
    shown = _help_at_80("simulate")
    for option, words in {
        "--restart-overhead": "Seconds a preempted job pays",
        "--checkpoint-interval": "Give jobs without one this",
        "--engine": "commons | kueue | static",
        "--fairness": "Also replay under `static`",
        "--drop-unknown": "Drop jobs of unknown teams",
    }.items():
        line = next(line for line in shown.splitlines() if f"│ {option} " in line or f" {option} " in line)
        assert words in line, (option, shown)
