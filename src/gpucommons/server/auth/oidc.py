"""The OpenID provider as a relying party sees it: settings, discovery, code exchange, ID tokens.

authlib builds the authorization request (PKCE S256) and exchanges the code; joserfc verifies ID
tokens against the provider's JWKS (refetched once when a token names an unknown key). Discovery
and keys are cached for `METADATA_TTL_S`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from gpucommons._authlib import OAuth2Client
from gpucommons.api.errors import Unauthenticated, Unavailable

METADATA_TTL_S = 3600.0
_SIGNING_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]


class OidcSettings(BaseSettings):
    """`COMMONS_OIDC_*`: the OpenID provider and our two clients at it. No issuer = sign-in disabled."""

    model_config = SettingsConfigDict(env_prefix="COMMONS_OIDC_", extra="ignore")

    issuer: str | None = None
    #: Confidential client for the web sign-in (authorization code + PKCE).
    client_id: str | None = None
    client_secret: str | None = None
    #: Public native client for `commons login` (loopback + PKCE, device flow); default: `client_id`.
    cli_client_id: str | None = None
    scopes: str = "openid email profile groups"
    groups_claim: str = "groups"
    #: Create memberships from the groups claim when a sign-in creates the user (see identity.oidc).
    seed_groups_from_claims: bool = True
    #: Lifetime of the GPU Commons session token a sign-in ends in.
    session_ttl_s: int = Field(12 * 3600, ge=60, le=30 * 86400)
    #: An ID token older than this cannot be exchanged for a session.
    max_id_token_age_s: int = Field(600, ge=30, le=86400)
    #: Our base URL as browsers reach it (for the redirect URI); default: the request's own.
    public_url: str | None = None
    #: Signs the short-lived cookie that carries state, nonce and PKCE verifier through the web
    #: sign-in; default: a random key per server process (a restart only interrupts sign-ins under way).
    cookie_secret: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.issuer and self.client_id)

    @property
    def native_client_id(self) -> str | None:
        return self.cli_client_id or self.client_id

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()


class OidcProvider:
    """One OpenID provider: cached discovery and keys, code exchange, ID token verification."""

    def __init__(self, settings: OidcSettings, http: httpx.Client | None = None) -> None:
        if not settings.issuer or not settings.client_id:
            raise ValueError("OpenID sign-in needs COMMONS_OIDC_ISSUER and COMMONS_OIDC_CLIENT_ID")
        self.settings = settings
        self.issuer = settings.issuer.rstrip("/")
        self._http = http or httpx.Client(timeout=10)
        self._lock = threading.Lock()
        self._metadata: tuple[float, dict[str, Any]] | None = None
        self._keys: tuple[float, KeySet] | None = None

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            response = self._http.get(url)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise Unavailable(f"the OpenID provider did not answer {url}: {exc}") from None
        if not isinstance(data, dict):
            raise Unavailable(f"the OpenID provider sent no JSON object at {url}")
        return data

    def metadata(self) -> dict[str, Any]:
        with self._lock:
            if self._metadata is None or time.monotonic() - self._metadata[0] > METADATA_TTL_S:
                data = self._get_json(f"{self.issuer}/.well-known/openid-configuration")
                if str(data.get("issuer", "")).rstrip("/") != self.issuer:
                    raise Unavailable(
                        f"the provider's metadata names issuer {data.get('issuer')!r}, not {self.issuer!r}"
                    )
                self._metadata = (time.monotonic(), data)
            return self._metadata[1]

    def _key_set(self, refresh: bool = False) -> KeySet:
        with self._lock:
            cached = self._keys
        if cached is None or refresh or time.monotonic() - cached[0] > METADATA_TTL_S:
            keys = KeySet.import_key_set(self._get_json(str(self.metadata()["jwks_uri"])))  # type: ignore[arg-type]
            with self._lock:
                self._keys = (time.monotonic(), keys)
            return keys
        return cached[1]

    def _web_client(self, redirect_uri: str) -> OAuth2Client:
        return OAuth2Client(
            client_id=self.settings.client_id,
            client_secret=self.settings.client_secret,
            scope=self.settings.scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic" if self.settings.client_secret else "none",
            timeout=10,
        )

    def authorization_url(self, redirect_uri: str, *, state: str, nonce: str, code_verifier: str) -> str:
        with self._web_client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                self.metadata()["authorization_endpoint"],
                state=state,
                nonce=nonce,
                code_verifier=code_verifier,
            )
        return str(url)

    def exchange_code(self, redirect_uri: str, *, code: str, code_verifier: str) -> str:
        """The ID token the provider gives for an authorization code."""
        with self._web_client(redirect_uri) as client:
            try:
                token = client.fetch_token(
                    self.metadata()["token_endpoint"],
                    code=code,
                    code_verifier=code_verifier,
                    redirect_uri=redirect_uri,
                )
            except Exception as exc:  # authlib raises its own OAuthError, or httpx errors
                raise Unauthenticated(f"the OpenID provider refused the sign-in: {exc}") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise Unauthenticated("the OpenID provider returned no ID token (is the openid scope allowed?)")
        return id_token

    def verify_id_token(
        self, id_token: str, audiences: list[str], now: float, *, nonce: str | None = None
    ) -> dict[str, Any]:
        """The claims of a valid ID token for one of `audiences`, issued by our issuer, fresh enough."""
        try:
            try:
                token = jwt.decode(id_token, self._key_set(), algorithms=_SIGNING_ALGORITHMS)
            except JoseError:
                token = jwt.decode(id_token, self._key_set(refresh=True), algorithms=_SIGNING_ALGORITHMS)
            claims = dict(token.claims)
            registry = jwt.JWTClaimsRegistry(
                now=int(now),
                leeway=60,
                iss={"essential": True, "value": str(self.metadata()["issuer"])},
                aud={"essential": True, "values": audiences},
                exp={"essential": True},
                sub={"essential": True},
                iat={"essential": True},
            )
            registry.validate(claims)
        except (JoseError, ValueError) as exc:
            raise Unauthenticated(f"the ID token is not valid here: {exc}") from None
        if now - float(claims["iat"]) > self.settings.max_id_token_age_s:
            raise Unauthenticated("the ID token is too old; sign in again")
        if nonce is not None and claims.get("nonce") != nonce:
            raise Unauthenticated("the ID token answers another sign-in (nonce mismatch)")
        return claims
