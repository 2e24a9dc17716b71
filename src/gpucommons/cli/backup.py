"""`commons backup FILE` and `commons restore FILE`: the database to one file and back.

These two work on the database directly, not through the server (a restore must happen with no
server running, and a backup must see every table, including token hashes no API shows): the one
CLI module beside `commons up` that imports the store (import-linter allows exactly these two).
The database is found as `commons up` finds it: `--database-url` / `COMMONS_DATABASE_URL`, else the
SQLite file under `--home` / `COMMONS_HOME`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli._client import fail
from gpucommons.cli.main import app

if TYPE_CHECKING:
    from rich.progress import TaskID

    from gpucommons.store.db import Database

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Data directory of the server (its SQLite database is HOME/commons.db).",
        show_default="$COMMONS_HOME, /var/lib/commons as root, else ~/.commons",
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="The database, e.g. postgresql+psycopg://user@host/db.",
        show_default="$COMMONS_DATABASE_URL, else SQLite under --home",
    ),
]


def database_url(home: Path | None, url: str | None) -> str:
    """The database `commons up` with these settings would use."""
    from gpucommons.backends.local.accounts import default_home

    url = url or os.environ.get("COMMONS_DATABASE_URL") or None
    if url:
        return url
    env_home = os.environ.get("COMMONS_HOME")
    base = home or (Path(env_home) if env_home else default_home(os.environ))
    return f"sqlite:///{base.expanduser().resolve() / 'commons.db'}"


@contextmanager
def progress_bar(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """One rich progress bar on stderr: rows (or pages) copied of all, and the table being copied;
    silent when stderr is not a terminal."""
    from gpucommons.cli.progress import counting_bar

    console = Console(stderr=True)
    bar = counting_bar(
        18, "{task.fields[unit]}", console=console, transient=True, disable=quiet or not console.is_terminal
    )
    task: list[TaskID] = []

    def update(step: str, done: int, total: int) -> None:
        unit = "pages" if step == "pages" else "rows"
        if not task:
            task.append(bar.add_task(step, total=total, unit=unit))
        bar.update(task[0], description=step, completed=done, total=total, unit=unit)

    with bar:
        yield update


def _database(url: str) -> Database:
    from gpucommons.store.db import Database

    try:
        return Database(url)
    except Exception as exc:  # an unknown driver, a malformed URL
        raise fail(f"cannot use the database URL {url!r}: {exc}") from None


@app.command()
def backup(
    file: Annotated[Path, typer.Argument(help="The snapshot file to write.", show_default=False)],
    home: HomeOption = None,
    url: UrlOption = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Write a consistent snapshot of the database to FILE while the server keeps running."""
    from gpucommons.store.backup import backup as take
    from gpucommons.store.snapshot import SnapshotError, describe_url

    if file.exists() and not force:
        raise fail(f"{file} exists: pass --force to overwrite it, or name another file")
    db = _database(database_url(home, url))
    try:
        with progress_bar(quiet) as update:
            info = take(db, file, progress=update)
    except SnapshotError as exc:
        raise fail(str(exc)) from None
    finally:
        db.dispose()
    out = Console(highlight=False, soft_wrap=True)
    out.print(
        f"backed up {escape(describe_url(db.url))} to {escape(str(info.path))}: {info.total_rows:,} rows in "
        f"{len(info.rows)} tables, schema revision {info.revision}, consistent as of {info.meta['taken_at']}"
    )
    out.print(_counts(info.rows))


@app.command()
def restore(
    file: Annotated[Path, typer.Argument(help="A snapshot `commons backup` wrote.", show_default=False)],
    home: HomeOption = None,
    url: UrlOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace what the database holds (refused when it is not empty).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Restore the snapshot FILE into the database; no server may run on it meanwhile."""
    from gpucommons.store.restore import restore as put_back
    from gpucommons.store.snapshot import SnapshotError, describe_url

    db = _database(database_url(home, url))
    if db.is_sqlite:
        from sqlalchemy.engine import make_url

        target = Path(make_url(db.url).database or "")
        if not target.parent.is_dir():
            db.dispose()
            raise fail(f"the directory {target.parent} of {target} does not exist (is --home right?)")
    try:
        with progress_bar(quiet) as update:
            result = put_back(db, file, force=force, progress=update)
    except SnapshotError as exc:
        raise fail(str(exc)) from None
    finally:
        db.dispose()
    info = result.snapshot
    out = Console(highlight=False, soft_wrap=True)
    taken = info.meta.get("taken_at", "unknown time")
    source = info.meta.get("source", "an unnamed database")
    out.print(
        f"restored {escape(str(file))} (taken {taken} from {escape(source)}) into "
        f"{escape(describe_url(db.url))}: "
        f"{info.total_rows:,} rows in {len(info.rows)} tables, schema revision {info.revision}"
    )
    if result.upgraded_from:
        out.print(
            f"the snapshot was at revision {result.upgraded_from}; it was upgraded to {info.revision} first"
        )
    if result.replaced:
        out.print("replaced what was there (--force): " + _counts(result.replaced))
    out.print(_counts(info.rows))
    out.print("start the server on it with `commons up` (the same --home / COMMONS_DATABASE_URL)")


def _counts(rows: dict[str, int]) -> str:
    """Rows per table, the tables with rows only."""
    full = [f"{name} {n:,}" for name, n in rows.items() if n]
    empty = len(rows) - len(full)
    return "rows: " + (", ".join(full) or "none") + (f" ({empty} tables empty)" if empty and full else "")
