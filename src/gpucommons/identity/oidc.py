"""What an OpenID Connect sign-in tells us about a person, and the rule for its `groups` claim. Pure.

The rule (docs/design.md: "Don't authorize from the token's groups claim alone"):
- the directory (SCIM) is the source of membership; roles are always read from it, on every request;
- the ID token identifies the person (`iss` + `sub`, linked once to a directory user by userName or
  e-mail) and never grants anything by itself;
- its `groups` claim may *seed* the directory, once: when a sign-in creates the user (nobody pushed
  them by SCIM), their memberships are created from the claim. Later sign-ins ignore the claim, so
  a group removal in the directory sticks, and Entra ID's habit of dropping the claim above 200
  groups cannot take rights away or grant them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SignInIdentity:
    """The person an ID token names, in directory terms."""

    #: `iss#sub`: stable across renames and e-mail changes; stored as the user's `oidc_subject`.
    subject_key: str
    user_name: str
    email: str | None
    display_name: str | None
    #: The groups claim as sent (only used to seed a user created by this sign-in).
    groups: tuple[str, ...]


class ClaimsError(ValueError):
    """The ID token lacks what a sign-in needs."""


def identity_from_claims(claims: Mapping[str, Any], groups_claim: str = "groups") -> SignInIdentity:
    """Read a verified ID token's claims. `userName` is preferred_username, else email, else sub."""
    iss, sub = claims.get("iss"), claims.get("sub")
    if not isinstance(iss, str) or not iss or not isinstance(sub, str) or not sub:
        raise ClaimsError("the ID token has no issuer or subject")
    email = claims.get("email") if isinstance(claims.get("email"), str) else None
    preferred = claims.get("preferred_username")
    user_name = preferred if isinstance(preferred, str) and preferred else email or sub
    name = claims.get("name")
    raw_groups = claims.get(groups_claim)
    groups = tuple(g for g in raw_groups if isinstance(g, str) and g) if isinstance(raw_groups, list) else ()
    return SignInIdentity(
        subject_key=f"{iss}#{sub}",
        user_name=user_name,
        email=email,
        display_name=name if isinstance(name, str) and name else None,
        groups=groups,
    )
