"""How CLI commands reach the server: COMMONS_URL and COMMONS_TOKEN, else the `commons login` file.

`with api() as client:` gives a `CommonsClient`; any API error ends the command with exit code 1
and the server's message (never a traceback).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import typer
from rich.console import Console

from gpucommons.api.errors import CommonsError, Unauthenticated

if TYPE_CHECKING:  # the client pulls in httpx and pydantic: imported when a command talks to the server
    from gpucommons.client import CommonsClient

DEFAULT_URL = "http://127.0.0.1:8080"
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpucommons" / "config.json"


def _config() -> dict[str, str]:
    try:
        data = json.loads(config_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return (
        {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(data, dict)
        else {}
    )


def server_url() -> str:
    return os.environ.get("COMMONS_URL") or _config().get("url") or DEFAULT_URL


def server_token() -> str | None:
    """COMMONS_TOKEN, else the `commons login` file, else — for a server on this machine — the
    bootstrap admin token `commons up` wrote in its home, when this user may read it (mode 0600:
    only the server's own user, or root)."""
    return os.environ.get("COMMONS_TOKEN") or _config().get("token") or _local_admin_token()


def default_home_text() -> str:
    from gpucommons.backends.local.accounts import default_home

    return str(default_home(os.environ))


def _local_admin_token() -> str | None:
    if urlsplit(server_url()).hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    from gpucommons.backends.local.accounts import default_home

    try:
        token = (default_home(os.environ) / "admin-token").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return token or None


def fail(message: str) -> typer.Exit:
    err_console.print(f"error: {message}", markup=False)
    return typer.Exit(1)


def error_text(exc: CommonsError) -> str:
    """The server's message, then each listed issue that adds something to it (path: message)."""
    lines = [exc.message]
    issues = exc.details.get("issues") or exc.details.get("errors")
    if isinstance(issues, list):
        for issue in issues[:20]:
            if not isinstance(issue, dict):
                continue
            where, text = issue.get("path") or issue.get("field") or "", str(issue.get("message", ""))
            if where and text and text not in exc.message:
                lines.append(f"  {where}: {text}")
    return "\n".join(lines)


@contextmanager
def api() -> Iterator[CommonsClient]:
    """A client for the configured server; API errors become `error: ...` and exit code 1."""
    from gpucommons.client import CommonsClient

    if os.environ.get("COMMONS_TOKEN") == "":
        raise fail(
            "COMMONS_TOKEN is empty: set it to a token, e.g. with the `export` line `commons up` printed "
            "(as root the server keeps its admin token in /var/lib/commons/admin-token), or unset it "
            "and run `commons login`"
        )
    token = server_token()
    client = CommonsClient(server_url(), token)
    try:
        yield client
    except Unauthenticated as exc:
        if token is None:
            raise fail(
                "no token: set COMMONS_TOKEN (the `export` line `commons up` printed) or run `commons login`"
            ) from None
        if not os.environ.get("COMMONS_TOKEN") and not _config().get("token"):
            raise fail(
                f"{error_text(exc)} (the token came from the admin-token file of {default_home_text()}; "
                "set COMMONS_TOKEN to use another one)"
            ) from None
        raise fail(error_text(exc)) from None
    except CommonsError as exc:
        raise fail(error_text(exc)) from None
    finally:
        client.close()
