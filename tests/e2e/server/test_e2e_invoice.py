"""The chargeback end to end: tasks run on `commons up`, the ledger is exported (docs/design.md,
contract 4), charged back from the file (contract 5), and the server's invoice agrees on what each
team used."""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tests.e2e.server.conftest import Platform


def test_usage_export_chargeback_and_invoice_agree(
    platform_factory: Callable[..., Platform], tmp_path: Path
) -> None:
    platform = platform_factory(executor="timer")
    ids = [
        platform.submit("--team", "a", "--gpus", "2", "--", "sleep", "2"),
        platform.submit("--team", "b", "--gpus", "1", "--", "sleep", "1"),
    ]
    platform.wait(
        lambda: all(platform.task(i)["state"] == "succeeded" for i in ids), what="both tasks to finish"
    )
    month = datetime.now(UTC).strftime("%Y-%m")

    usage = tmp_path / "usage.csv"
    platform.cli("usage", "export", "--out", str(usage))
    assert usage.read_text().startswith("task_id,team,pool,gpus,start,end,priority,borrowed_gpus,end_reason")
    # A month in progress is charged up to now in whole seconds, by the CLI and the server alike:
    # both must run after the second in which the last interval ended, or the earlier of the two
    # cuts that interval short (seen in CI: the CLI ran 0.9 s after the task's end).
    with usage.open() as f:
        last_end = max(datetime.fromisoformat(row["end"].replace("Z", "+00:00")) for row in csv.DictReader(f))
    time.sleep(max(0.0, math.floor(last_end.timestamp()) + 1.05 - time.time()))
    out = tmp_path / "C.json"
    platform.cli(
        "chargeback",
        "--policy",
        str(platform.policy),
        "--usage",
        str(usage),
        "--period",
        month,
        "--out",
        str(out),
    )
    from_file = json.loads(out.read_text())
    assert (
        from_file["platform_cents"] + sum(t["total_cents"] for t in from_file["teams"].values())
        == from_file["cluster_cost_cents"]
    )

    served = json.loads(platform.cli("invoice", "--month", month).stdout)
    for team in ("a", "b"):
        assert served["teams"][team]["gpu_hours"] == from_file["teams"][team]["gpu_hours"] > 0
        assert served["teams"][team]["direct_cents"] == from_file["teams"][team]["direct_cents"]

    pdf = tmp_path / "a.pdf"
    platform.cli("invoice", "--month", month, "--team", "a", "--format", "pdf", "--out", str(pdf))
    assert pdf.read_bytes().startswith(b"%PDF-")
    refused = platform.cli("invoice", "--month", month, "--format", "pdf", "--out", str(pdf), check=False)
    assert refused.returncode == 1 and "team" in refused.stderr
