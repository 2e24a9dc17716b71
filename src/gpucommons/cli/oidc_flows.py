"""How `commons login` gets an ID token from the OpenID provider, as a public native client.

- `loopback_id_token`: authorization code + PKCE (S256) with a redirect to a one-shot HTTP listener on
  127.0.0.1 and a free port (RFC 8252 §7.3); the browser is opened by the caller.
- `device_id_token`: the device authorization grant (RFC 8628), for SSH hosts without a browser:
  show a code and a URL, then poll the token endpoint.
The ID token then goes to the server (`POST /api/v1/auth/token`), which verifies it and answers with
our own short-lived session token. authlib builds the PKCE request and exchanges the code.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
from authlib.common.security import generate_token

from gpucommons._authlib import OAuth2Client

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


class SignInFailed(RuntimeError):
    """The sign-in did not complete; the message says why and what to try."""


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    issuer: str
    client_id: str
    scopes: str
    authorization_endpoint: str
    token_endpoint: str
    device_authorization_endpoint: str | None


def discover(issuer: str, client_id: str, scopes: list[str], http: httpx.Client) -> ProviderInfo:
    url = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
    try:
        meta = http.get(url).raise_for_status().json()
    except (httpx.HTTPError, ValueError) as exc:
        raise SignInFailed(f"cannot read the OpenID provider's configuration at {url}: {exc}") from None
    return ProviderInfo(
        issuer=issuer,
        client_id=client_id,
        scopes=" ".join(scopes),
        authorization_endpoint=str(meta["authorization_endpoint"]),
        token_endpoint=str(meta["token_endpoint"]),
        device_authorization_endpoint=meta.get("device_authorization_endpoint"),
    )


def _unverified_claims(id_token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified: only to match our nonce (the server verifies the signature)."""
    try:
        payload = id_token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError) as exc:
        raise SignInFailed(f"the provider's ID token is malformed: {exc}") from None
    if not isinstance(claims, dict):
        raise SignInFailed("the provider's ID token is malformed")
    return claims


class _Callback(BaseHTTPRequestHandler):
    result: dict[str, str]
    done: threading.Event

    def do_GET(self) -> None:
        parsed = urlparse(self.path)
        if parsed.path != "/callback":
            self.send_error(404)
            return
        self.result.update({k: v[0] for k, v in parse_qs(parsed.query).items()})
        ok = "code" in self.result
        body = (
            "<h1>Signed in to GPU Commons.</h1><p>You can close this tab and return to the terminal.</p>"
            if ok
            else "<h1>Sign-in failed.</h1><p>See the terminal.</p>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.done.set()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


def loopback_id_token(info: ProviderInfo, open_url: Callable[[str], object], timeout_s: float = 300) -> str:
    """Sign in through the browser and a loopback redirect; the ID token."""
    done = threading.Event()
    result: dict[str, str] = {}
    handler = type("Callback", (_Callback,), {"result": result, "done": done})
    server = HTTPServer(("127.0.0.1", 0), handler)
    redirect_uri = f"http://127.0.0.1:{server.server_address[1]}/callback"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        verifier, state, nonce = generate_token(64), generate_token(32), generate_token(32)
        with OAuth2Client(
            client_id=info.client_id,
            scope=info.scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method="none",
            timeout=30,
        ) as client:
            url, _ = client.create_authorization_url(
                info.authorization_endpoint, state=state, nonce=nonce, code_verifier=verifier
            )
            open_url(url)
            if not done.wait(timeout_s):
                raise SignInFailed(
                    f"no answer from the browser within {timeout_s:.0f}s; try `commons login --device`"
                )
            if "error" in result:
                raise SignInFailed(
                    f"the provider refused: {result['error']} {result.get('error_description', '')}"
                )
            if result.get("state") != state:
                raise SignInFailed("the browser answered another sign-in (state mismatch); try again")
            try:
                token = client.fetch_token(
                    info.token_endpoint,
                    code=result["code"],
                    code_verifier=verifier,
                    redirect_uri=redirect_uri,
                )
            except Exception as exc:  # authlib's OAuthError or an httpx error
                raise SignInFailed(f"the provider refused the code: {exc}") from None
    finally:
        server.shutdown()
        server.server_close()
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise SignInFailed("the provider returned no ID token (is the openid scope allowed for this client?)")
    if _unverified_claims(id_token).get("nonce") != nonce:
        raise SignInFailed("the ID token answers another sign-in (nonce mismatch)")
    return id_token


@dataclass(frozen=True, slots=True)
class DevicePrompt:
    verification_uri: str
    verification_uri_complete: str | None
    user_code: str
    expires_in_s: int


def device_id_token(
    info: ProviderInfo,
    show: Callable[[DevicePrompt], object],
    http: httpx.Client,
    sleep: Callable[[float], object] = time.sleep,
) -> str:
    """Sign in with the device authorization grant: show the code, poll until approved; the ID token."""
    if not info.device_authorization_endpoint:
        raise SignInFailed(
            "the OpenID provider offers no device authorization; use `commons login` in a browser"
        )
    try:
        grant = (
            http.post(
                info.device_authorization_endpoint, data={"client_id": info.client_id, "scope": info.scopes}
            )
            .raise_for_status()
            .json()
        )
    except (httpx.HTTPError, ValueError) as exc:
        raise SignInFailed(f"the provider refused the device authorization: {exc}") from None
    show(
        DevicePrompt(
            verification_uri=str(grant["verification_uri"]),
            verification_uri_complete=grant.get("verification_uri_complete"),
            user_code=str(grant["user_code"]),
            expires_in_s=int(grant.get("expires_in", 600)),
        )
    )
    interval = float(grant.get("interval", 5))
    deadline = time.monotonic() + int(grant.get("expires_in", 600))
    while time.monotonic() < deadline:
        response = http.post(
            info.token_endpoint,
            data={
                "grant_type": DEVICE_GRANT,
                "device_code": grant["device_code"],
                "client_id": info.client_id,
            },
        )
        body = response.json() if response.content else {}
        if response.status_code == 200 and isinstance(body.get("id_token"), str):
            return str(body["id_token"])
        error = body.get("error")
        if error == "authorization_pending":
            sleep(interval)
        elif error == "slow_down":
            interval += 5
            sleep(interval)
        else:
            reason = f"{error or response.status_code} {body.get('error_description', '')}".strip()
            raise SignInFailed(f"the device sign-in ended: {reason}")
    raise SignInFailed("the code expired before it was approved; run `commons login --device` again")
