"""`commons token create|list|revoke`: API tokens (platform admins only).

`create` prints what it made, then the token alone on its last line, so a script can take it with
`commons token create --role scim --name okta | tail -1`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli._client import api, fail
from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table
from gpucommons.policy.durations import DURATION_HELP, parse_duration

if TYPE_CHECKING:  # pydantic models: only annotations here, so not imported at start-up
    from gpucommons.api.identity import TokenInfo

token_app = typer.Typer(help="API tokens: create, list, revoke (platform admins).", no_args_is_help=True)
app.add_typer(token_app, name="token")
console = Console(highlight=False, soft_wrap=True)

ROLES = ("platform_admin", "finance", "team_admin", "team_member", "scim")


@token_app.command("create")
def create(
    name: Annotated[
        str | None, typer.Option(help="A label for the token (default: the user or role).")
    ] = None,
    user: Annotated[str | None, typer.Option(help="Act as this directory user (userName or id).")] = None,
    role: Annotated[
        str | None,
        typer.Option(help=f"One of {', '.join(ROLES)}: the service token's role, or narrows --user's token."),
    ] = None,
    team: Annotated[str | None, typer.Option(help="The team of a team_admin/team_member token.")] = None,
    expires: Annotated[str | None, typer.Option(help=f"Lifetime: {DURATION_HELP}. Default: never.")] = None,
    service_owned: Annotated[
        bool,
        typer.Option(
            "--service-owned",
            help="A service token that belongs to the service: it outlives your deprovisioning "
            "(otherwise losing your platform-admin role revokes the tokens you made).",
        ),
    ] = False,
) -> None:
    """Create an API token; its secret is shown once, alone on the last line."""
    from pydantic import ValidationError

    from gpucommons.api.identity import TokenCreate
    from gpucommons.client.identity import IdentityApi

    if role is not None and role not in ROLES:
        raise fail(f"--role must be one of {', '.join(ROLES)}, not {role!r}")
    try:
        lifetime = parse_duration(expires) if expires is not None else None
        body = TokenCreate(
            name=name or user or role or "token",
            user=user,
            role=role,  # type: ignore[arg-type]
            team=team,
            expires_in_s=lifetime,
            service_owned=service_owned,
        )
    except (ValueError, ValidationError) as exc:
        raise fail(_first_error(exc)) from None
    with api() as client:
        created = IdentityApi(client).create_token(body)
    expiry = _when(created.expires_at) if created.expires_at else "never"
    scope = created.role or "the user's directory roles"
    typer.echo(f"created token {created.id} ({created.name}) for {created.subject}: {scope}", err=False)
    owner = "the service (service-owned)" if created.service_owned else f"{created.created_by}'s authority"
    typer.echo(f"expires: {expiry}; rests on {owner}. Shown once; store it now.")
    typer.echo(created.token)


@token_app.command("list")
def list_tokens(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked tokens.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list.")] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column, even when the terminal is narrow.")
    ] = False,
) -> None:
    """API tokens and sign-in sessions (never their secrets)."""
    from gpucommons.client.identity import IdentityApi

    with api() as client:
        rows = IdentityApi(client).tokens(include_revoked=all_)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return
    print_table(console, _columns(all_), _rows(rows, all_), wide)


@token_app.command("revoke")
def revoke(token_id: Annotated[str, typer.Argument(help="The token's id (see commons token list).")]) -> None:
    """Revoke a token: the next request made with it fails."""
    from gpucommons.client.identity import IdentityApi

    with api() as client:
        row = IdentityApi(client).revoke_token(token_id)
    typer.echo(f"revoked token {row.id} ({row.name}) of {row.subject}")


def _columns(with_revoked: bool) -> tuple[Col, ...]:
    """Id, name, subject and role whole; at 80 columns when it was last used and who made it go first."""
    return (
        Col("ID", keep=True),
        Col("NAME", keep=True),
        Col("SUBJECT", keep=True),
        Col("ROLE", keep=True),
        Col("MADE BY", drop=2),
        Col("EXPIRES", drop=3),
        Col("LAST USED", drop=1),
        *([Col("REVOKED", keep=True)] if with_revoked else []),
    )


def _rows(rows: list[TokenInfo], with_revoked: bool) -> list[list[str]]:
    out = []
    for r in rows:
        role = (r.role or "user's roles") + (f"@{r.team}" if r.team else "")
        made_by = "service-owned" if r.service_owned else (r.created_by or "")
        expires = _when(r.expires_at) or "never"
        cells = [r.id, r.name, r.subject, role, made_by, expires, _when(r.last_used_at)]
        out.append([*map(escape, cells), *([_when(r.revoked_at)] if with_revoked else [])])
    return out


def _when(t: datetime | None) -> str:
    """UTC, to the minute; the year only when it is not this year's."""
    if t is None:
        return ""
    t = t.astimezone(UTC)
    return t.strftime("%m-%d %H:%M" if t.year == datetime.now(UTC).year else "%Y-%m-%d %H:%M")


def _first_error(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
    return str(exc)
