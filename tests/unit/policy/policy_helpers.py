"""Helpers for the policy tests: a minimal valid file and a way to collect the issues of a bad one."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpucommons.policy import PolicyError, PolicyIssue, parse_policy

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "commons.yaml"

MINIMAL = """\
cluster:
  name: tiny
  pools:
    - {name: h100, gpu_type: H100, nodes: 2, gpus_per_node: 8, price_per_gpu_hour: 2.50}
teams:
  - name: nlp
    quota:
      h100: {gpus: 8}
"""


def issues_of(text: str) -> list[PolicyIssue]:
    """Every issue `parse_policy` reports for `text` (fails the test when the text is accepted)."""
    with pytest.raises(PolicyError) as caught:
        parse_policy(textwrap.dedent(text))
    return list(caught.value.issues)


def issue_at(issues: list[PolicyIssue], path: str) -> PolicyIssue:
    found = [i for i in issues if i.path == path]
    assert found, f"no issue at {path!r}; issues: {issues}"
    return found[0]
