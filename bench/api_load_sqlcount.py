"""`commons` with SQL statements counted per request route: bench/api_load.py's `--count-sql` mode
(and the time the garbage collector takes, by generation).

    python bench/api_load_sqlcount.py up --policy P --home H ...    # the same arguments as `commons`

Bench-only: nothing of this is in the product. Before running the ordinary CLI it
- listens to SQLAlchemy's `before_cursor_execute` on every engine, counting each statement against
  the request being served (a context variable, which Starlette's thread pool carries into the sync
  routes and dependencies) or, outside any request, against the scheduler and other threads;
- wraps the app `create_app` returns in an ASGI layer that sets that variable per request, keyed by the
  route template (`POST /api/v1/tasks`, `GET /api/v1/tasks/{task_id}`), and answers
  `GET /_bench/sql` (the counts as JSON) and `POST /_bench/sql/reset`;
- times every garbage collection (`gc.callbacks`), by generation, reported with the counts.
"""

from __future__ import annotations

import contextvars
import gc
import json
import re
import threading
import time
from collections import Counter
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from gpucommons.server import app as app_module

_current: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("bench_sql", default=None)
_lock = threading.Lock()
_routes: dict[str, list[int]] = {}
_background = [0]
_statements: Counter[str] = Counter()
#: Garbage collections by generation: [count, seconds], timed by `gc.callbacks`.
_gc: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
_gc_started = [0.0]
_LITERALS = re.compile(r"\((?:[?%s(),\s]|__\[POSTCOMPILE_\w+\]|%\(\w+\)s)+\)")


def _shape(statement: str) -> str:
    """A statement without its parameter lists, cut to a line: what the top list groups by."""
    one = " ".join(statement.split())
    return _LITERALS.sub("(…)", one)[:160]


@event.listens_for(Engine, "before_cursor_execute")
def _count(_conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool) -> None:
    counter = _current.get()
    with _lock:
        _statements[_shape(statement)] += 1
        if counter is None:
            _background[0] += 1
        else:
            counter[0] += 1


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        entry = _gc[info["generation"]]
        entry[0] += 1
        entry[1] += time.perf_counter() - _gc_started[0]


gc.callbacks.append(_gc_timer)


def _route_name(scope: dict[str, Any]) -> str:
    """The route template Starlette's router left in the scope (as the app's latency metric reads it)."""
    path = getattr(scope.get("route"), "path", None) or "(unmatched)"
    return f"{scope['method']} {path}"


class CountingApp:
    def __init__(self, app: Any) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith("/_bench/sql"):
            await self._answer(scope, send)
            return
        counter = [0]
        token = _current.set(counter)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)
            name = _route_name(scope)
            with _lock:
                entry = _routes.setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += counter[0]

    async def _answer(self, scope: dict[str, Any], send: Any) -> None:
        with _lock:
            if scope["path"].endswith("/reset"):
                _routes.clear()
                _background[0] = 0
                _statements.clear()
                for entry in _gc.values():
                    entry[:] = [0, 0.0]
            body = json.dumps(
                {
                    "routes": _routes,
                    "background": _background[0],
                    "top": _statements.most_common(20),
                    "gc": {str(k): v for k, v in _gc.items()},
                }
            ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


_create_app = app_module.create_app


def _counting_create_app(*args: Any, **kwargs: Any) -> Any:
    return CountingApp(_create_app(*args, **kwargs))


app_module.create_app = _counting_create_app  # type: ignore[assignment]

if __name__ == "__main__":
    from gpucommons.cli.main import app as cli

    cli()
