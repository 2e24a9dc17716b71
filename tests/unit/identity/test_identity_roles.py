"""Directory groups → roles, and token scopes that narrow but never widen."""

from __future__ import annotations

from decimal import Decimal

from gpucommons.domain.model import IdentityConfig, Policy, Pool, PriorityClass, Team
from gpucommons.identity.principal import Role
from gpucommons.identity.roles import principal_from_groups, scope_principal, service_principal


def _policy() -> Policy:
    return Policy(
        cluster_name="t",
        pools=(Pool("h100", "H100", 1, 8, Decimal(1)),),
        priority_classes=(PriorityClass("experiment", 100),),
        default_priority_class="experiment",
        teams=(
            Team("nlp", (), groups=("ml-nlp",), admin_groups=("ml-nlp-leads",)),
            Team("vision", (), groups=("ml-vision", "ml-shared")),
            Team("speech", (), groups=("ml-shared",)),
        ),
        identity=IdentityConfig(admin_groups=("platform-admins",), finance_groups=("Finance",)),
    )


def test_team_membership_comes_from_groups() -> None:
    p = principal_from_groups("alice", ["ml-nlp", "unrelated"], _policy())
    assert p.member_of == {"nlp"} and p.admin_of == frozenset()
    assert not p.platform_admin and not p.finance


def test_admin_group_makes_admin_and_member() -> None:
    p = principal_from_groups("lead", ["ml-nlp-leads"], _policy())
    assert p.admin_of == {"nlp"} and p.member_of == {"nlp"}


def test_one_group_may_feed_several_teams() -> None:
    assert principal_from_groups("x", ["ml-shared"], _policy()).member_of == {"vision", "speech"}


def test_group_names_match_case_insensitively() -> None:
    p = principal_from_groups("x", ["ML-NLP", "finance", "Platform-Admins"], _policy())
    assert p.member_of == {"nlp"} and p.finance and p.platform_admin


def test_without_a_policy_nobody_holds_a_team() -> None:
    p = principal_from_groups("x", ["ml-nlp"], None)
    assert p.teams == frozenset() and not p.platform_admin


def test_scope_never_widens() -> None:
    member = principal_from_groups("alice", ["ml-nlp"], _policy())
    assert not scope_principal(member, Role.PLATFORM_ADMIN, None).platform_admin
    assert scope_principal(member, Role.TEAM_ADMIN, "nlp").admin_of == frozenset()
    assert scope_principal(member, Role.TEAM_MEMBER, "vision").member_of == frozenset()
    assert scope_principal(member, None, None) == member


def test_scope_narrows_to_one_team_and_role() -> None:
    big = principal_from_groups("x", ["ml-nlp-leads", "ml-shared", "platform-admins"], _policy())
    narrowed = scope_principal(big, Role.TEAM_MEMBER, "nlp")
    assert narrowed.member_of == {"nlp"} and narrowed.admin_of == frozenset() and not narrowed.platform_admin
    assert scope_principal(big, None, "vision").member_of == {"vision"}


def test_service_tokens_hold_exactly_their_role() -> None:
    assert service_principal("okta", Role.SCIM, None, credential_id="t").scim
    lead = service_principal("ci", Role.TEAM_ADMIN, "nlp", credential_id="t")
    assert lead.admin_of == {"nlp"} and lead.member_of == {"nlp"} and not lead.platform_admin
    assert service_principal("root", Role.PLATFORM_ADMIN, None, credential_id="t").platform_admin
