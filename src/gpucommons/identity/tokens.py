"""API tokens and sign-in sessions: generation, parsing, hashing, constant-time verification.

A token reads `gct_<token_id>.<secret>`:
- `token_id` (16 hex chars) is public: it names the stored row, shows in `commons token list` and in
  the audit log, and lets the server find the row without scanning;
- `secret` (43 url-safe chars, 256 bits from `secrets`) is never stored; the row keeps
  `hash_secret(secret)`, a SHA-256 hex digest. A slow password hash buys nothing for a 256-bit random
  secret and would cost a key-derivation on every request.

Pure apart from `secrets` (the OS random source, which is what tokens need).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "gct_"
_ID_BYTES = 8
_SECRET_BYTES = 32


def new_token() -> tuple[str, str]:
    """A fresh `(token_id, token)` pair; store `token_id` and `hash_secret(secret_of(token))` only."""
    token_id = secrets.token_hex(_ID_BYTES)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    return token_id, f"{TOKEN_PREFIX}{token_id}.{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """`(token_id, secret)` of a well-formed token, or None for anything else (never raises)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    token_id, dot, secret = token[len(TOKEN_PREFIX) :].partition(".")
    if not dot or len(token_id) != 2 * _ID_BYTES or not secret:
        return None
    if any(c not in "0123456789abcdef" for c in token_id):
        return None
    return token_id, secret


def hash_secret(secret: str) -> str:
    """The stored form of a token's secret: SHA-256, hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def verify_secret(secret: str, stored_hash: str) -> bool:
    """Whether `secret` hashes to `stored_hash`, compared in constant time."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)
