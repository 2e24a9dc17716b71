"""The environment checks of `commons doctor`: each says ok, info, warn or fail, and why.

Kept apart from the command so each check can be tested alone. Checks never raise: a probe that
goes wrong is itself the finding.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpucommons.api.errors import CommonsError
from gpucommons.backends.local.accounts import IsolationMode
from gpucommons.backends.local.inventory import Inventory

Status = Literal["ok", "info", "warn", "fail"]
GIB = 1024**3
#: Below this much free space under the home, logs and checkpoints soon fail to write.
DISK_FAIL_BYTES = 1 * GIB
DISK_WARN_BYTES = 10 * GIB


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str


def configured_isolation(env: Mapping[str, str]) -> IsolationMode | None:
    """`$COMMONS_ISOLATION` as the server reads it: `accounts`, `logical`, or auto (None: root decides)."""
    value = env.get("COMMONS_ISOLATION", "auto").strip().lower()
    return IsolationMode(value) if value in (IsolationMode.ACCOUNTS, IsolationMode.LOGICAL) else None


def isolation_check(mode: IsolationMode, user: str, blocked_by: str | None = None) -> Check:
    if mode is IsolationMode.ACCOUNTS:
        if blocked_by is not None:
            return Check(
                "team accounts",
                "fail",
                f"{blocked_by} is closed to other users, so team accounts cannot reach their workspaces "
                "and no task can start: use a home such as /var/lib/commons (--home, COMMONS_HOME)",
            )
        if shutil.which("useradd") is None:
            return Check("team accounts", "fail", "running as root, but useradd is missing: install 'passwd'")
        return Check("team accounts", "ok", f"running as {user}: each team's tasks run under its own account")
    return Check(
        "team accounts",
        "warn",
        f"running as {user}, not root: every task runs as {user}; teams are separated by the API only",
    )


def task_path_check(mode: IsolationMode, server_path: str, interpreter: str) -> Check:
    """Can tasks start a program, and `commons`? The PATH is the one the executor gives them
    (`task_path.task_path`, from a server started with this PATH and interpreter): it must have `sh`
    and `python3`, and should have `commons` (the README's tasks call `commons checkpoint`)."""
    from gpucommons.backends.local.task_path import find_program, runnable_by_others, task_path

    accounts = mode is IsolationMode.ACCOUNTS
    path = task_path(server_path, interpreter, team_account=accounts)
    who = "team accounts" if accounts else "tasks"
    missing = [p for p in ("sh", "python3") if find_program(p, path) is None]
    if missing:
        return Check(
            "task PATH",
            "fail",
            f"{who} find no {' or '.join(missing)} in PATH={path}: install it in /usr/bin (Debian: "
            "apt-get install python3) or start the server with a PATH that has it",
        )
    text = (
        f"{who} get PATH={path} (from a server started with this shell's PATH); python3 is "
        f"{find_program('python3', path)}"
    )
    if accounts and not runnable_by_others(Path(interpreter)):
        return Check(
            "task PATH",
            "warn",
            f"{text}. The platform's own interpreter ({interpreter}) is in a directory team accounts "
            "cannot enter, so tasks cannot run `commons` or the platform's Python: install GPU Commons "
            "under a readable path (e.g. /opt/commons) if tasks need them",
        )
    commons = find_program("commons", path)
    if commons is None:
        return Check(
            "task PATH",
            "warn",
            f"{text}; no `commons` there, so `commons checkpoint` fails inside tasks: install GPU Commons "
            f"so that its `commons` script sits beside {interpreter}",
        )
    return Check("task PATH", "ok", f"{text}; commons is {commons}")


def inventory_checks(inventory: Inventory) -> list[Check]:
    pools = ", ".join(f"{p.pool} {len(p.devices)}/{p.declared}" for p in inventory.pools)
    status: Status = "ok" if inventory.source != "virtual" else "info"
    checks = [
        Check("GPU inventory", status, f"source {inventory.source}: {inventory.gpu_count} GPU(s) ({pools})")
    ]
    # With real GPUs a warning is a mismatch with the policy; with virtual ones, why none was found.
    checks += [Check("GPU inventory", "warn" if status == "ok" else "info", w) for w in inventory.warnings]
    return checks


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_check(home: Path) -> Check:
    where = _existing_ancestor(home)
    try:
        free = shutil.disk_usage(where).free
    except OSError as exc:
        return Check("disk space", "warn", f"cannot read free space at {where}: {exc.strerror}")
    text = f"{free / GIB:.1f} GiB free at {where} (logs, checkpoints, workspaces)"
    if free < DISK_FAIL_BYTES:
        return Check("disk space", "fail", text)
    return Check("disk space", "warn" if free < DISK_WARN_BYTES else "ok", text)


def _writable(directory: Path) -> bool:
    where = _existing_ancestor(directory)
    return os.access(where, os.W_OK | os.X_OK)


def database_check(url: str | None, home: Path) -> Check:
    """SQLite: its directory must be writable. PostgreSQL: it must answer `select 1`."""
    if not url:
        path = home / "commons.db"
        if _writable(home):
            return Check("database", "ok", f"SQLite at {path} (default; COMMONS_DATABASE_URL for PostgreSQL)")
        return Check("database", "fail", f"SQLite at {path}, but {home} cannot be created or written")
    if url.startswith("sqlite"):
        path = Path(url.split(":///", 1)[-1])
        ok = _writable(path.parent)
        return Check(
            "database", "ok" if ok else "fail", f"SQLite at {path}" + ("" if ok else ": not writable")
        )
    if url.startswith(("postgresql", "postgres")):
        return _postgres_check(url)
    return Check(
        "database", "warn", f"COMMONS_DATABASE_URL has a scheme doctor does not know: {url.split(':')[0]}"
    )


def _postgres_check(url: str) -> Check:
    import psycopg

    rest = url.split("://", 1)[1]
    plain = "postgresql://" + rest  # SQLAlchemy's `postgresql+psycopg://` → libpq's form
    shown = plain.split("@", 1)[-1]  # never print a password
    try:
        with psycopg.connect(plain, connect_timeout=3) as conn:
            row = conn.execute("select current_setting('server_version')").fetchone()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Check("database", "fail", f"PostgreSQL at {shown} does not answer: {first}")
    version = row[0] if row else "?"
    return Check("database", "ok", f"PostgreSQL {version} at {shown} answers")


def server_check(url: str, token: str | None) -> Check:
    from gpucommons.client import CommonsClient, ServerUnreachable  # httpx: only when doctor runs

    try:
        with CommonsClient(url, token, timeout=3) as client:
            health = client.health()
    except ServerUnreachable:
        return Check("server", "info", f"no server answers at {url} (fine before `commons up`)")
    except CommonsError as exc:
        return Check("server", "warn", f"the server at {url} answered with an error: {exc}")
    status: Status = "ok" if health.status == "ok" else "warn"
    return Check(
        "server",
        status,
        f"{url}: {health.status}, scheduler {health.scheduler}, executor {health.executor}, "
        f"version {health.version}",
    )


def browser_check() -> Check:
    return Check(
        "chromium / node",
        "ok",
        "not needed: the dashboard is served by the server; only the test suite drives a browser or node",
    )


def engine_build_check(env: Mapping[str, str]) -> Check:
    """Which engine runs: the mypyc build of a checkout, or the Python sources, and why (the same
    decisions either way; the build replays history in about a third of the CPU)."""
    from gpucommons import _native

    if _native.compiled():
        return Check("engine build", "ok", "compiled with mypyc (scripts/build_native.py)")
    if _native.pure_requested(env):
        why = f"{_native.PURE_ENV} is set"
    elif not _native.MANIFEST.exists():
        why = "not built: a checkout's `python scripts/build_native.py` compiles it"
    else:
        why = "the build is older than the sources: `python scripts/build_native.py` rebuilds it"
    return Check("engine build", "info", f"Python sources ({why}); replays take about 3× the CPU")
