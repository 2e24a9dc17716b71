"""The filter subset we answer: eq joined by and; everything else refused by name."""

from __future__ import annotations

import pytest

from gpucommons.identity.scim_filter import Equals, FilterError, parse_filter


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('userName eq "bjensen"', [Equals("username", "bjensen")]),
        ("externalId eq jyoung", [Equals("externalid", "jyoung")]),  # Entra's docs: unquoted
        ('(displayName eq "ml-nlp") and id eq "1"', [Equals("displayname", "ml-nlp"), Equals("id", "1")]),
        ('emails[type eq "work"].value eq "a@b.c"', [Equals('emails[type eq "work"].value', "a@b.c")]),
        ('urn:ietf:params:scim:schemas:core:2.0:User:userName eq "X"', [Equals("username", "X")]),
        ('id eq "g" and members eq "u"', [Equals("id", "g"), Equals("members", "u")]),
        ('USERNAME EQ "a \\"quoted\\" name"', [Equals("username", 'a "quoted" name')]),
        ("active eq true", [Equals("active", True)]),
    ],
)
def test_supported_filters_become_equalities(text: str, expected: list[Equals]) -> None:
    assert list(parse_filter(text)) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('userName eq "a" or userName eq "b"', "'or' is not supported"),
        ('userName sw "a"', "operator 'sw'"),
        ('not (userName eq "a")', "'not' is not supported"),
        ("userName eq", "ends too early"),
        ('userName eq "a" extra', "unexpected 'extra'"),
        ("", "empty"),
        ('(userName eq "a"', "ends too early"),
        ("(" * 17 + 'userName eq "a"' + ")" * 17, "deeper than 16 levels"),
        ("(" * 5000 + 'userName eq "a"' + ")" * 5000, "at most 4096"),
        ('userName eq "' + "x" * 5000 + '"', "at most 4096"),
    ],
)
def test_unsupported_filters_are_refused_by_name(text: str, complaint: str) -> None:
    with pytest.raises(FilterError, match=complaint):
        parse_filter(text)


def test_nesting_up_to_the_limit_is_read() -> None:
    assert list(parse_filter("(" * 16 + 'userName eq "a"' + ")" * 16)) == [Equals("username", "a")]
