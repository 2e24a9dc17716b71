"""Benchmark: the group committer's insert of a batch of staged submissions (issue 12, item 2).

`server.group_commit._insert` takes the numbers of a batch of checked submissions and inserts their
rows (task, then its "submitted" event and audit row). It inserts each wave with one executemany per
table (`_bulk_add`); before, it added the objects to the session and flushed (the ORM's unit of
work: `orm_insert` here is that code, the baseline). This times both on the same store, in turns,
and prints CPU milliseconds per submission for each and the ratio.

    python bench/group_commit_insert.py [--batch 4 32] [--rounds 300] [--db sqlite|postgres]

Each round builds a fresh batch (the policy check `services.tasks.accept`, as the submit route
does) and times `_insert` plus the commit, in CPU time of this process.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from gpucommons.api import schemas
from gpucommons.identity.principal import Principal
from gpucommons.policy.loader import load_policy
from gpucommons.server import group_commit
from gpucommons.server.group_commit import Staged
from gpucommons.server.services import tasks as service
from gpucommons.store import migrate
from gpucommons.store.db import Database, sqlite_url
from gpucommons.store.identity_models import AuditEvent
from gpucommons.store.sequence import MemorySeq, SeqAllocator
from gpucommons.testing.postgres import scratch_database

POLICY = Path(__file__).resolve().parent.parent / "examples" / "commons.yaml"


def orm_insert(session: Session, seq: SeqAllocator, staged: list[Staged[Any]]) -> list[Any]:
    """The baseline: `_insert` as it was, each wave added to the session and flushed (the ORM's
    unit of work)."""
    waves, answers = group_commit.numbered_rows(session, seq, staged)
    for wave in waves:
        session.add_all(wave)
        session.flush()
    return answers


def staged_submission(policy_path: Path) -> Callable[[], Staged[str]]:
    policy = load_policy(policy_path)
    who = Principal(subject="admin", platform_admin=True)
    body = schemas.TaskSubmit(team="nlp", gpus=1, command=["sleep", "3600"])

    def make() -> Staged[str]:
        accepted = service.accept(policy, body, who, time.time())

        def build(numbers: list[int]) -> tuple[list[list[object]], str]:
            row, event = service.submission_rows(accepted, numbers[0])
            audit = AuditEvent(
                at=time.time(),
                actor="admin",
                action="task.submit",
                method="POST",
                path="/api/v1/tasks",
                team=row.team,
                target=row.id,
                outcome="ok",
                status_code=201,
            )
            return [[row], [event, audit]], row.id

        return Staged(1, build)

    return make


Insert = Callable[[Session, SeqAllocator, list[Staged[Any]]], list[Any]]


def measure(db: Database, batch: int, rounds: int, insert: Insert) -> list[float]:
    """CPU ms per submission of each round (insert and commit of one batch)."""
    make = staged_submission(POLICY)
    seq = MemorySeq(db)
    out = []
    for _ in range(rounds):
        staged: list[Staged[Any]] = [make() for _ in range(batch)]
        c0 = time.process_time()
        with db.session() as session:
            insert(session, seq, staged)
        out.append((time.process_time() - c0) * 1000 / batch)
    return out


@contextlib.contextmanager
def open_store(kind: str, home: Path) -> Iterator[Database]:
    """A migrated store: SQLite in `home`, or a scratch PostgreSQL database dropped afterwards."""
    with contextlib.ExitStack() as stack:
        url = sqlite_url(home) if kind == "sqlite" else stack.enter_context(scratch_database("bench_insert"))
        db = Database(url)
        stack.callback(db.dispose)
        migrate.upgrade(db)
        yield db


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 32], help="submissions per commit")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    args = ap.parse_args(argv)
    print(
        "| db | batch | ORM flush (baseline) p50 / mean CPU ms per submission "
        "| executemany p50 / mean | ratio (mean) |"
    )
    print("|---|---|---|---|---|")
    last = 0.0
    for batch in args.batch:
        with tempfile.TemporaryDirectory() as home, open_store(args.db, Path(home)) as db:
            # Alternate, so a change of the machine's load touches both alike.
            base: list[float] = []
            bulk: list[float] = []
            for _ in range(3):
                base += measure(db, batch, args.rounds // 3, orm_insert)
                bulk += measure(db, batch, args.rounds // 3, group_commit._insert)
        ratio = statistics.fmean(bulk) / statistics.fmean(base)
        last = ratio
        print(
            f"| {args.db} | {batch} | {statistics.median(base):.3f} / {statistics.fmean(base):.3f} "
            f"| {statistics.median(bulk):.3f} / {statistics.fmean(bulk):.3f} | {ratio:.2f} |"
        )
    print(f"group_commit insert ratio={last:.2f} (executemany ÷ ORM flush, batch {args.batch[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
