"""`priority_classes[].teams` and `.roles`: who may use a class, read from the file, checked against the
teams, kept by a dump, and decided by `identity.classes` for a caller."""

from __future__ import annotations

import pytest
from policy_helpers import issue_at, issues_of

from gpucommons.domain.model import PriorityClass
from gpucommons.identity.classes import class_denial, usable_teams, who_may_use
from gpucommons.identity.principal import Principal
from gpucommons.policy import dump_policy, parse_policy

BASE = """\
cluster:
  name: demo
  pools:
    - {name: h100, gpu_type: H100, nodes: 4, gpus_per_node: 8}
priority_classes:
  - {name: production, value: 1000, preemptible: false, teams: [nlp]}
  - {name: leads, value: 700, roles: [team_admin, platform_admin]}
  - {name: experiment, value: 100}
default_priority_class: experiment
teams:
  - name: nlp
    quota: {h100: {gpus: 16}}
  - name: vision
    quota: {h100: {gpus: 8}}
"""


def test_teams_and_roles_are_read_and_survive_a_dump() -> None:
    policy = parse_policy(BASE)
    production, leads, experiment = policy.priority_classes
    assert (production.teams, production.roles) == (("nlp",), ())
    assert (leads.teams, leads.roles) == ((), ("team_admin", "platform_admin"))
    assert (experiment.teams, experiment.roles) == ((), ())
    assert parse_policy(dump_policy(policy)) == policy


@pytest.mark.parametrize(
    ("old", "new", "path", "words"),
    [
        (
            "teams: [nlp]}",
            "teams: [nlpp]}",
            "priority_classes[0].teams[0]",
            "unknown team 'nlpp'; did you mean 'nlp'?",
        ),
        ("teams: [nlp]}", "teams: []}", "priority_classes[0].teams", "an empty teams list lets nobody use"),
        (
            "roles: [team_admin, platform_admin]}",
            "roles: [owner]}",
            "priority_classes[1].roles[0]",
            "team_admin",
        ),
        (
            "default_priority_class: experiment",
            "default_priority_class: production",
            "priority_classes[0].teams",
            "cannot leave out vision",
        ),
        (
            "default_priority_class: experiment",
            "default_priority_class: leads",
            "priority_classes[1].roles",
            "its roles must include team_member",
        ),
    ],
)
def test_class_rules_are_checked_at_their_path(old: str, new: str, path: str, words: str) -> None:
    assert old in BASE
    issue = issue_at(issues_of(BASE.replace(old, new)), path)
    assert words in issue.message


def test_a_default_class_open_to_every_team_and_member_is_accepted() -> None:
    text = BASE.replace("teams: [nlp]}", "teams: [nlp, vision], roles: [team_member, team_admin]}")
    assert parse_policy(
        text.replace("default_priority_class: experiment", "default_priority_class: production")
    )


PRODUCTION = PriorityClass("production", 1000, teams=("nlp", "vision"), roles=("team_admin",))


def test_the_refusal_names_the_class_and_who_may_use_it() -> None:
    assert (
        who_may_use(PRODUCTION)
        == "priority class 'production' is reserved for team admins of teams nlp and vision"
    )
    assert who_may_use(PriorityClass("open", 1)) == "priority class 'open' is reserved for everyone"
    member = Principal("ann", member_of=frozenset({"nlp", "ops"}))
    assert class_denial(member, PRODUCTION, "ops") == (
        "priority class 'production' is reserved for team admins of teams nlp and vision; "
        "team 'ops' may not use it"
    )
    assert "you are not among them in team 'nlp'" in str(class_denial(member, PRODUCTION, "nlp"))


def test_platform_admins_pass_roles_but_not_teams() -> None:
    admin = Principal("root", platform_admin=True)
    assert class_denial(admin, PRODUCTION, "nlp") is None
    assert class_denial(admin, PRODUCTION, "ops") is not None
    lead = Principal("lee", member_of=frozenset({"nlp", "vision"}), admin_of=frozenset({"vision"}))
    assert usable_teams(lead, PRODUCTION, ["nlp", "vision"]) == ["vision"]
