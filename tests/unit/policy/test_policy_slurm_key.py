"""`cluster.pools[].slurm`: which Slurm nodes make up a pool (optional)."""

from __future__ import annotations

import pytest

from gpucommons.domain.model import SlurmNodeMatch
from gpucommons.policy import PolicyError, dump_policy, parse_policy

BASE = """
cluster:
  name: demo
  pools:
    - {{name: h100, gpu_type: H100, nodes: 2, gpus_per_node: 8{first}}}
    - {{name: a100, gpu_type: A100, nodes: 2, gpus_per_node: 8{second}}}
teams:
  - {{name: nlp, quota: {{h100: {{gpus: 8}}}}}}
"""


def policy_text(first: str = "", second: str = "") -> str:
    return BASE.format(first=first, second=second)


def test_a_pool_names_its_partition_and_features_and_keeps_them_through_a_dump() -> None:
    policy = parse_policy(
        policy_text(", slurm: {partition: gpu, features: [h100, ib]}", ", slurm: {features: [a100]}")
    )
    assert policy.pool("h100").slurm == SlurmNodeMatch(partition="gpu", features=("h100", "ib"))
    assert policy.pool("a100").slurm == SlurmNodeMatch(partition=None, features=("a100",))
    assert parse_policy(dump_policy(policy)) == policy


def test_the_key_is_optional() -> None:
    assert parse_policy(policy_text()).pool("h100").slurm is None


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (", slurm: {}", "", "cluster.pools[0].slurm: give a partition, features, or both"),
        (", slurm: {partition: 'gpu nodes'}", "", "'gpu nodes' is not a valid Slurm name"),
        (
            ", slurm: {features: ['ib&h100']}",
            "",
            "cluster.pools[0].slurm.features[0]: 'ib&h100' is not a valid",
        ),
        (
            ", slurm: {partition: gpu, features: [x]}",
            ", slurm: {partition: gpu, features: [x]}",
            "cluster.pools[1].slurm: pool 'h100' already takes the same Slurm nodes",
        ),
        (", slurm: {partition: gpu, nodes: [n1]}", "", "cluster.pools[0].slurm.nodes"),
    ],
)
def test_a_bad_slurm_key_is_refused_with_its_path(first: str, second: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(policy_text(first, second))
    shown = "\n".join(issue.format(caught.value.source) for issue in caught.value.issues)
    assert message in shown
