"""authorize()/visible_teams(): the role table of docs/identity.md, row by row."""

from __future__ import annotations

import pytest

from gpucommons.identity.authz import (
    FINANCE_ACTIONS,
    SCIM_ACTIONS,
    TEAM_ACTIONS,
    Action,
    Forbidden,
    authorize,
    is_allowed,
    visible_teams,
)
from gpucommons.identity.principal import Principal

ADMIN = Principal("root", platform_admin=True)
FINANCE = Principal("fin", finance=True)
SCIM = Principal("okta", scim=True)
NLP_ADMIN = Principal("lead", member_of=frozenset({"nlp"}), admin_of=frozenset({"nlp"}))
NLP_MEMBER = Principal("alice", member_of=frozenset({"nlp"}))
NOBODY = Principal("stranger")

CLUSTER_ADMIN_ACTIONS = [
    Action.POLICY_APPLY,
    Action.TOKEN_CREATE,
    Action.TOKEN_READ,
    Action.TOKEN_REVOKE,
    Action.AUDIT_READ,
    Action.DIRECTORY_READ,
]


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("team", ["nlp", "vision", None])
def test_platform_admin_may_do_everything(action: Action, team: str | None) -> None:
    authorize(ADMIN, action, team)


@pytest.mark.parametrize("action", sorted(TEAM_ACTIONS))
def test_member_reaches_nothing_of_another_team(action: Action) -> None:
    for who in (NLP_MEMBER, NLP_ADMIN):
        with pytest.raises(Forbidden) as err:
            authorize(who, action, "vision", owner=who.subject)
        assert err.value.team == "vision"


@pytest.mark.parametrize("action", sorted(TEAM_ACTIONS - {Action.TASK_CANCEL, Action.TASK_CHECKPOINT}))
def test_member_reads_and_submits_in_own_team(action: Action) -> None:
    authorize(NLP_MEMBER, action, "nlp")


def test_member_cancels_own_task_but_not_a_teammates() -> None:
    authorize(NLP_MEMBER, Action.TASK_CANCEL, "nlp", owner="alice")
    with pytest.raises(Forbidden, match="team admin"):
        authorize(NLP_MEMBER, Action.TASK_CANCEL, "nlp", owner="bob")
    with pytest.raises(Forbidden):
        authorize(NLP_MEMBER, Action.TASK_CHECKPOINT, "nlp")


def test_team_admin_cancels_any_task_of_own_team() -> None:
    authorize(NLP_ADMIN, Action.TASK_CANCEL, "nlp", owner="bob")
    authorize(NLP_ADMIN, Action.TASK_CHECKPOINT, "nlp", owner=None)


@pytest.mark.parametrize("action", sorted(FINANCE_ACTIONS))
def test_finance_reads_usage_and_costs_of_every_team(action: Action) -> None:
    for team in ("nlp", "vision", None):
        authorize(FINANCE, action, team)


@pytest.mark.parametrize("action", sorted(TEAM_ACTIONS - FINANCE_ACTIONS))
def test_finance_sees_no_task_contents_or_logs(action: Action) -> None:
    with pytest.raises(Forbidden):
        authorize(FINANCE, action, "nlp")


@pytest.mark.parametrize("action", sorted(set(Action) - SCIM_ACTIONS))
def test_scim_token_is_confined_to_directory_sync(action: Action) -> None:
    with pytest.raises(Forbidden, match="scim"):
        authorize(SCIM, action, "nlp")


@pytest.mark.parametrize("who", [NLP_MEMBER, NLP_ADMIN, FINANCE, NOBODY])
def test_only_scim_and_platform_admin_use_scim(who: Principal) -> None:
    for action in SCIM_ACTIONS:
        assert not is_allowed(who, action)
    assert is_allowed(SCIM, Action.SCIM_WRITE)


@pytest.mark.parametrize("action", CLUSTER_ADMIN_ACTIONS)
@pytest.mark.parametrize("who", [NLP_MEMBER, NLP_ADMIN, FINANCE, SCIM, NOBODY])
def test_administration_is_platform_admin_only(action: Action, who: Principal) -> None:
    with pytest.raises(Forbidden):
        authorize(who, action, None)


@pytest.mark.parametrize("action", sorted(TEAM_ACTIONS))
def test_team_action_across_all_teams_needs_a_cluster_role(action: Action) -> None:
    assert not is_allowed(NLP_ADMIN, action, None)


def test_nobody_without_a_role_gets_any_team_action() -> None:
    assert not any(is_allowed(NOBODY, a, "nlp", owner="stranger") for a in TEAM_ACTIONS)


def test_cluster_reads_are_open_to_signed_in_people_but_not_scim() -> None:
    for who in (NLP_MEMBER, FINANCE, NOBODY):
        authorize(who, Action.CLUSTER_READ)
        authorize(who, Action.POLICY_READ)
    assert not is_allowed(SCIM, Action.CLUSTER_READ)


def test_visible_teams_follow_the_action() -> None:
    teams = ["nlp", "vision", "speech"]
    assert visible_teams(ADMIN, teams) == frozenset(teams)
    assert visible_teams(NLP_MEMBER, teams) == {"nlp"}
    assert visible_teams(FINANCE, teams) == frozenset()
    assert visible_teams(FINANCE, teams, Action.USAGE_READ) == frozenset(teams)
    assert visible_teams(SCIM, teams, Action.USAGE_READ) == frozenset()
    assert visible_teams(Principal("x", member_of=frozenset({"gone"})), teams) == frozenset()


def test_forbidden_names_the_action_and_team() -> None:
    with pytest.raises(Forbidden) as err:
        authorize(NLP_MEMBER, Action.LOGS_READ, "vision")
    assert "logs.read" in str(err.value) and "vision" in str(err.value)
