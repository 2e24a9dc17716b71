"""The lock that makes one server process the leader of a database, for every kind of database.

`Leadership` is the small interface the server's election thread (and any backend's own watchers)
use; `leadership_for(database, name)` picks the implementation:

- PostgreSQL: a session advisory lock, `pg_try_advisory_lock(key)`, taken on a connection of its own
  (not from the pool, so no request ever borrows it and no pool recycling ever drops it) and kept open
  while the process leads. The lock belongs to that database session: when the leader's process dies,
  even by `kill -9`, its socket closes, the server ends the session and the lock is free at once. A
  leader whose connection dies (network, a restart of PostgreSQL, `pg_terminate_backend`) no longer
  holds the lock, and notices within one check: `still_held` asks the server whether this session still
  holds it, with TCP keepalives and a short statement timeout so that a dead peer fails the check in a
  few seconds instead of hanging. The server side keeps its own keepalives on that session, so a leader
  that vanished from the network loses the lock within about `keepalive_idle + 3 * interval` seconds.
- SQLite: one server process per database anyway; an exclusive `fcntl.flock` on a file beside the
  database (`commons.db.lock`, which also names the holder's pid) gives the same interface, so the
  server runs one mechanism whatever the database. The kernel drops a flock when its process dies.

Keys: one 64-bit advisory-lock key per `name` (a hash of it), so another component (a backend's
watchers) may hold a leadership of its own beside the server's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import socket
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.engine import make_url

from gpucommons.store.db import Database

log = logging.getLogger(__name__)

#: The server's own leadership (scheduler and background workers).
SERVER = "gpucommons.server"

#: Seconds of silence before the first keepalive probe, between probes, and how many probes go
#: unanswered before the peer is considered dead (client and server side alike).
KEEPALIVE_IDLE_S = 3
KEEPALIVE_INTERVAL_S = 1
KEEPALIVE_COUNT = 3
#: The longest a check (or the attempt) may take on the server.
STATEMENT_TIMEOUT_MS = 3000
CONNECT_TIMEOUT_S = 3


class Leadership(Protocol):
    """An exclusive lock one process holds while it leads."""

    @property
    def is_leader(self) -> bool:
        """This object holds the lock (as far as it knows: `still_held` asks)."""
        ...

    def try_acquire(self) -> bool:
        """Take the lock if it is free; never waits. Raises `OSError`/database errors when the
        lock's store cannot be reached."""
        ...

    def still_held(self) -> bool:
        """Ask the lock's store whether this process still holds the lock; False on any failure."""
        ...

    def release(self) -> None:
        """Give the lock up (and close what held it); safe to call when not held."""
        ...

    def describe(self) -> str:
        """What the lock is, for messages: "PostgreSQL advisory lock 123 on db@host"."""
        ...

    def holder(self) -> str | None:
        """Who holds the lock now, when it can be told (for the follower's message)."""
        ...


def lock_key(name: str) -> int:
    """A stable signed 64-bit key for `pg_try_advisory_lock` from a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def process_label() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


class PostgresLeadership:
    def __init__(self, url: str, name: str = SERVER) -> None:
        parsed = make_url(url)
        self._conninfo = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        self._where = f"{parsed.database}@{parsed.host or 'localhost'}"
        self.name = name
        self.key = lock_key(name)
        self._conn: Any = None
        self._held = False

    @property
    def is_leader(self) -> bool:
        return self._held

    def _connect(self) -> Any:
        import psycopg

        options = (
            f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c tcp_keepalives_idle={KEEPALIVE_IDLE_S}"
            f" -c tcp_keepalives_interval={KEEPALIVE_INTERVAL_S} -c tcp_keepalives_count={KEEPALIVE_COUNT}"
        )
        return psycopg.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name=f"gpu-commons leadership {self.name} ({process_label()})"[:63],
            keepalives=1,
            keepalives_idle=KEEPALIVE_IDLE_S,
            keepalives_interval=KEEPALIVE_INTERVAL_S,
            keepalives_count=KEEPALIVE_COUNT,
            # Unacknowledged data for this long closes the connection (Linux): a check never hangs.
            tcp_user_timeout=STATEMENT_TIMEOUT_MS + 1000,
            options=options,
        )

    def try_acquire(self) -> bool:
        if self._held:
            return True
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        try:
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        except Exception:
            self._close()
            raise
        self._held = bool(row and row[0])
        return self._held

    def still_held(self) -> bool:
        if not self._held or self._conn is None:
            return False
        try:
            row = self._conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid = pg_backend_pid() AND objsubid = 1"
                " AND ((classid::bigint << 32) | objid::bigint) = %s::bigint",
                (self.key,),
            ).fetchone()
        except Exception as exc:
            log.warning("leadership check on %s failed: %s", self.describe(), exc)
            self._held = False
            self._close()
            return False
        self._held = bool(row and row[0])
        return self._held

    def release(self) -> None:
        if self._held and self._conn is not None and not self._conn.closed:
            with contextlib.suppress(Exception):
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        self._held = False
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def describe(self) -> str:
        return f"PostgreSQL advisory lock {self.key} ({self.name}) on {self._where}"

    def holder(self) -> str | None:
        """The application name of the session holding the lock (needs a connection of ours)."""
        if self._conn is None or self._conn.closed:
            return None
        try:
            row = self._conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
                " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND ((l.classid::bigint << 32) | l.objid::bigint)"
                " = %s::bigint",
                (self.key,),
            ).fetchone()
        except Exception:
            return None
        if not row or not row[0]:
            return None
        name = str(row[0])
        # "gpu-commons leadership NAME (host pid N)": the part in parentheses says who.
        return name[name.find("(") + 1 : name.rfind(")")] if "(" in name else name


class FileLeadership:
    """An exclusive `flock` on a file; the file also says who holds it (for the refusal message)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None

    @property
    def is_leader(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{process_label()}\n".encode())
        st = os.fstat(fd)
        self._fd, self._inode = fd, (st.st_dev, st.st_ino)
        return True

    def still_held(self) -> bool:
        """Held while our descriptor is open and the path still names the file we locked (a lock on
        a deleted or replaced file would let another process lock the new one)."""
        if self._fd is None:
            return False
        try:
            st = os.stat(self.path)
            held = (st.st_dev, st.st_ino) == self._inode
        except OSError:
            held = False
        if not held:
            os.close(self._fd)  # not ours to truncate any more
            self._fd = self._inode = None
        return held

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = self._inode = None

    def describe(self) -> str:
        return f"lock file {self.path}"

    def holder(self) -> str | None:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return text or None


def sqlite_lock_path(url: str) -> Path | None:
    """The lock file beside a SQLite database file (None for an in-memory database)."""
    database = make_url(url).database
    if not database or database == ":memory:":
        return None
    return Path(database).with_name(Path(database).name + ".lock")


def leadership_for(db: Database, name: str = SERVER, *, fallback_dir: Path | None = None) -> Leadership:
    """The lock of `name` on this database: an advisory lock (PostgreSQL) or a file lock (SQLite)."""
    if not db.is_sqlite:
        return PostgresLeadership(db.url, name)
    path = sqlite_lock_path(db.url)
    if path is None:
        if fallback_dir is None:
            raise ValueError("an in-memory SQLite database has no place for a lock file")
        path = fallback_dir / "commons.db.lock"
    if name != SERVER:
        path = path.with_name(f"{path.name}.{hashlib.sha256(name.encode()).hexdigest()[:12]}")
    return FileLeadership(path)
