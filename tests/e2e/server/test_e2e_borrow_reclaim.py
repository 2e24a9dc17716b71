"""Done-when of issue 4: two teams, borrowing, reclaim within the grace period, checkpoint, resume, ledger."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime
from pathlib import Path

import pytest
from tests.e2e.server.conftest import Platform

SCRIPT = str(Path(__file__).parent.parent / "task_script.py")
GRACE_S = 10.0

pytestmark = pytest.mark.slow


def journal(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_owner_reclaims_borrowed_gpus_and_the_borrower_resumes_from_its_checkpoint(
    platform_factory: object, tmp_path: Path
) -> None:
    platform: Platform = platform_factory()  # type: ignore[operator]
    notes = tmp_path / "journal.jsonl"

    # Team a asks for all 4 GPUs: 2 of its own, 2 borrowed from team b, which is idle.
    borrower = platform.submit(
        "--team",
        "a",
        "--gpus",
        "4",
        "--checkpoint",
        "on-signal",
        "--name",
        "big",
        "--",
        sys.executable,
        SCRIPT,
        str(notes),
        "1200",
        "0.1",
        "0.002",
    )
    platform.wait(lambda: platform.task(borrower)["state"] == "running", what="the borrower to run")
    assert platform.task(borrower)["borrowed_gpus"] == 2
    teams = {t["name"]: t for t in platform.api("/api/v1/teams")}  # type: ignore[union-attr]
    assert teams["a"]["used_gpus"] == 4 and teams["a"]["borrowed_gpus"] == 2
    platform.wait(lambda: any(n["event"] == "start" for n in journal(notes)), what="the borrower to start")

    # Team b, the owner, submits: it must get its 2 GPUs back within the grace period.
    owner = platform.submit(
        "--team", "b", "--gpus", "2", "--name", "owner", "--", sys.executable, SCRIPT, str(notes), "5"
    )
    platform.wait(lambda: platform.task(owner)["state"] in ("running", "succeeded"), what="the owner to run")
    owner_task = platform.task(owner)
    waited = ts(str(owner_task["started_at"])) - ts(str(owner_task["submitted_at"]))
    assert waited <= GRACE_S + 1.0, f"the owner waited {waited:.1f}s for its own quota"

    # The borrower got SIGTERM, saved its state, reported it, and went back to the queue.
    events = journal(notes)
    saved = [n for n in events if n["event"] == "sigterm-saved" and n["task"] == borrower]
    assert len(saved) == 1 and saved[0]["restart"] == 0
    history = platform.api(f"/api/v1/tasks/{borrower}/events")
    kinds = [e["kind"] for e in history]  # type: ignore[index]
    assert "signal" in kinds and "checkpoint" in kinds
    reported = next(e for e in history if e["kind"] == "checkpoint")  # type: ignore[index]
    assert Path(str(reported["message"]).split(" at ", 1)[1]).is_file()
    assert ("running", "preempting") in [(e["from_state"], e["to_state"]) for e in history]  # type: ignore[index]
    assert ("preempting", "pending") in [(e["from_state"], e["to_state"]) for e in history]  # type: ignore[index]

    # When the owner is done, the borrower resumes from its checkpoint with COMMONS_RESTART_COUNT=1.
    platform.wait(
        lambda: platform.task(borrower)["state"] == "succeeded", timeout=60, what="the borrower to finish"
    )
    events = journal(notes)
    starts = [n for n in events if n["task"] == borrower and n["event"] == "start"]
    assert [s["restart"] for s in starts] == [0, 1]
    assert int(starts[1]["step"]) == int(saved[0]["step"]) > 0  # resumed where it saved, not from zero
    ckpt_files = list((platform.home).rglob("state.json"))
    assert ckpt_files, "the checkpoint was written into COMMONS_CHECKPOINT_DIR"
    final = platform.task(borrower)
    assert final["restart_count"] == 1 and final["preemptions"] == 1
    assert final["lost_gpu_seconds"] == 0  # it saved on the signal within its grace period

    # The ledger export says exactly that: borrow, preemption, owner, resume.
    out = tmp_path / "usage.csv"
    platform.cli("usage", "export", "--out", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    by_task = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row)
    first, second = sorted(by_task[borrower], key=lambda r: r["start"])
    (own,) = by_task[owner]
    assert (first["gpus"], first["borrowed_gpus"], first["end_reason"]) == ("4", "2", "preempted")
    assert (own["gpus"], own["borrowed_gpus"], own["end_reason"]) == ("2", "0", "succeeded")
    assert (second["gpus"], second["end_reason"]) == ("4", "succeeded")
    assert ts(first["end"]) <= ts(own["start"]) + 0.05  # the owner's GPUs were free before it got them
    assert ts(own["end"]) <= ts(second["start"]) + 0.05
    assert ts(first["end"]) - ts(str(owner_task["submitted_at"])) <= GRACE_S + 1.0
    assert ts(first["start"]) <= ts(first["end"]) <= ts(second["start"]) <= ts(second["end"])
