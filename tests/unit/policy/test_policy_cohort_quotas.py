"""`cohorts[].quotas`: a cohort's own quota per pool, in the team quota's shape, checked like it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from policy_helpers import issue_at, issues_of
from typer.testing import CliRunner

from gpucommons.cli.main import app
from gpucommons.domain.resources import UNLIMITED, Resources
from gpucommons.policy import dump_policy, parse_policy

GOOD = """\
cluster:
  name: dept
  pools:
    - {name: h100, gpu_type: H100, nodes: 10, gpus_per_node: 8}
cohorts:
  - name: research
    parent: cluster
    quotas:
      h100: {gpus: 64, borrow_limit: 8, lend_limit: 16}
  - name: vision
    parent: research
    quotas:
      h100: {gpus: 0, cpus: 4}
teams:
  - {name: nlp, cohort: research, quota: {h100: {gpus: 0}}}
  - {name: cv, cohort: vision, quota: {h100: {gpus: 0}}}
  - {name: ops, quota: {h100: {gpus: 16}}}
"""


def test_a_cohort_quota_is_read_into_the_domain_with_its_limits() -> None:
    policy = parse_policy(GOOD)
    research = policy.cohort("research")
    q = research.quota("h100")
    assert q is not None
    assert q.nominal == Resources(64)
    assert q.borrow_limit == Resources(8, UNLIMITED, UNLIMITED)
    assert q.lend_limit == Resources(16, UNLIMITED, UNLIMITED)
    assert policy.cohort("vision").quotas[0].nominal == Resources(0, 4000)
    assert policy.cohort("cluster").quotas == ()


def test_a_cohort_quota_survives_the_round_trip() -> None:
    policy = parse_policy(GOOD)
    assert parse_policy(dump_policy(policy)) == policy


def test_a_cohort_quota_in_an_unknown_pool_is_refused_at_its_path() -> None:
    issues = issues_of(GOOD.replace("      h100: {gpus: 64,", "      h200: {gpus: 64,"))
    issue = issue_at(issues, "cohorts[0].quotas.h200")
    assert "unknown pool 'h200'" in issue.message and "did you mean 'h100'" in issue.message


def test_limits_on_a_root_cohort_are_refused_there_being_no_parent() -> None:
    text = GOOD.replace("    parent: cluster\n", "")
    issues = issues_of(text)
    for key in ("borrow_limit", "lend_limit"):
        issue = issue_at(issues, f"cohorts[0].quotas.h100.{key}")
        assert "has no parent" in issue.message and f"remove {key}" in issue.message


def test_cohort_quotas_count_towards_the_pool_capacity() -> None:
    issues = issues_of(GOOD.replace("gpus: 64,", "gpus: 72,"))
    issue = issue_at(issues, "cluster.pools[0]")
    assert "teams' and cohorts' nominal quotas in pool 'h100' add up to 88 GPUs" in issue.message
    assert "cohort research 72 GPUs" in issue.message


def test_a_cohort_lend_limit_may_exceed_its_own_nominal_quota() -> None:
    """Kueue: a cohort's lending limit bounds its whole subtree's quota, so it is not capped by the
    cohort's own nominal quota (unlike a team's)."""
    parse_policy(GOOD.replace("lend_limit: 16", "lend_limit: 80"))


def test_a_cohort_cpu_quota_finer_than_a_milli_cpu_is_refused() -> None:
    issues = issues_of(GOOD.replace("cpus: 4", "cpus: 0.0005"))
    assert "finer than a milli-CPU" in issue_at(issues, "cohorts[1].quotas.h100.cpus").message


def test_an_unknown_key_in_a_cohort_quota_is_refused() -> None:
    issues = issues_of(textwrap.dedent(GOOD).replace("{gpus: 0, cpus: 4}", "{gpus: 0, gpu: 4}"))
    assert any(i.path.startswith("cohorts[1].quotas.h100") for i in issues), issues


def test_policy_check_lists_a_cohort_quota_and_counts_it_in_the_total(tmp_path: Path) -> None:
    good = tmp_path / "dept.yaml"
    good.write_text(GOOD)
    result = CliRunner().invoke(app, ["policy", "check", "--wide", str(good)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "cohort research (own)" in line)
    assert "cluster" in row and "64 (8 / 16)" in row
    assert "80 / 80" in result.output  # 64 (research) + 16 (ops) of 80
