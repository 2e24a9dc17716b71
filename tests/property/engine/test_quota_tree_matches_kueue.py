"""The engine's quota tree agrees with Kueue's arithmetic on the objects `commons k8s render` makes.

Random small policies (cohorts with quota of their own, lend and borrow limits on teams and cohorts,
nested cohorts) and random usage: what each team can take now and may ever hold in each pool must
equal what the fake cluster's Kueue emulation (`testing.fake_k8s.kueue.QuotaTree`, a transcription
of `resource_node.go`) computes from the rendered ClusterQueues and Cohorts. So a policy rendered to
Kueue admits what the simulator predicts, cohort quotas included.
"""

from __future__ import annotations

import os
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucommons.backends.kubernetes import render
from gpucommons.backends.kubernetes.names import cluster_queue_name, dedicated_flavor_name, k8s_name
from gpucommons.domain.model import Isolation, Policy
from gpucommons.domain.resources import Resources
from gpucommons.engine import ClusterState
from gpucommons.testing.fake_k8s.kueue import QuotaTree as KueueTree
from gpucommons.testing.strategies import policies

EXAMPLES = int(os.environ.get("ENGINE_FUZZ_EXAMPLES", "40"))
GPU = "nvidia.com/gpu"


@st.composite
def policy_and_usage(draw: st.DrawFn) -> tuple[Policy, dict[tuple[str, str], int]]:
    policy = draw(policies())
    usage = {}
    for team in policy.teams:
        for q in team.quotas:
            usage[(team.name, q.pool)] = draw(st.integers(0, 2 * max(8, q.nominal.gpus)))
    return policy, usage


@settings(max_examples=EXAMPLES * 5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy_and_usage())
def test_available_and_potential_match_kueue(case: tuple[Policy, dict[tuple[str, str], int]]) -> None:
    policy, usage = case
    objects = render(policy)
    kueue = KueueTree(
        [o for o in objects if o["kind"] == "ClusterQueue"], [o for o in objects if o["kind"] == "Cohort"]
    )
    state = ClusterState(policy)
    for (team, pool), gpus in usage.items():
        state.quota.add_usage(team, pool, Resources(gpus))
    for team in policy.teams:
        cq = cluster_queue_name(team.name)
        dedicated = team.isolation is Isolation.DEDICATED
        for q in team.quotas:
            flavor = dedicated_flavor_name(q.pool, team.name) if dedicated else k8s_name(q.pool)
            kueue.add(cq, {(flavor, GPU): Fraction(usage[(team.name, q.pool)])})
    for team in policy.teams:
        cq = cluster_queue_name(team.name)
        dedicated = team.isolation is Isolation.DEDICATED
        for q in team.quotas:
            flavor = dedicated_flavor_name(q.pool, team.name) if dedicated else k8s_name(q.pool)
            where = f"team {team.name} pool {q.pool}"
            assert state.quota.available(team.name, q.pool).gpus == kueue.available(
                "cq:" + cq, (flavor, GPU)
            ), where
            assert state.quota.potential(team.name, q.pool).gpus == kueue.potential(
                "cq:" + cq, (flavor, GPU)
            ), where
