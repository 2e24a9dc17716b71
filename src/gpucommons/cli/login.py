"""`commons login`: sign in through the organisation's OpenID provider; keep a GPU Commons session token.

By default a browser opens on the provider's login page and the answer comes back to a one-shot
listener on 127.0.0.1 (authorization code + PKCE). On an SSH host, `--device` shows a code to enter
on any device instead. Either way the provider's ID token is traded with the server for our own
short-lived, revocable session token, saved (mode 0600) in the CLI's config file next to the URL.
`commons login --logout` revokes it and forgets it.
"""

from __future__ import annotations

import json
import os
import webbrowser
from typing import TYPE_CHECKING, Annotated

import typer

from gpucommons.api.errors import CommonsError
from gpucommons.cli._client import config_path, fail, server_token, server_url
from gpucommons.cli.main import app

if TYPE_CHECKING:
    # authlib (via oidc_flows) and httpx are imported by `commons login` itself, never at start-up:
    # they cost ~0.2 s and authlib warns about its deprecations on import.
    from gpucommons.cli.oidc_flows import DevicePrompt


def save_credentials(url: str, token: str | None) -> None:
    """Write the server URL and token to the CLI config (other keys kept), readable by the owner only."""
    path = config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    data["url"] = url
    if token is None:
        data.pop("token", None)
    else:
        data["token"] = token
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.chmod(path, 0o600)


def _show_device_prompt(prompt: DevicePrompt) -> None:
    typer.echo(
        f"To sign in, open {prompt.verification_uri} on any device and enter the code: {prompt.user_code}"
    )
    if prompt.verification_uri_complete:
        typer.echo(f"(or open {prompt.verification_uri_complete})")
    typer.echo(f"Waiting for approval (the code expires in {prompt.expires_in_s // 60} min)...")


@app.command()
def login(
    url: Annotated[
        str | None, typer.Option(help="The GPU Commons server (default: COMMONS_URL or the saved one).")
    ] = None,
    device: Annotated[
        bool, typer.Option("--device", help="Sign in with a code on another device (SSH hosts).")
    ] = False,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the sign-in URL; open it yourself.")
    ] = False,
    timeout: Annotated[int, typer.Option(min=10, max=3600, help="Seconds to wait for the browser.")] = 300,
    logout: Annotated[
        bool, typer.Option("--logout", help="Revoke the saved session token and forget it.")
    ] = False,
) -> None:
    """Sign in with your organisation's account (OpenID Connect) and save a session token."""
    import httpx

    from gpucommons.cli.oidc_flows import SignInFailed, device_id_token, discover, loopback_id_token
    from gpucommons.client import CommonsClient
    from gpucommons.client.identity import IdentityApi

    base = (url or server_url()).rstrip("/")
    if logout:
        _logout(base)
        return

    def open_url(link: str) -> None:
        typer.echo(f"Sign in at: {link}")
        if not no_browser:
            webbrowser.open(link)

    try:
        with CommonsClient(base) as client, httpx.Client(timeout=30) as http:
            identity = IdentityApi(client)
            config = identity.auth_config()
            if not config.enabled or not config.issuer or not config.client_id:
                raise fail(
                    f"{base} has no sign-in configured (COMMONS_OIDC_ISSUER); "
                    "ask an admin for a token: commons token create --user YOU"
                )
            info = discover(config.issuer, config.client_id, config.scopes, http)
            id_token = (
                device_id_token(info, _show_device_prompt, http)
                if device
                else loopback_id_token(info, open_url, timeout_s=timeout)
            )
            session = identity.exchange_id_token(id_token)
        with CommonsClient(base, session.token) as client:
            me = IdentityApi(client).whoami()
    except SignInFailed as exc:
        raise fail(str(exc)) from None
    except CommonsError as exc:
        raise fail(exc.message) from None
    save_credentials(base, session.token)
    teams = ", ".join(me.member_of) or "none"
    roles = [r for r, held in (("platform admin", me.platform_admin), ("finance", me.finance)) if held]
    roles += [f"admin of {t}" for t in me.admin_of]
    typer.echo(
        f"Signed in to {base} as {me.subject} (teams: {teams}{'; ' + ', '.join(roles) if roles else ''})."
    )
    typer.echo(f"Session token saved in {config_path()}; it expires {session.expires_at:%Y-%m-%d %H:%M} UTC.")


def _logout(base: str) -> None:
    from gpucommons.client import CommonsClient
    from gpucommons.client.identity import IdentityApi

    token = server_token()
    if token:
        try:
            with CommonsClient(base, token) as client:
                IdentityApi(client).sign_out()
        except CommonsError as exc:
            typer.echo(
                f"note: the server did not revoke the token ({exc.message}); forgetting it anyway", err=True
            )
    save_credentials(base, None)
    typer.echo("Signed out.")
