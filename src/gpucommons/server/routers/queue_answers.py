"""`GET /api/v1/queue` rendered once per published read view and shared by every reader of it.

At 10,000 pending tasks building the answer (sort the queue, ~10,000 pydantic models, a names
query, two serialisations for the body and the weak ETag) took ~45 ms of server CPU per request,
though the answer only changes when the scheduler publishes a new view (once per cycle or command,
docs/decisions/0013-scheduler-commands-and-read-views.md). So the answer is rendered once per view
and per *visible set* — the exact teams the caller may see after the `team` filter, which is all
the answer depends on besides the view — and every later reader of the same view and set gets the
same bytes and ETag. Keying on the set itself, not on who asks, means no caller can be handed an
entry of a team it may not see: two callers share an answer only when they may see the same teams.

A new view costs only what changed: the pieces of each entry that depend on the task alone (its
id, name, team, class, GPUs, `queued_at`) and on its reason are written by pydantic once and kept
across views (`Fragments`), so a view renders its new tasks and joins bytes for the rest, its
places written as integers between them. The names query asks for new tasks only.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise, repeat
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from pydantic import TypeAdapter
from sqlalchemy import select

from gpucommons.api import schemas
from gpucommons.backends.ports import QueuePosition
from gpucommons.engine.types import Pending, TaskRequest
from gpucommons.server import views
from gpucommons.server.routers.caching import etag_of
from gpucommons.server.workers.outputs import ReadView
from gpucommons.server.workers.port import TaskWorker
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

T = TypeVar("T")

QUEUE = TypeAdapter(list[schemas.QueueEntry])
_ENTRY = TypeAdapter(schemas.QueueEntry)
_AGES = TypeAdapter(list[float])
_POSITION = b'"position":'
_TEAM_POSITION = b',"team_position":'
_WAITING = b',"waiting_seconds":'
_QUEUED_AT = b',"queued_at":'
_REASON = b',"reason_code":'


def _entry_json(task: TaskRequest, name: str, reason: Pending | None) -> bytes:
    """The task's entry as pydantic writes it (places and age zero: they are cut out)."""
    (entry,) = views.queue_entries([(task, 0, 0)], {task.id: reason} if reason else {}, {}, 0.0)
    entry.name = name
    return _ENTRY.dump_json(entry)


@dataclass(frozen=True)
class _TaskPart:
    """What of an entry depends on the task alone: `{"task_id":…,"gpus":N,"position":` and
    `,"queued_at":"…"`. A key cannot occur unescaped inside a string value (a `"` there is
    written `\\"`), so cutting the entry's JSON on the keys is exact."""

    task: TaskRequest
    head: bytes
    queued: bytes

    @classmethod
    def of(cls, task: TaskRequest, name: str) -> _TaskPart:
        raw = _entry_json(task, name, None)
        cut = raw.index(_POSITION) + len(_POSITION)
        queued = raw.index(_QUEUED_AT, cut)
        return cls(task, raw[:cut], raw[queued : raw.index(_REASON, queued)])


def _reason_part(task: TaskRequest, reason: Pending | None) -> bytes:
    """`,"reason_code":"…","reason":"…"}`: the same for every task with that reason."""
    raw = _entry_json(task, "", reason)
    return raw[raw.rindex(_REASON) :]


@dataclass(frozen=True)
class Row:
    """One entry of one view: `core` runs from `{` to its team position, `tail` from its
    `queued_at` to `}`; the age goes between them."""

    team: str
    core: bytes
    tail: bytes
    queued_at: float
    #: Its place in the cluster's queue: what a page's cursor names.
    position: int


class Fragments:
    """The pieces of entries already written, kept across views: a new view writes only its new
    tasks and reasons. Only what the last view used is kept."""

    def __init__(self) -> None:
        self.tasks: dict[str, _TaskPart] = {}
        self.reasons: dict[Pending | None, bytes] = {}

    def rows(
        self,
        db: Database,
        order: Sequence[views.Placed],
        reasons: Mapping[str, Pending],
        placed: Mapping[str, QueuePosition],
    ) -> tuple[list[Row], bool]:
        """Every entry of the view, and whether every task's name was found (else it names some
        task "" and must not be kept)."""
        known, said = self.tasks, self.reasons

        def stale(task: TaskRequest) -> bool:
            part = known.get(task.id)
            return part is None or (part.task is not task and part.task != task)

        new = [task.id for task, _, _ in order if stale(task)]
        names = _names(db, new)
        tasks: dict[str, _TaskPart] = {}
        texts: dict[Pending | None, bytes] = {}
        rows = []
        for task, position, team_position in order:
            if stale(task):
                name = names.get(task.id)
                part = _TaskPart.of(task, name or "")
                if name is not None:
                    tasks[task.id] = part
            else:
                part = known[task.id]
                tasks[task.id] = part
            reason = reasons.get(task.id)
            text = texts.get(reason)
            if text is None:
                text = said.get(reason) or _reason_part(task, reason)
                texts[reason] = text
            where = placed.get(task.id)
            if where is not None:
                position, team_position = where.position, where.team_position
            core = b"%s%d%s%d" % (part.head, position, _TEAM_POSITION, team_position)
            rows.append(Row(task.team, core, part.queued + text, task.queued_at, position))
        self.tasks, self.reasons = tasks, texts
        return rows, len(names) == len(new)


def _names(db: Database, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    with db.session() as session:
        rows = session.execute(select(TaskRow.id, TaskRow.name).where(TaskRow.id.in_(ids)))
        return {task_id: name for task_id, name in rows}


def ages(now: float, queued_at: Sequence[float], latest: float) -> list[float]:
    """`round(max(0, now - q), 3)` of each `q`, as `views.queue_entries` writes it, in C loops (a
    tenth of a queue read's CPU at 10,000 entries when it was a comprehension). The same values:
    rounding keeps the sign, so a negative age rounds to -0.0 or below, then `max` makes it 0.0;
    `latest` (the largest `q`) says whether any can be negative."""
    out = list(map(round, map(float(now).__sub__, queued_at), repeat(3)))
    return [max(0.0, age) for age in out] if latest > now else out


@dataclass(frozen=True)
class QueueAnswer:
    """One rendered queue: the weak ETag (of the body without the ages, `routers.caching`) and the
    body cut around each entry's age, which only grows between two reads of one view: `_gaps[i]`
    is what lies between age i - 1 and age i (entry i - 1's end, entry i's start up to its
    `"waiting_seconds":`), so an answer is one join of n + 1 fixed pieces and n ages."""

    etag: str
    _gaps: tuple[bytes, ...]
    _queued_at: tuple[float, ...]
    #: The latest `queued_at`: while it is not after now, no age is negative.
    _latest: float

    @classmethod
    def of(cls, rows: Sequence[Row]) -> QueueAnswer:
        if not rows:
            return cls(etag_of(b"[]", weak=True), (b"[]",), (), 0.0)
        etag = etag_of(b"[" + b",".join([r.core + r.tail for r in rows]) + b"]", weak=True)
        gaps = [b"[" + rows[0].core + _WAITING]
        gaps += [before.tail + b"," + row.core + _WAITING for before, row in pairwise(rows)]
        gaps.append(rows[-1].tail + b"]")
        queued_at = tuple(r.queued_at for r in rows)
        return cls(etag, tuple(gaps), queued_at, max(queued_at))

    def body(self, now: float) -> bytes:
        """The JSON body at `now`: what `QUEUE.dump_json` of the entries built at `now` gives
        (the ages in one Rust call, so they are written as pydantic writes floats)."""
        n = len(self._queued_at)
        if not n:
            return self._gaps[0]
        parts: list[bytes] = [b""] * (2 * n + 1)
        parts[0::2] = self._gaps
        parts[1::2] = _AGES.dump_json(ages(now, self._queued_at, self._latest))[1:-1].split(b",")
        return b"".join(parts)


@dataclass
class _Slot:
    """The rows of one view and the answers rendered from them (the same tasks and reasons:
    see `_same_queue`)."""

    view: ReadView
    rows: list[Row]
    complete: bool
    answers: dict[frozenset[str], QueueAnswer] = field(default_factory=dict)
    #: The rows each visible set sees, kept for pages (a page's answer is made per request).
    visible_rows: dict[frozenset[str], list[Row]] = field(default_factory=dict)


def _same_queue(a: ReadView, b: ReadView) -> bool:
    """The two views give the same answers: a cycle that changed nothing publishes a new view of
    equal tasks and reasons (tuples and dicts compare their items by identity first: cheap)."""
    return a.pending == b.pending and a.reasons == b.reasons


def _answer(rows: Sequence[Row], visible: frozenset[str]) -> QueueAnswer:
    return QueueAnswer.of([r for r in rows if r.team in visible])


def _page(rows: Sequence[Row], after: int | None, limit: int) -> tuple[QueueAnswer, int | None]:
    """The first `limit` of `rows` placed after position `after` (from the start when None), as an
    answer of their own (its ETag and body cover the page alone), and the position to ask after for
    the next page, None when this one is the last."""
    if after is not None:
        rows = [r for r in rows if r.position > after]
    page = rows[:limit]
    return QueueAnswer.of(page), (page[-1].position if len(rows) > limit else None)


class QueueAnswers:
    """The queue's answers for the scheduler's current view, one per visible set (at most `keep`)."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        #: Rendering takes it, so a new view is rendered once, not by every reader that sees it.
        self._lock = threading.Lock()
        self._slot: _Slot | None = None
        self._fragments = Fragments()
        #: How many views' rows and how many answers were rendered (what the tests count).
        self.views = 0
        self.renders = 0

    def answer(self, scheduler: TaskWorker, visible: frozenset[str], db: Database) -> QueueAnswer:
        placed = scheduler.positions()
        if placed:  # the cluster's own positions move without a new view: never kept
            rows = self._rows_placed(scheduler, db, placed)
            self.renders += 1
            return _answer(rows, visible)
        slot = self._slot
        if slot is not None and slot.view is scheduler.view:
            hit = slot.answers.get(visible)
            if hit is not None:
                return hit
        with self._lock:
            # The newest view: a reader that waited here while another rendered gets that one.
            slot = self._slot_for(scheduler.view, db)
            hit = slot.answers.get(visible)
            if hit is None:
                hit = _answer(slot.rows, visible)
                self.renders += 1
                if slot.complete:
                    self._keep(slot.answers, visible, hit)
            return hit

    def page(
        self, scheduler: TaskWorker, visible: frozenset[str], db: Database, after: int | None, limit: int
    ) -> tuple[QueueAnswer, int | None]:
        """A page of the answer `answer` gives (`_page`), made from the view's kept rows: beyond
        those rows, which every reader of a view shares, a page of 100 costs its 100 entries, not
        the joining and hashing of the whole queue's answer."""
        placed = scheduler.positions()
        if placed:  # as in `answer`: the cluster's own positions are never kept
            rows = self._rows_placed(scheduler, db, placed)
            return _page([r for r in rows if r.team in visible], after, limit)
        with self._lock:
            slot = self._slot_for(scheduler.view, db)
            seen = slot.visible_rows.get(visible)
            if seen is None:
                seen = [r for r in slot.rows if r.team in visible]
                if slot.complete:
                    self._keep(slot.visible_rows, visible, seen)
        return _page(seen, after, limit)

    def _rows_placed(
        self, scheduler: TaskWorker, db: Database, placed: Mapping[str, QueuePosition]
    ) -> list[Row]:
        """Every entry of the current view with the positions the cluster reports, rendered anew."""
        with self._lock:
            published = scheduler.view
            order = views.queue_order(published.pending)
            reasons = views.resolve_reasons(order, published.reasons)
            rows, _ = self._fragments.rows(db, order, reasons, placed)
            return rows

    def _keep(self, kept: dict[frozenset[str], T], visible: frozenset[str], value: T) -> None:
        """Keep `value` for `visible`, dropping the oldest kept when `keep` are held already."""
        if len(kept) >= self.keep:
            del kept[next(iter(kept))]
        kept[visible] = value

    def _slot_for(self, published: ReadView, db: Database) -> _Slot:
        """The slot of `published` (caller holds `_lock`), carried over when its queue is the same."""
        slot = self._slot
        if slot is not None and slot.view is published:
            return slot
        if slot is not None and slot.complete and _same_queue(slot.view, published):
            slot = _Slot(published, slot.rows, True, slot.answers, slot.visible_rows)
        else:
            order = views.queue_order(published.pending)
            reasons = views.resolve_reasons(order, published.reasons)
            rows, complete = self._fragments.rows(db, order, reasons, {})
            self.views += 1
            slot = _Slot(published, rows, complete)
        self._slot = slot
        return slot


async def queue_answers(request: Request) -> QueueAnswers:
    """The app's answers (`create_app` puts them on `app.state`); async for the reason
    `deps.get_context` is."""
    answers = request.app.state.queue_answers
    assert isinstance(answers, QueueAnswers)
    return answers


QueueAnswersDep = Annotated[QueueAnswers, Depends(queue_answers)]
