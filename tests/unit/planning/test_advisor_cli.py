"""`commons advise` end to end: real files in, a valid policy, JSON and a PNG out, clear refusals."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucommons.cli.main import app
from gpucommons.policy import dump_policy, parse_policy
from gpucommons.testing.builders import make_policy
from gpucommons.testing.repo_data import trace_file

HELIOS_FILE = "helios_earth_vc_usage_2020-05_5min.csv"
runner = CliRunner()


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["advise", *(str(a) for a in args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def small_policy(tmp_path: Path) -> Path:
    policy = (
        make_policy().pool("gpu", nodes=2, gpus_per_node=8).team("nlp", gpu=8).team("cv", gpu=8).preemption()
    ).build()
    path = tmp_path / "commons.yaml"
    path.write_text(dump_policy(policy))
    return path


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    rows = ["job_id,team,submit_time_s,duration_s,gpus"]
    rows += [f"n{i},nlp,{i * 600},3600,4" for i in range(12)]  # nlp: up to 24 GPUs at once
    rows += [f"c{i},cv,{i * 3600},1800,2" for i in range(4)]  # cv: 2 GPUs now and then
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def helios_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A policy matching the Helios Earth file: its 16 VCs with their May 2020 quotas, 107 nodes of 8."""
    quotas: dict[str, int] = {}
    with trace_file(HELIOS_FILE).open() as handle:
        for row in csv.DictReader(handle):
            quotas.setdefault(row["team"], int(row["quota_gpus"]))
    lines = [
        "cluster:",
        "  name: helios-earth",
        "  pools: [{name: gpu, gpu_type: V100, nodes: 107, gpus_per_node: 8}]",
        "priority_classes: [{name: experiment, value: 100}]",
        "default_priority_class: experiment",
        "teams:",
        *(f"  - {{name: {team}, quota: {{gpu: {{gpus: {gpus}}}}}}}" for team, gpus in quotas.items()),
    ]
    path = tmp_path_factory.mktemp("helios") / "helios-earth.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert sum(quotas.values()) == 856
    return path


def test_helios_usage_gives_a_valid_policy_within_capacity(helios_policy: Path, tmp_path: Path) -> None:
    out, plot = tmp_path / "proposed.yaml", tmp_path / "advice.png"
    code, stdout, stderr = run(
        "--policy", helios_policy, "--history", trace_file(HELIOS_FILE), "--out", out, "--plot", plot
    )
    assert code == 0, stderr
    proposed = parse_policy(out.read_text())
    nominal = {t.name: t.nominal("gpu").gpus for t in proposed.teams}
    assert len(nominal) == 16
    assert sum(nominal.values()) == 856  # the whole pool is handed out, never more
    assert nominal["vc6YE"] > 208  # pending 55% of the time under 208
    assert nominal["vcJkd"] < 16  # asked for GPUs 11% of the time
    assert "vc6YE: asks for GPUs 96% of the time; demand while active p50 211, p95 268, peak 363" in stdout
    assert "pending 55% of the time" in stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_helios_json_says_every_team_and_pool(helios_policy: Path) -> None:
    code, stdout, _ = run(
        "--policy", helios_policy, "--history", trace_file(HELIOS_FILE), "--json", "--whole-nodes"
    )
    assert code == 0
    data = json.loads(stdout)
    assert data["history"] == {"kind": "samples", "start_s": 0, "end_s": 2678400, "step_s": 300, "teams": 16}
    assert data["rule"]["whole_nodes"] is True
    assert data["pools"][0]["nominal_after"] <= 856
    assert all(t["proposed"]["nominal"] % 8 == 0 for t in data["teams"])
    vc6 = next(t for t in data["teams"] if t["team"] == "vc6YE")
    assert vc6["demand"]["peak"] == 363
    assert vc6["demand"]["censored_fraction"] == pytest.approx(0.55, abs=0.005)


def test_a_trace_history_and_a_check_replay_under_both_policies(
    small_policy: Path, small_trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "proposed.yaml"
    code, stdout, stderr = run(
        "--policy",
        small_policy,
        "--history",
        small_trace,
        "--rule",
        "--check-trace",
        small_trace,
        "--json",
        "--out",
        out,
    )
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["history"]["kind"] == "trace"
    nominal = {t["team"]: t["proposed"]["nominal"] for t in data["teams"]}
    assert nominal["nlp"] > nominal["cv"] and sum(nominal.values()) == 16
    check = data["check"]
    assert check["engine"] == "commons"
    assert check["current"]["jobs"] == check["proposed"]["jobs"] == 16
    assert check["proposed"]["teams"]["nlp"]["nominal_gpus"] == nominal["nlp"]
    assert parse_policy(out.read_text()).team("nlp").nominal("gpu").gpus == nominal["nlp"]


def test_the_table_shows_before_and_after_and_the_replay_side_by_side(
    small_policy: Path, small_trace: Path
) -> None:
    code, stdout, _ = run(
        "--policy", small_policy, "--history", small_trace, "--rule", "--check-trace", small_trace
    )
    assert code == 0
    assert "nominal" in stdout and "8 →" in stdout
    assert "demand = the GPUs of each job from its submission" in stdout
    assert "replay of trace.csv (engine commons): current vs proposed" in stdout
    assert "guarantee violation" in stdout


def test_bad_usage_rows_end_with_exit_1_and_their_line_numbers(small_policy: Path, tmp_path: Path) -> None:
    bad = tmp_path / "usage.csv"
    bad.write_text("time_s,team,running_gpus,pending_gpus\n0,nlp,4,0\n300,nlp,four,0\n600,cv,1,-2\n")
    code, stdout, stderr = run("--policy", small_policy, "--history", bad)
    assert code == 1
    assert f"{bad}: line 3: running_gpus must be a whole number of GPUs, got 'four'" in stderr
    assert f"{bad}: line 4: pending_gpus must be at least 0, got '-2'" in stderr
    assert "Traceback" not in stdout + stderr


def test_bad_trace_rows_are_refused_by_the_trace_reader(small_policy: Path, tmp_path: Path) -> None:
    bad = tmp_path / "trace.csv"
    bad.write_text("job_id,team,submit_time_s,duration_s,gpus\n1,nlp,0,10,0\n")
    code, _, stderr = run("--policy", small_policy, "--history", bad)
    assert code == 1
    assert "line 2: gpus must be at least 1" in stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--history", "missing.csv"], "missing.csv: no such trace file"),
        (["--rule", "--percentile", "150"], "percentile must be between 0 and 100"),
        (["--engine", "slurm", "--check-trace", "TRACE"], "--engine 'slurm'"),
        (["--objective", "speed"], "--objective 'speed': choose one of wait, guarantee, balanced"),
        (["--validate", "25%"], "--validate '25%': give last:P%"),
        (["--max-change", "lots"], "--max-change 'lots'"),
        (["--half-life", "soon"], "--half-life: 'soon' is not a duration"),
        (["--fit-window", "soon"], "--fit-window: 'soon' is not a duration"),
        (["--fit-window", "0s"], "--fit-window must be longer than 0s (or all)"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--rule", "--objective", "wait"], "--rule and --objective exclude each other"),
        (["--folds", "0"], "--folds must be at least 1"),
        (["--folds", "500"], "--folds 500: fold "),
        (["--floor", "150%"], "--floor '150%': give a share of an equal split between 0% and 100%"),
        (["--floor", "half"], "--floor 'half': give a share such as 10%"),
    ],
)
def test_bad_options_end_with_exit_1_and_a_message(
    small_policy: Path, small_trace: Path, args: list[str], message: str
) -> None:
    args = [str(small_trace) if a == "TRACE" else a for a in args]
    if "--history" not in args:
        args = ["--history", str(small_trace), *args]
    code, _, stderr = run("--policy", small_policy, *args)
    assert code == 1
    assert message in stderr


def test_teams_not_in_the_policy_are_ignored_with_a_warning(small_policy: Path, tmp_path: Path) -> None:
    usage = tmp_path / "usage.csv"
    usage.write_text(
        "time_s,team,running_gpus,pending_gpus\n0,nlp,4,0\n0,ghost,8,0\n300,nlp,2,0\n300,ghost,8,0\n"
    )
    code, _, stderr = run("--policy", small_policy, "--history", usage)
    assert code == 0
    assert "ignored 1 GPU-hours of team 'ghost': not a team of the policy" in stderr


def _starved_trace(tmp_path: Path) -> tuple[Path, Path]:
    """nlp runs 4-GPU jobs all the time on 8 GPUs of quota; cv holds 24 and uses 16 a few hours a day;
    rl has no quota and runs a 2-GPU job every 4 hours."""
    policy = (
        make_policy()
        .pool("gpu", nodes=4, gpus_per_node=8)
        .team("nlp", gpu=8)
        .team("cv", gpu=24)
        .team("rl", gpu=0)
    )
    policy_path = tmp_path / "commons.yaml"
    policy_path.write_text(dump_policy(policy.preemption().build()))
    rows = ["job_id,team,submit_time_s,duration_s,gpus"]
    rows += [f"n{k},nlp,{k * 1800},7200,4" for k in range(8 * 48)]
    rows += [f"c{d}-{i},cv,{d * 6 * 3600 + 7},{4 * 3600},8" for d in range(8 * 4) for i in range(2)]
    rows += [f"r{k},rl,{k * 4 * 3600 + 11},3600,2" for k in range(8 * 6)]
    trace = tmp_path / "starved.csv"
    trace.write_text("\n".join(rows) + "\n")
    return policy_path, trace


def test_a_trace_is_advised_by_replay_and_the_proposal_is_written_once_the_checks_accept_it(
    tmp_path: Path,
) -> None:
    policy, trace = _starved_trace(tmp_path)
    out, plot = tmp_path / "proposed.yaml", tmp_path / "waits.png"
    code, stdout, stderr = run(
        "--policy", policy, "--history", trace, "--max-replays", "8", "--workers", "2", "--json",
        "--out", out, "--plot", plot,
    )  # fmt: skip
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["method"] == "replay" and data["objective"]["name"] == "balanced"
    assert data["decision"]["proposal"] is True, data["decision"]["why"]
    nominal = {t["team"]: t["proposed"]["nominal"] for t in data["teams"]}
    assert nominal["nlp"] > 8 and sum(nominal.values()) == 32
    nlp = next(t for t in data["teams"] if t["team"] == "nlp")
    assert nlp["validation_p95_s"][1] <= nlp["validation_p95_s"][0]
    labels = {c["label"] for c in data["candidates"] if c["baseline"]}
    assert labels == {"today", "equal split", "proportional to mean demand", "median rule"}
    assert data["bootstrap"]["resamples"] == 500
    written = parse_policy(out.read_text())
    assert {t.name: t.nominal("gpu").gpus for t in written.teams} == nominal
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["search"]["replays"] <= 8 + 2 * 10


def test_the_table_says_today_to_proposed_the_baselines_and_why(tmp_path: Path) -> None:
    policy, trace = _starved_trace(tmp_path)
    code, stdout, _ = run("--policy", policy, "--history", trace, "--max-replays", "6", "--workers", "1")
    assert code == 0
    assert "objective: balanced" in stdout
    assert "p95 wait validation" in stdout and "8 → " in stdout
    assert "equal split" in stdout and "median rule" in stdout
    assert "decision:" in stdout and "confidence:" in stdout
    assert "• nlp: 8 → " in stdout


def test_when_nothing_beats_today_no_policy_is_written_and_the_reason_is_given(
    small_policy: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "calm.csv"
    rows = ["job_id,team,submit_time_s,duration_s,gpus"]
    rows += [f"n{k},nlp,{k * 600},300,1" for k in range(100)] + [
        f"c{k},cv,{k * 600 + 5},300,1" for k in range(100)
    ]
    trace.write_text("\n".join(rows) + "\n")
    out = tmp_path / "proposed.yaml"
    code, stdout, stderr = run(
        "--policy", small_policy, "--history", trace, "--max-replays", "6", "--workers", "1", "--out", out
    )
    assert code == 0, stderr
    assert "keep today's quotas" in stdout
    assert not out.exists() and "not written" in stderr


def test_a_sampled_usage_file_cannot_be_replayed_so_an_objective_is_refused(
    helios_policy: Path,
) -> None:
    code, _, stderr = run(
        "--policy", helios_policy, "--history", trace_file(HELIOS_FILE), "--objective", "wait"
    )
    assert code == 1
    assert "sampled usage file, which cannot be replayed" in stderr


def test_folds_and_a_floor_show_in_the_table_and_the_json(tmp_path: Path) -> None:
    policy, trace = _starved_trace(tmp_path)
    args = ("--policy", policy, "--history", trace, "--max-replays", "6", "--workers", "1")
    code, stdout, stderr = run(*args, "--folds", "2", "--floor", "50%", "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["objective"]["folds"] == 2 and data["objective"]["floor_share"] == 0.5
    folds = data["windows"]["folds"]
    assert len(folds) == 2 and folds[0]["start_s"] == data["windows"]["validation"]["start_s"]
    assert (
        folds[0]["end_s"] == folds[1]["start_s"]
        and folds[1]["end_s"] == data["windows"]["validation"]["end_s"]
    )
    assert all(len(c["folds"]) == 2 for c in data["candidates"])
    nominal = {t["team"]: t["proposed"]["nominal"] for t in data["teams"]}
    # Half of an equal split of 32 GPUs among three teams is 5; never above today's (rl has 0).
    assert nominal["cv"] >= 5 and nominal["nlp"] >= 5 and sum(nominal.values()) == 32
    code, stdout, _ = run(*args, "--folds", "2", "--floor", "50%")
    assert code == 0
    stdout = " ".join(stdout.split())  # the console wraps long lines
    assert "in 2 folds, each replayed on its own" in stdout
    assert "floor: no team below 50% of an equal split of its pool" in stdout
