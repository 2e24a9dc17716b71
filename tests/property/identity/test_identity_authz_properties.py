"""Properties of the role table over arbitrary principals, teams and actions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpucommons.identity.authz import (
    FINANCE_ACTIONS,
    OWNER_BOUND_ACTIONS,
    SCIM_ACTIONS,
    TEAM_ACTIONS,
    Action,
    is_allowed,
    visible_teams,
)
from gpucommons.identity.principal import Principal, Role
from gpucommons.identity.roles import scope_principal

TEAMS = ("nlp", "vision", "speech", "robotics")
teams = st.frozensets(st.sampled_from(TEAMS))


@st.composite
def principals(draw: st.DrawFn) -> Principal:
    admin_of = draw(teams)
    return Principal(
        subject=draw(st.sampled_from(("alice", "bob", "carol"))),
        platform_admin=draw(st.booleans()),
        finance=draw(st.booleans()),
        scim=draw(st.booleans()),
        member_of=draw(teams) | admin_of,
        admin_of=admin_of,
    )


actions = st.sampled_from(list(Action))
some_team = st.sampled_from(TEAMS)
owners = st.sampled_from(("alice", "bob", "carol", None))


@settings(max_examples=400, deadline=None)
@given(principals(), actions, some_team, owners)
def test_nobody_reaches_a_team_action_of_a_team_they_are_not_in(
    p: Principal, action: Action, team: str, owner: str | None
) -> None:
    if action in TEAM_ACTIONS and is_allowed(p, action, team, owner=owner):
        assert p.platform_admin or team in p.teams or (p.finance and action in FINANCE_ACTIONS)


@settings(max_examples=400, deadline=None)
@given(principals(), actions, some_team, owners)
def test_only_admins_touch_others_tasks(p: Principal, action: Action, team: str, owner: str | None) -> None:
    if action in OWNER_BOUND_ACTIONS and owner != p.subject and is_allowed(p, action, team, owner=owner):
        assert p.platform_admin or team in p.admin_of


@settings(max_examples=400, deadline=None)
@given(principals(), actions, some_team)
def test_scim_is_its_own_island(p: Principal, action: Action, team: str) -> None:
    allowed = is_allowed(p, action, team, owner=p.subject)
    if p.scim and not p.platform_admin:
        assert allowed == (action in SCIM_ACTIONS)
    if action in SCIM_ACTIONS:
        assert allowed == (p.scim or p.platform_admin)


@settings(max_examples=300, deadline=None)
@given(principals(), actions)
def test_visible_teams_are_exactly_the_teams_authorize_allows(p: Principal, action: Action) -> None:
    assert visible_teams(p, TEAMS, action) == {t for t in TEAMS if is_allowed(p, action, t, owner=p.subject)}


@settings(max_examples=300, deadline=None)
@given(principals(), st.sampled_from([*Role, None]), st.sampled_from([*TEAMS, None]), actions, some_team)
def test_a_token_scope_never_widens_what_its_user_may_do(
    p: Principal, role: Role | None, scope_team: str | None, action: Action, team: str
) -> None:
    narrowed = scope_principal(p, role, scope_team)
    if is_allowed(narrowed, action, team, owner=p.subject):
        assert is_allowed(p, action, team, owner=p.subject)
