"""Sign-in and the caller: the web login (authorization code + PKCE), the CLI's token exchange, whoami.

- `GET /auth/login?next=/` → the provider's login page; `GET /auth/callback` verifies, signs in, sets
  the `commons_session` cookie (HttpOnly, SameSite=Lax) and returns to `next` (a local path only).
- `POST /auth/logout` revokes the session behind the cookie or bearer token.
- `GET /api/v1/auth/config` (no credentials): what `commons login` needs to talk to the provider.
- `POST /api/v1/auth/token`: an ID token the CLI obtained (loopback + PKCE, or device flow) for a
  GPU Commons session token; only `aud` = our native or web client is accepted, issued recently.
- `GET /api/v1/auth/whoami`, `DELETE /api/v1/auth/session` (sign out this credential).
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any

from authlib.common.security import generate_token
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse
from itsdangerous import BadSignature, URLSafeTimedSerializer

from gpucommons.api.errors import BadRequest, NotFound, Unauthenticated
from gpucommons.api.identity import AuthConfig, IdTokenExchange, SessionToken, WhoAmI
from gpucommons.identity.oidc import ClaimsError, identity_from_claims
from gpucommons.server.auth.audit import audit_note
from gpucommons.server.auth.credentials import revoke_token
from gpucommons.server.auth.deps import SESSION_COOKIE, CurrentPrincipal, database, root_state
from gpucommons.server.auth.oidc import OidcProvider, OidcSettings
from gpucommons.server.auth.signin import sign_in
from gpucommons.server.auth.token_admin import utc_datetime

STATE_COOKIE = "commons_oidc"
STATE_MAX_AGE_S = 600

web = APIRouter(tags=["sign-in"])
api = APIRouter(prefix="/api/v1/auth", tags=["sign-in"])


def oidc_settings(request: Request) -> OidcSettings:
    state = root_state(request)
    settings = getattr(state, "oidc_settings", None)
    if not isinstance(settings, OidcSettings):
        settings = OidcSettings()
        state.oidc_settings = settings
    return settings


def oidc_provider(request: Request) -> OidcProvider:
    settings = oidc_settings(request)
    if not settings.enabled:
        raise NotFound("sign-in is not configured: set COMMONS_OIDC_ISSUER and COMMONS_OIDC_CLIENT_ID")
    state = root_state(request)
    provider = getattr(state, "oidc_provider", None)
    if not isinstance(provider, OidcProvider):
        provider = OidcProvider(settings)
        state.oidc_provider = provider
    return provider


def _serializer(request: Request) -> URLSafeTimedSerializer:
    settings = oidc_settings(request)
    state = root_state(request)
    secret = settings.cookie_secret or getattr(state, "oidc_cookie_secret", None)
    if secret is None:
        secret = secrets.token_urlsafe(32)
        state.oidc_cookie_secret = secret
    return URLSafeTimedSerializer(secret, salt="commons-oidc-web-sign-in")


def _redirect_uri(request: Request) -> str:
    public = oidc_settings(request).public_url
    return f"{public.rstrip('/')}/auth/callback" if public else str(request.url_for("oidc_callback"))


def _local_path(target: str) -> str:
    """Only a path on this server: never an open redirect to another site."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


@web.get("/auth/login", name="oidc_login", status_code=303)
def login(request: Request, next: Annotated[str, Query(max_length=2000)] = "/") -> RedirectResponse:
    provider = oidc_provider(request)
    flow = {
        "state": generate_token(32),
        "nonce": generate_token(32),
        "verifier": generate_token(64),
        "next": _local_path(next),
    }
    url = provider.authorization_url(
        _redirect_uri(request), state=flow["state"], nonce=flow["nonce"], code_verifier=flow["verifier"]
    )
    response = RedirectResponse(url, status_code=303)
    response.set_cookie(
        STATE_COOKIE,
        _serializer(request).dumps(flow),
        max_age=STATE_MAX_AGE_S,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/auth",
    )
    return response


@web.get("/auth/callback", name="oidc_callback", status_code=303)
def callback(
    request: Request,
    code: str | None = None,
    state: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
) -> RedirectResponse:
    if error:
        raise Unauthenticated(
            f"the OpenID provider refused the sign-in: {error}: {error_description or ''}".strip()
        )
    try:
        flow: dict[str, Any] = _serializer(request).loads(
            request.cookies.get(STATE_COOKIE, ""), max_age=STATE_MAX_AGE_S
        )
    except BadSignature:
        raise BadRequest(
            "no sign-in under way in this browser (or it took over 10 minutes); start again at /auth/login"
        ) from None
    if not code or not state or not secrets.compare_digest(state, str(flow.get("state", ""))):
        raise BadRequest("the sign-in answer does not match the sign-in this browser started")
    provider = oidc_provider(request)
    settings = oidc_settings(request)
    id_token = provider.exchange_code(_redirect_uri(request), code=code, code_verifier=str(flow["verifier"]))
    now = time.time()
    claims = provider.verify_id_token(id_token, [str(settings.client_id)], now, nonce=str(flow["nonce"]))
    issued = _sign_in(request, claims, now, via="web")
    audit_note(request, "auth.login", target=issued.row.id, user=issued.row.subject, via="web")
    response = RedirectResponse(_local_path(str(flow.get("next", "/"))), status_code=303)
    response.delete_cookie(STATE_COOKIE, path="/auth")
    response.set_cookie(
        SESSION_COOKIE,
        issued.token,
        max_age=settings.session_ttl_s,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


def _sign_in(request: Request, claims: dict[str, Any], now: float, via: str) -> Any:
    settings = oidc_settings(request)
    try:
        who = identity_from_claims(claims, settings.groups_claim)
    except ClaimsError as exc:
        raise Unauthenticated(str(exc)) from None
    with database(request).session() as session:
        return sign_in(
            session,
            who,
            now,
            ttl_s=settings.session_ttl_s,
            seed_groups=settings.seed_groups_from_claims,
            via=via,
        )


@web.post("/auth/logout", status_code=204)
def logout(request: Request, who: CurrentPrincipal) -> Response:
    _revoke_current(request, who.credential_id)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _revoke_current(request: Request, credential_id: str | None) -> None:
    if credential_id is None:
        return
    with database(request).session() as session:
        revoke_token(session, credential_id, time.time())


@api.get("/config", response_model=AuthConfig)
def config(request: Request) -> AuthConfig:
    settings = oidc_settings(request)
    if not settings.enabled:
        return AuthConfig(enabled=False)
    return AuthConfig(
        enabled=True, issuer=settings.issuer, client_id=settings.native_client_id, scopes=settings.scope_list
    )


@api.post("/token", response_model=SessionToken)
def exchange(body: IdTokenExchange, request: Request) -> SessionToken:
    provider = oidc_provider(request)
    settings = oidc_settings(request)
    audiences = [a for a in {settings.native_client_id, settings.client_id} if a]
    now = time.time()
    claims = provider.verify_id_token(body.id_token, audiences, now)
    issued = _sign_in(request, claims, now, via="cli")
    audit_note(request, "auth.login", target=issued.row.id, user=issued.row.subject, via="cli")
    expires = utc_datetime(issued.row.expires_at)
    assert expires is not None
    return SessionToken(token=issued.token, expires_at=expires, subject=issued.row.subject)


@api.get("/whoami", response_model=WhoAmI)
def whoami(who: CurrentPrincipal) -> WhoAmI:
    return WhoAmI(
        subject=who.subject,
        display_name=who.display_name,
        user_id=who.user_id,
        credential_id=who.credential_id,
        platform_admin=who.platform_admin,
        finance=who.finance,
        scim=who.scim,
        member_of=sorted(who.member_of),
        admin_of=sorted(who.admin_of),
    )


@api.delete("/session", status_code=204)
def sign_out(request: Request, who: CurrentPrincipal) -> Response:
    """Revoke the token this request was made with (`commons login --logout`)."""
    _revoke_current(request, who.credential_id)
    return Response(status_code=204)
