"""Reading an ID token's claims into a sign-in identity."""

from __future__ import annotations

import pytest

from gpucommons.identity.oidc import ClaimsError, identity_from_claims

ISS = "https://idp.example"


def test_preferred_username_wins_and_subject_key_is_issuer_scoped() -> None:
    who = identity_from_claims(
        {
            "iss": ISS,
            "sub": "42",
            "preferred_username": "alice",
            "email": "a@corp.local",
            "name": "Alice",
            "groups": ["ml-nlp"],
        }
    )
    assert (who.subject_key, who.user_name, who.email, who.display_name, who.groups) == (
        f"{ISS}#42", "alice", "a@corp.local", "Alice", ("ml-nlp",)
    )  # fmt: skip


def test_user_name_falls_back_to_email_then_subject() -> None:
    assert identity_from_claims({"iss": ISS, "sub": "42", "email": "a@b.c"}).user_name == "a@b.c"
    assert identity_from_claims({"iss": ISS, "sub": "42"}).user_name == "42"


def test_odd_group_claims_are_ignored_not_fatal() -> None:
    assert identity_from_claims({"iss": ISS, "sub": "1", "groups": "ml-nlp"}).groups == ()
    assert identity_from_claims({"iss": ISS, "sub": "1", "groups": ["a", 3, "", None]}).groups == ("a",)
    assert identity_from_claims({"iss": ISS, "sub": "1", "roles": ["x"]}, groups_claim="roles").groups == (
        "x",
    )


@pytest.mark.parametrize(
    "claims", [{}, {"iss": ISS}, {"sub": "1"}, {"iss": "", "sub": "1"}, {"iss": ISS, "sub": 7}]
)
def test_a_token_without_issuer_or_subject_is_refused(claims: dict[str, object]) -> None:
    with pytest.raises(ClaimsError):
        identity_from_claims(claims)
