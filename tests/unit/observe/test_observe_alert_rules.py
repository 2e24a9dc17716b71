"""deploy/prometheus/alerts.yaml: valid for Prometheus (`promtool check rules`) and doing what it says
(`promtool test rules alerts.test.yaml`: each alert fires when it should and not before)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from gpucommons.testing.promql import MISSING, metric_names, promtool

DEPLOY = Path(__file__).parents[3] / "deploy" / "prometheus"
RULES = DEPLOY / "alerts.yaml"
EXPECTED_ALERTS = {
    "CommonsBudgetAt80Percent",
    "CommonsBudgetExhausted",
    "CommonsTeamBelowGuarantee",
    "CommonsTasksWaitingOverAnHour",
    "CommonsSchedulerCycleSlow",
    "CommonsPreemptionLoop",
    "CommonsPreemptionChurn",
}


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = promtool()
    if tool is None:
        pytest.skip(MISSING)
    return subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=60, cwd=DEPLOY)


def test_the_alert_rules_pass_promtool_check() -> None:
    result = run_promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_every_alert_fires_when_it_should_in_promtool_unit_tests() -> None:
    result = run_promtool("test", "rules", "alerts.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_the_docs_promise_is_defined_and_tested() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert {r["alert"] for r in rules} == EXPECTED_ALERTS
    tests = yaml.safe_load((DEPLOY / "alerts.test.yaml").read_text())["tests"]
    tested = {case["alertname"] for t in tests for case in t["alert_rule_test"] if case["exp_alerts"]}
    assert tested == EXPECTED_ALERTS, f"alerts never seen firing in a unit test: {EXPECTED_ALERTS - tested}"
    for rule in rules:
        assert metric_names(rule["expr"]), rule["alert"]
        assert all(n.startswith("commons_") for n in metric_names(rule["expr"])), rule["alert"]
