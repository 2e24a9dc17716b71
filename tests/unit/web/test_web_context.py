"""`/ui/api/context`: who the caller is and how busy each pool is, for every page of the dashboard."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucommons.identity.authz import Forbidden
from gpucommons.identity.principal import Principal
from gpucommons.policy import load_policy
from gpucommons.server.metrics import GaugeSnapshot, TeamPoolGauge
from gpucommons.server.web.context import dashboard_context, pool_views

POLICY = load_policy(Path(__file__).parents[2] / "e2e" / "web" / "dashboard-policy.yaml")


def gauges(alpha_used: int, beta_used: int, free: int) -> GaugeSnapshot:
    return GaugeSnapshot(
        team_pools=(
            TeamPoolGauge("alpha", "gpu", alpha_used, max(0, alpha_used - 4), max(0, 4 - alpha_used)),
            TeamPoolGauge("beta", "gpu", beta_used, max(0, beta_used - 4), max(0, 4 - beta_used)),
        ),
        free_gpus={"gpu": free},
        queue_length={"alpha": 0, "beta": 0},
    )


def test_pool_view_sums_every_teams_usage_and_borrowing() -> None:
    (pool,) = pool_views(POLICY, gauges(alpha_used=6, beta_used=1, free=1))
    assert (pool.name, pool.gpu_type, pool.capacity_gpus) == ("gpu", "L4", 8)
    assert pool.used_gpus == 7
    assert pool.borrowed_gpus == 2
    assert pool.idle_gpus == 1


def test_idle_gpus_come_from_the_engines_placement_view() -> None:
    # A GPU held by a task being preempted is still busy even if no team's usage counts it any more.
    (pool,) = pool_views(POLICY, gauges(alpha_used=2, beta_used=0, free=5))
    assert pool.idle_gpus == 5


def test_member_context_names_only_the_callers_own_teams() -> None:
    member = Principal(subject="bea", display_name="Bea", member_of=frozenset({"beta"}))
    context = dashboard_context(member, POLICY, gauges(0, 0, 8))
    assert context.me.teams == ["beta"]
    assert not context.me.platform_admin
    assert context.cluster_name == "webtest"
    # `urgent` is reserved for alpha: a beta member is not offered it.
    assert [c.name for c in context.priority_classes] == ["training", "normal"]
    assert [c.checkpoint_required for c in context.priority_classes] == [True, False]
    assert all(c.teams == ["beta"] for c in context.priority_classes)
    assert context.default_priority_class == "normal"


def test_classes_come_with_the_teams_the_caller_may_use_them_in() -> None:
    admin = Principal(subject="root", platform_admin=True)
    views = {c.name: c.teams for c in dashboard_context(admin, POLICY, gauges(0, 0, 8)).priority_classes}
    assert views == {"urgent": ["alpha"], "training": ["alpha", "beta"], "normal": ["alpha", "beta"]}
    outsider = Principal(subject="nobody")
    assert dashboard_context(outsider, POLICY, gauges(0, 0, 8)).priority_classes == []


def test_admin_context_shows_admin_role_and_team_admin_rights() -> None:
    lead = Principal(subject="al", admin_of=frozenset({"alpha"}))
    context = dashboard_context(lead, POLICY, gauges(0, 0, 8))
    assert context.me.teams == ["alpha"]
    assert context.me.admin_of == ["alpha"]
    assert context.me.display_name == "al"


def test_a_directory_sync_client_may_not_read_the_dashboard() -> None:
    with pytest.raises(Forbidden):
        dashboard_context(Principal(subject="okta", scim=True), POLICY, gauges(0, 0, 8))
