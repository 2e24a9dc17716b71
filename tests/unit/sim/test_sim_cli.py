"""`commons simulate`, `commons whatif` and `commons bench`: files in, files out, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucommons.cli.main import app

POLICY = """
cluster:
  name: t
  pools: [{name: gpu, gpu_type: T4, nodes: 1, gpus_per_node: 8}]
priority_classes:
  - {name: high, value: 1000, grace_period: 0s}
  - {name: low, value: 100, grace_period: 0s}
default_priority_class: low
teams:
  - {name: a, quota: {gpu: {gpus: 4}}, preemption: {reclaim: any}}
  - {name: b, quota: {gpu: {gpus: 4}}, preemption: {reclaim: any}}
"""
TRACE = "job_id,team,submit_time_s,duration_s,gpus\na1,a,0,100,8\nb1,b,10,10,4\n"

runner = CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    policy = tmp_path / "commons.yaml"
    policy.write_text(POLICY)
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    return policy, trace


def simulate(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, ["simulate", *map(str, args)])
    return result.exit_code, result.output


def test_simulate_writes_contract_3_json(files: tuple[Path, Path], tmp_path: Path) -> None:
    policy, trace = files
    out = tmp_path / "r.json"
    code, output = simulate("--policy", policy, "--trace", trace, "--out", out, "--engine", "kueue", "-q")
    assert code == 0, output
    report = json.loads(out.read_text())
    summary = report["summary"]
    for key in (
        "jobs",
        "makespan_s",
        "gpu_utilization",
        "utilization_bound",
        "idle_while_waiting_gpu_hours",
        "preemptions",
        "lost_gpu_hours",
        "teams",
    ):
        assert key in summary
    assert set(summary["teams"]["a"]) >= {
        "jobs",
        "wait_p50_s",
        "wait_p95_s",
        "jct_mean_s",
        "gpu_hours",
        "borrowed_gpu_hours",
        "guarantee_violation_s",
        "finish_time_fairness",
    }
    assert report["jobs"][0] == {
        "job_id": "a1",
        "team": "a",
        "submit_s": 0,
        "first_start_s": 0,
        "finish_s": 110,
        "preemptions": 1,
        "lost_gpu_s": 0,
    }
    assert summary["preemptions"] == 1 and summary["engine"] == "kueue"
    # a1 took 110 s shared and would never fit a 4-GPU static quota: no fairness figure for a.
    assert summary["teams"]["a"]["finish_time_fairness"] is None


def test_simulate_names_the_placement_in_the_engine(files: tuple[Path, Path], tmp_path: Path) -> None:
    policy, trace = files
    out = tmp_path / "r.json"
    args = ("--policy", policy, "--trace", trace, "--out", out, "--engine", "kueue", "--placement", "spread")
    code, output = simulate(*args, "-q")
    assert code == 0, output
    assert json.loads(out.read_text())["summary"]["engine"] == "kueue+spread"


def test_simulate_is_byte_for_byte_deterministic(files: tuple[Path, Path], tmp_path: Path) -> None:
    policy, trace = files
    outs = [tmp_path / "1.json", tmp_path / "2.json"]
    for out in outs:
        assert simulate("--policy", policy, "--trace", trace, "--out", out, "-q")[0] == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()


def test_a_bad_trace_row_is_refused_with_its_line_number(files: tuple[Path, Path], tmp_path: Path) -> None:
    policy, trace = files
    trace.write_text(TRACE + "c1,a,soon,10,1\n")
    code, output = simulate("--policy", policy, "--trace", trace, "--out", tmp_path / "r.json")
    assert code == 1
    assert "line 4: submit_time_s must be a number of seconds, got 'soon'" in output
    assert "Traceback" not in output


def test_jobs_of_unknown_teams_are_refused_or_dropped_with_a_count(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, trace = files
    trace.write_text(TRACE + "x1,ghosts,0,10,1\nx2,ghosts,0,10,1\n")
    code, output = simulate("--policy", policy, "--trace", trace, "--out", tmp_path / "r.json")
    assert code == 1
    assert "2 job(s): team 'ghosts' is not in the policy" in output and "--drop-unknown" in output
    code, output = simulate(
        "--policy", policy, "--trace", trace, "--out", tmp_path / "r.json", "--drop-unknown"
    )
    assert code == 0, output
    assert "dropped 2 job(s): team 'ghosts' is not in the policy" in output
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["dropped_jobs"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--engine", "slurm"), "--engine 'slurm': choose one of commons, kueue, static"),
        (("--checkpoint-interval", "soon"), "--checkpoint-interval"),
        (("--placement", "tight"), "unknown placement 'tight'; choose one of: none, spread, pack"),
        (("--engine", "kueue+spread", "--placement", "pack"), "names a placement already"),
    ],
)
def test_bad_options_exit_1_with_a_message(
    files: tuple[Path, Path], tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    policy, trace = files
    code, output = simulate("--policy", policy, "--trace", trace, "--out", tmp_path / "r.json", *args)
    assert code == 1 and message in output


def test_missing_files_exit_1_naming_the_file(files: tuple[Path, Path], tmp_path: Path) -> None:
    policy, _ = files
    code, output = simulate(
        "--policy", policy, "--trace", tmp_path / "nope.csv", "--out", tmp_path / "r.json"
    )
    assert code == 1 and "nope.csv: no such trace file" in output
    code, output = simulate(
        "--policy", tmp_path / "nope.yaml", "--trace", tmp_path / "x", "--out", tmp_path / "r"
    )
    assert code == 1 and "nope.yaml" in output


def test_a_checkpoint_interval_for_every_job_turns_saved_preemptions_into_lost_work(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, trace = files
    out = tmp_path / "r.json"
    assert (
        simulate("--policy", policy, "--trace", trace, "--out", out, "--checkpoint-interval", "4s", "-q")[0]
        == 0
    )
    # a1 is stopped at t=10 with its last checkpoint at 8: 2 s × 8 GPUs lost.
    assert json.loads(out.read_text())["jobs"][0]["lost_gpu_s"] == 16


def test_whatif_prints_a_side_by_side_table_and_writes_a_self_contained_html_report(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, trace = files
    out = tmp_path / "report.html"
    result = runner.invoke(
        app,
        [
            "whatif",
            "--policy",
            str(policy),
            "--trace",
            str(trace),
            "--out",
            str(out),
            "--engine",
            "commons",
            "--engine",
            "static",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "GPU utilization" in result.output and "commons" in result.output and "static" in result.output
    page = out.read_text()
    assert page.count("<svg") == 2
    # Self-contained: nothing to fetch (XML namespace URIs in the SVG are names, not requests).
    assert "<script" not in page and "<link" not in page and 'src="http' not in page


def test_whatif_compares_quota_only_kueue_with_kueue_as_kube_scheduler_places_it(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, trace = files
    out = tmp_path / "report.html"
    args = ["whatif", "--policy", str(policy), "--trace", str(trace), "--out", str(out)]
    result = runner.invoke(app, [*args, "--engine", "kueue", "--engine", "kueue+spread"])
    assert result.exit_code == 0, result.output
    assert "kueue+spread" in result.output and "kueue+spread" in out.read_text()


@pytest.mark.slow
def test_bench_kueue_baseline_prints_figures_beside_kueues() -> None:
    result = runner.invoke(app, ["bench", "kueue-baseline", "--engine", "commons", "--cohorts", "1"])
    assert result.exit_code == 0, result.output
    assert "351.0 s" in result.output and "time to admission, small" in result.output
    assert "66.0 s" in result.output  # the capacity bound does not depend on the number of cohorts


def test_the_summary_names_the_fifo_reference_for_what_it_is_and_prints_hours_unambiguously(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`utilization_bound` is a greedy FIFO with backfill, which a policy can beat: not a "bound".
    `{:,}` of 165.936 printed "165.936", which reads like 165,936 in many countries."""
    from gpucommons.cli import simulate as cli_simulate

    printed: list[str] = []
    monkeypatch.setattr(cli_simulate.console, "print", lambda *a, **k: printed.append(" ".join(map(str, a))))
    summary = {
        "teams": {}, "gpu_utilization": 0.717, "utilization_bound": 0.716, "makespan_s": 3600,
        "preemptions": 3, "lost_gpu_hours": 12.25, "idle_while_waiting_gpu_hours": 165.936,
    }  # fmt: skip
    cli_simulate.print_summary(summary, "t")
    line = next(p for p in printed if p.startswith("utilization"))
    assert "greedy FIFO reference 71.6%" in line and "bound" not in line, line
    assert "idle while waiting 165.9 GPU-h" in line and "lost 12.2 GPU-h" in line, line
