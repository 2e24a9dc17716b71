"""What-if comparison: variants of policies × engines, one static baseline per policy."""

from __future__ import annotations

import pytest

from gpucommons.planning.whatif import compare, summary_rows, team_rows, variants_of
from gpucommons.sim import SimConfig, simulate
from gpucommons.testing.sim import job, policy, team

SHARED = policy(team("a", 4), team("b", 4))
SMALLER = policy(team("a", 2), team("b", 6))
JOBS = [job("a1", "a", 0, 10, 4), job("a2", "a", 0, 10, 4), job("b1", "b", 5, 10, 2)]


def test_labels_name_only_what_differs() -> None:
    assert [v.label for v in variants_of([("p.yaml", SHARED)], ["commons"])] == ["p.yaml"]
    assert [v.label for v in variants_of([("p.yaml", SHARED)], ["commons", "static"])] == [
        "commons",
        "static",
    ]
    labels = [v.label for v in variants_of([("a.yaml", SHARED), ("b.yaml", SMALLER)], ["kueue", "static"])]
    assert labels == ["a.yaml · kueue", "a.yaml · static", "b.yaml · kueue", "b.yaml · static"]


def test_each_policy_is_replayed_under_static_once_and_shared_by_its_variants(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def counting(policy, jobs, config, on_progress=None):  # type: ignore[no-untyped-def]
        calls.append(config.engine)
        return simulate(policy, jobs, config, on_progress)

    monkeypatch.setattr("gpucommons.planning.whatif.simulate", counting)
    variants = variants_of([("a", SHARED), ("b", SMALLER)], ["commons", "kueue", "static"])
    comparison = compare(variants, JOBS, SimConfig())
    assert calls.count("static") == 2  # one baseline per policy, reused by its `static` variant
    summaries = comparison.summaries()
    assert [s["engine"] for s in summaries] == ["commons", "kueue", "static"] * 2
    # Sharing: a2 borrows b's GPUs at once, is reclaimed at 5 by b1, resumes at 10 when a1 ends and
    # finishes at 15 (JCTs 10 + 15); static: a2 waits for a1 (10 + 20). Fairness 25/30.
    assert summaries[0]["teams"]["a"]["finish_time_fairness"] == round(25 / 30, 4)
    assert summaries[2]["teams"]["a"]["finish_time_fairness"] == 1.0


def test_tables_have_one_cell_per_variant() -> None:
    comparison = compare(variants_of([("p", SHARED)], ["commons", "static"]), JOBS, SimConfig())
    rows = summary_rows(comparison)
    assert rows[0] == ["GPU utilization", "100.0%", "50.0%"]
    assert [r[0] for r in team_rows(comparison)] == ["a", "b"]
    assert all(len(r) == 3 for r in rows + team_rows(comparison))
