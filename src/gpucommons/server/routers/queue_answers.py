"""`GET /api/v1/queue` rendered once per published read view and shared by every reader of it.

At 10,000 pending tasks building the answer (sort the queue, ~10,000 pydantic models, a names
query, two serialisations for the body and the weak ETag) took ~45 ms of server CPU per request,
though the answer only changes when the scheduler publishes a new view (once per cycle or command,
docs/decisions/0013-scheduler-commands-and-read-views.md). So the answer is rendered once per view
and per *visible set* — the exact teams the caller may see after the `team` filter, which is all
the answer depends on besides the view — and every later reader of the same view and set gets the
same bytes and ETag. Keying on the set itself, not on who asks, means no caller can be handed an
entry of a team it may not see: two callers share an answer only when they may see the same teams.

Only `waiting_seconds` grows between two reads of one view. The rendered answer keeps the body cut
around each of those values and fills in the ages at each request (one Rust call for all the
numbers, one join), so the bytes are those a fresh build would give at that instant; the weak ETag
leaves the ages out already (`routers.caching`).

What is not kept: answers while the admitting side reports its own positions (a Kueue cluster: they
change without a new view), and an answer naming a task whose row the names query did not find.

It lives in the routers package, above the views and the context it reads, and is created by the
app factory onto `app.state` (docs/design.md, "The server's layers"): nothing below imports it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from pydantic import TypeAdapter
from sqlalchemy import select

from gpucommons.api import schemas
from gpucommons.backends.ports import QueuePosition
from gpucommons.engine.types import Pending
from gpucommons.server import views
from gpucommons.server.routers.caching import etag_of
from gpucommons.server.workers.outputs import ReadView
from gpucommons.server.workers.port import TaskWorker
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

QUEUE = TypeAdapter(list[schemas.QueueEntry])
_AGES = TypeAdapter(list[float])
_KEY = b'"waiting_seconds":'


@dataclass(frozen=True)
class QueueAnswer:
    """One rendered queue: the weak ETag and the body cut around each entry's age.

    `_heads[i]` ends with entry i's `"waiting_seconds":`, and what follows the age up to the next
    entry's opens `_heads[i + 1]` (after its comma); `_tail` closes the list. The key cannot occur
    unescaped inside a string value (a `"` there is written `\\"`), so cutting on it is exact.
    """

    etag: str
    _heads: tuple[bytes, ...]
    _tail: bytes
    _queued_at: tuple[float, ...]

    @classmethod
    def of(cls, entries: Sequence[schemas.QueueEntry], queued_at: Sequence[float]) -> QueueAnswer:
        """`entries` (their ages are ignored) with the `queued_at` of each, in the same order."""
        chunks = QUEUE.dump_json(list(entries)).split(_KEY)
        assert len(chunks) == len(entries) + 1 == len(queued_at) + 1
        rest = [chunk[chunk.index(b",") + 1 :] for chunk in chunks[1:]]
        etag = etag_of(chunks[0] + b"".join(rest), weak=True)
        if not rest:
            return cls(etag, (), chunks[0], ())
        heads = (chunks[0] + _KEY, *(b"," + r + _KEY for r in rest[:-1]))
        return cls(etag, heads, b"," + rest[-1], tuple(queued_at))

    def body(self, now: float) -> bytes:
        """The JSON body at `now`: what `QUEUE.dump_json` of the entries built at `now` gives."""
        if not self._heads:
            return self._tail
        ages = _AGES.dump_json([round(max(0.0, now - q), 3) for q in self._queued_at])
        parts: list[bytes] = [b""] * (2 * len(self._heads) + 1)
        parts[0:-1:2] = self._heads
        parts[1:-1:2] = ages[1:-1].split(b",")
        parts[-1] = self._tail
        return b"".join(parts)


def render(
    db: Database,
    order: Sequence[views.Placed],
    reasons: Mapping[str, Pending],
    placed: Mapping[str, QueuePosition],
    visible: Collection[str],
) -> tuple[QueueAnswer, bool]:
    """The answer for the teams `visible`, and whether every task's name was found (else it names
    some task "" and must not outlive this request)."""
    shown = [row for row in order if row[0].team in visible]
    entries = views.queue_entries(shown, reasons, placed, 0.0)
    names: dict[str, str] = {}
    if entries:
        with db.session() as session:
            ids = [e.task_id for e in entries]
            rows = session.execute(select(TaskRow.id, TaskRow.name).where(TaskRow.id.in_(ids)))
            names = {task_id: name for task_id, name in rows}
        for e in entries:
            e.name = names.get(e.task_id, "")
    return QueueAnswer.of(entries, [task.queued_at for task, _, _ in shown]), len(names) == len(entries)


@dataclass
class _Slot:
    """The answers rendered from one view (the same tasks and reasons: see `_same_queue`)."""

    view: ReadView
    order: list[views.Placed]
    answers: dict[frozenset[str], QueueAnswer] = field(default_factory=dict)


def _same_queue(a: ReadView, b: ReadView) -> bool:
    """The two views give the same answers: a cycle that changed nothing publishes a new view of
    equal tasks and reasons (tuples and dicts compare their items by identity first: cheap)."""
    return a.pending == b.pending and a.reasons == b.reasons


class QueueAnswers:
    """The queue's answers for the scheduler's current view, one per visible set (at most `keep`)."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        #: Rendering takes it, so a new view is rendered once, not by every reader that sees it.
        self._lock = threading.Lock()
        self._slot: _Slot | None = None
        #: How many answers were rendered (what the tests count).
        self.renders = 0

    def answer(self, scheduler: TaskWorker, visible: frozenset[str], db: Database) -> QueueAnswer:
        placed = scheduler.positions()
        if placed:  # the cluster's own positions move without a new view: never kept
            published = scheduler.view
            self.renders += 1
            return render(db, views.queue_order(published.pending), published.reasons, placed, visible)[0]
        slot = self._slot
        if slot is not None and slot.view is scheduler.view:
            hit = slot.answers.get(visible)
            if hit is not None:
                return hit
        with self._lock:
            # The newest view: a reader that waited here while another rendered gets that one.
            slot = self._slot_for(scheduler.view)
            hit = slot.answers.get(visible)
            if hit is None:
                hit, complete = render(db, slot.order, slot.view.reasons, placed, visible)
                self.renders += 1
                if complete:
                    if len(slot.answers) >= self.keep:
                        del slot.answers[next(iter(slot.answers))]
                    slot.answers[visible] = hit
            return hit

    def _slot_for(self, published: ReadView) -> _Slot:
        """The slot of `published` (caller holds `_lock`), carried over when its queue is the same."""
        slot = self._slot
        if slot is not None and slot.view is published:
            return slot
        if slot is not None and _same_queue(slot.view, published):
            slot = _Slot(published, slot.order, slot.answers)
        else:
            slot = _Slot(published, views.queue_order(published.pending))
        self._slot = slot
        return slot


async def queue_answers(request: Request) -> QueueAnswers:
    """The app's answers (`create_app` puts them on `app.state`); async for the reason
    `deps.get_context` is."""
    answers = request.app.state.queue_answers
    assert isinstance(answers, QueueAnswers)
    return answers


QueueAnswersDep = Annotated[QueueAnswers, Depends(queue_answers)]
