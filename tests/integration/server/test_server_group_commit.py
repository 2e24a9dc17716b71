"""Group commit of submissions (`server.group_commit`): many submissions in one transaction, each
answered with its own outcome once the transaction is committed; numbers in commit order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from tests.integration.server.conftest import Harness

from gpucommons.api import schemas
from gpucommons.api.errors import ValidationFailed
from gpucommons.identity.principal import Principal
from gpucommons.server.group_commit import GroupCommit, Staged
from gpucommons.server.services import tasks as service
from gpucommons.store.identity_models import AuditEvent
from gpucommons.store.models import TaskEventRow, TaskRow

ADMIN = Principal(subject="admin", platform_admin=True)


class Refused(Exception):
    """A refusal raised after the submission's rows were written (what a SAVEPOINT must undo)."""


def _submitter(
    harness: Harness, team: str, stored: list[int] | None = None, refuse_late: bool = False
) -> Callable[[Session], str]:
    ctx = harness.ctx
    body = schemas.TaskSubmit(team=team, gpus=1, command=["sleep", "1"])

    def work(session: Session) -> str:
        row = service.submit(session, ctx.policies.policy, body, ADMIN, 0.0, lambda: ctx.seq.next(session))
        if refuse_late:
            raise Refused(row.id)
        if stored is not None:
            stored.append(row.seq)
        return row.id

    return work


def _stored_ids(harness: Harness) -> set[str]:
    with harness.ctx.db.session() as session:
        return set(session.scalars(select(TaskRow.id)))


def test_a_refused_submission_fails_alone_in_a_shared_transaction(harness: Harness) -> None:
    committer = GroupCommit(harness.ctx.db, harness.ctx.seq)  # one thread: what queues, batches
    holding, gate = threading.Event(), threading.Event()

    def hold(_session: Session) -> None:  # keeps the committer busy while the others queue up
        holding.set()
        gate.wait(10)

    commits_before = committer.commits
    first = committer.submit(hold)
    assert holding.wait(10)
    futures: list[Future[str]] = [
        committer.submit(_submitter(harness, "a")),
        committer.submit(_submitter(harness, "nobody")),  # refused before writing anything
        committer.submit(_submitter(harness, "a", refuse_late=True)),  # refused after its insert
        committer.submit(_submitter(harness, "b")),
    ]
    gate.set()
    first.result(10)
    accepted = [futures[0].result(10), futures[3].result(10)]
    with pytest.raises(ValidationFailed, match="unknown team 'nobody'"):
        futures[1].result(10)
    with pytest.raises(Refused) as late:
        futures[2].result(10)
    # The four queued behind `hold` shared one transaction, and one commit answered them all.
    assert committer.commits - commits_before == 2
    stored = _stored_ids(harness)
    assert set(accepted) <= stored
    assert str(late.value) not in stored
    assert len(stored) == 2
    committer.stop()


def test_concurrent_submissions_get_distinct_numbers_in_commit_order(harness: Harness) -> None:
    committer = harness.ctx.submissions
    in_commit_order: list[int] = []
    errors: list[BaseException] = []

    def client() -> None:
        try:
            for _ in range(15):
                committer.run(_submitter(harness, "a", in_commit_order))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert len(in_commit_order) == 120
    assert len(set(in_commit_order)) == 120
    if harness.ctx.db.is_sqlite:  # one committer, numbers from memory: rising in commit order
        assert in_commit_order == sorted(in_commit_order)
    with harness.ctx.db.session() as session:
        assert sorted(session.scalars(select(TaskRow.seq))) == sorted(in_commit_order)


def test_a_submission_has_one_audit_row_written_with_it(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, command=["sleep", "1"])
    refused = harness.http.post(
        "/api/v1/tasks", json={"team": "zz", "gpus": 1, "command": ["x"]}, headers=harness.admin
    )
    assert refused.status_code == 422
    with harness.ctx.db.session() as session:
        rows = session.scalars(select(AuditEvent).where(AuditEvent.target == task["id"])).all()
        assert [(r.action, r.team, r.status_code, r.outcome, r.actor) for r in rows] == [
            ("task.submit", "a", 201, "ok", "admin")
        ]
        count = session.scalar(
            select(func.count()).select_from(AuditEvent).where(AuditEvent.status_code == 422)
        )
        assert count == 1


# --- staged jobs: checked first, numbered together, inserted in bulk --------------------------------


def _staged(
    harness: Harness, team: str, duplicate_of: str | None = None
) -> Callable[[], Staged[tuple[str, int]]]:
    """What the submit route stages; `duplicate_of` reuses a stored task's id (a row the database
    refuses, after the check accepted it)."""
    ctx = harness.ctx
    body = schemas.TaskSubmit(team=team, gpus=1, command=["sleep", "1"])

    def prepare() -> Staged[tuple[str, int]]:
        accepted = service.accept(ctx.policies.policy, body, ADMIN, 0.0)
        if duplicate_of is not None:
            accepted["id"] = duplicate_of

        def build(numbers: list[int]) -> tuple[list[list[object]], tuple[str, int]]:
            row, event = service.submission_rows(accepted, numbers[0])
            return [[row], [event]], (row.id, row.seq)

        return Staged(1, build)

    return prepare


def _queued_behind_one(
    committer: GroupCommit, jobs: list[Callable[[], Staged[tuple[str, int]]]]
) -> list[Future[tuple[str, int]]]:
    """Queue `jobs` while the committer is busy, so that they share one transaction."""
    holding, gate = threading.Event(), threading.Event()

    def hold(_session: Session) -> None:
        holding.set()
        gate.wait(10)

    first = committer.submit(hold)
    assert holding.wait(10)
    futures = [committer.stage(job) for job in jobs]
    gate.set()
    first.result(10)
    return futures


def test_staged_submissions_share_one_commit_and_take_rising_numbers_without_gaps(harness: Harness) -> None:
    committer = GroupCommit(harness.ctx.db, harness.ctx.seq)
    commits_before = committer.commits
    futures = _queued_behind_one(
        committer,
        [_staged(harness, "a"), _staged(harness, "nobody"), _staged(harness, "b"), _staged(harness, "a")],
    )
    stored = [futures[i].result(10) for i in (0, 2, 3)]
    with pytest.raises(ValidationFailed, match="unknown team 'nobody'"):
        futures[1].result(10)
    assert committer.commits - commits_before == 2  # the hold's, and one for the three
    numbers = [seq for _, seq in stored]
    assert numbers == list(range(numbers[0], numbers[0] + 3)), "the refusal took no number"
    with harness.ctx.db.session() as session:
        rows = {r.id: r.seq for r in session.scalars(select(TaskRow))}
        events = session.scalars(select(TaskEventRow.task_id).where(TaskEventRow.kind == "submitted")).all()
    assert rows == dict(stored)
    assert sorted(events) == sorted(rows)
    committer.stop()


def test_a_staged_row_the_database_refuses_fails_alone(harness: Harness) -> None:
    committer = harness.ctx.submissions
    existing, _ = committer.stage(_staged(harness, "a")).result(10)
    committer.stop()
    futures = _queued_behind_one(
        committer,
        [_staged(harness, "a"), _staged(harness, "b", duplicate_of=existing), _staged(harness, "b")],
    )
    stored = [futures[0].result(10), futures[2].result(10)]
    with pytest.raises(IntegrityError):
        futures[1].result(10)
    assert _stored_ids(harness) == {existing, *(task_id for task_id, _ in stored)}


def test_a_staged_batch_catches_up_with_numbers_stored_past_the_allocator(harness: Harness) -> None:
    committer = harness.ctx.submissions
    first, seq = committer.stage(_staged(harness, "a")).result(10)
    with harness.ctx.db.session() as session:  # a row numbered past the allocator (another writer)
        row, _ = service.submission_rows(
            service.accept(
                harness.ctx.policies.policy, schemas.TaskSubmit(team="a", gpus=1, command=["x"]), ADMIN, 0.0
            ),
            seq + 1,
        )
        session.add(row)
        session.commit()
    task_id, number = committer.stage(_staged(harness, "b")).result(10)
    assert number > seq + 1
    assert {first, row.id, task_id} == _stored_ids(harness)
