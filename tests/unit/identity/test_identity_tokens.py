"""Token format, hashing and verification."""

from __future__ import annotations

from gpucommons.identity.tokens import hash_secret, new_token, parse_token, verify_secret


def test_new_token_round_trips_through_parse() -> None:
    token_id, token = new_token()
    parsed = parse_token(token)
    assert parsed is not None and parsed[0] == token_id
    assert len(parsed[1]) >= 43


def test_tokens_are_unique() -> None:
    assert len({new_token()[1] for _ in range(200)}) == 200


def test_stored_hash_is_not_the_secret_and_verifies() -> None:
    _, token = new_token()
    parsed = parse_token(token)
    assert parsed is not None
    stored = hash_secret(parsed[1])
    assert parsed[1] not in stored and len(stored) == 64
    assert verify_secret(parsed[1], stored)
    assert not verify_secret(parsed[1] + "x", stored)


def test_malformed_tokens_parse_to_none() -> None:
    for bad in [
        "",
        "gct_",
        "gct_abc.def",
        "Bearer gct_x",
        "gct_0123456789abcdeX.s",
        "gct_0123456789abcdef.",
        "x" * 80,
    ]:
        assert parse_token(bad) is None
