"""bench/k8s_watch.py at a small size: the benchmark runs end to end and its ledger is complete.

Figures are the benchmark's to print (docs/benchmarks.md); this only checks that what it measures
is there: every Job created became one closed interval, and the ledger's GPU-seconds equal the
Workloads' own admitted → finished spans.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpucommons.testing.postgres import fresh_database

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]


def test_thirty_kubectl_jobs_all_reach_the_ledger_exactly() -> None:
    with fresh_database():  # skips with a sentence where no PostgreSQL answers
        pass
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "k8s_watch.py"), "--workloads", "30", "--nodes", "2"],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    figures = dict(item.split("=", 1) for item in last.split()[1:])
    assert figures["workloads"] == "30"
    assert figures["intervals"] == "30"
    assert figures["gpu_s_ledger"] == figures["gpu_s_workloads"]
    assert float(figures["lag_p99_s"]) >= 0
