"""Issue 14, part 3: a job submitted with plain `sbatch` holds GPUs too — GPU Commons shows it in
`commons tasks` as its account's team's, counts it (nothing is placed on its GPUs, reclaim never
picks it), and meters it in the ledger that invoices are computed from."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from tests.e2e.slurm.conftest import SlurmPlatform

pytestmark = pytest.mark.slow


def test_a_plain_sbatch_job_is_seen_counted_never_preempted_and_billed_to_its_accounts_team(
    slurm_platform: Callable[..., SlurmPlatform], tmp_path: Path
) -> None:
    p = slurm_platform()
    # The job runs until the test lets it end, not for a fixed time: with `sleep 12` a slow machine
    # reached b's reclaim after the job had ended, so b fitted on its node and nothing was reclaimed.
    release = tmp_path / "release"
    submitted_at = time.time()
    job = p.cluster.run(
        "sbatch", "--parsable", "--account=a", "--job-name=by-hand", "--nodes=1", "--gres=gpu:8",
        "--output=/dev/null", "--wrap", f"while [ ! -e {release} ]; do sleep 0.2; done",
    ).stdout.strip()  # fmt: skip

    def by_hand() -> dict[str, object] | None:
        tasks = p.api("/api/v1/tasks?limit=1000")
        assert isinstance(tasks, list)
        return next((t for t in tasks if t["name"] == "by-hand"), None)

    p.wait(lambda: by_hand() is not None, timeout=20, what="the plain sbatch job to show up")
    found = by_hand()
    assert found is not None and (found["team"], found["state"], found["gpus"]) == ("a", "running", 8)
    assert "by-hand" in p.cli("tasks", "--team", "a").stdout

    # a borrows on top of it (8 + 16 of its 16 + 8 of b's idle), then b takes its quota back: the
    # victim is one of a's own tasks, never the job GPU Commons did not start.
    a = [p.submit("--team", "a", "--gpus", "8", "--", "sleep", "60"), p.submit_api("a", 8, "sleep", "60")]
    p.wait(lambda: all(p.states()[t] == "running" for t in a), timeout=20, what="a's tasks to run")
    b = [p.submit_api("b", 8, "sleep", "2") for _ in range(2)]
    p.wait(lambda: all(p.states()[t] == "succeeded" for t in b), timeout=40, what="b's tasks to run")
    # The victim's stop may be recorded after b's tasks ended: on a loaded CI machine (7 December
    # 2026) b's second task ran on the first's node before Slurm reported the victim stopped.
    p.wait(
        lambda: any(p.task(t)["restart_count"] == 1 for t in a), timeout=30, what="a's victim to be requeued"
    )
    assert sum(1 for t in a if p.task(t)["restart_count"] == 1) == 1, "one of a's tasks was reclaimed"
    assert p.states()[str(found["id"])] == "running", "the job GPU Commons did not start is untouched"

    release.touch()
    released_at = time.time()
    p.wait(lambda: p.states()[str(found["id"])] == "succeeded", timeout=30, what="the job's end")
    ended_at = time.time()
    assert job not in p.cluster.job_ids()
    out = tmp_path / "usage.csv"
    p.cli("usage", "export", "--out", str(out))
    (row,) = [r for r in csv.DictReader(io.StringIO(out.read_text())) if r["task_id"] == found["id"]]
    start = datetime.fromisoformat(row["start"].replace("Z", "+00:00")).timestamp()
    end = datetime.fromisoformat(row["end"].replace("Z", "+00:00")).timestamp()
    assert (row["team"], row["gpus"]) == ("a", "8")
    # Slurm's times are whole seconds, hence the second of slack at either end.
    assert submitted_at - 1 <= start and released_at - 1 <= end <= ended_at, "metered for the time it ran"
    p.cli("cancel", a[0])
    p.post(f"/api/v1/tasks/{a[1]}/cancel", {})
