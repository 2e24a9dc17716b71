"""What the history, planning and admin features add to the app: their routers and API latency.

`install_observability(app)` is called once by the app factory. API latency is measured by a plain
ASGI middleware (no request object is built) and labelled with the route *template*
(`/api/v1/tasks/{task_id}`), never the raw path, so the number of series stays bounded.
"""

from __future__ import annotations

import time

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpucommons.server.metrics import Metrics

UNMATCHED = "unmatched"


class LatencyMiddleware:
    def __init__(self, app: ASGIApp, root: FastAPI) -> None:
        self.app = app
        self.root = root

    def _metrics(self) -> Metrics | None:
        metrics = getattr(getattr(self.root.state, "commons", None), "metrics", None)
        return metrics if isinstance(metrics, Metrics) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            metrics = self._metrics()
            if metrics is not None:
                route = getattr(scope.get("route"), "path", None) or UNMATCHED
                metrics.request_done(scope.get("method", ""), route, status, time.perf_counter() - started)


def install_observability(app: FastAPI) -> None:
    """Routers of the history, planning and admin pages, and the API latency histogram."""
    from gpucommons.server.routers import admin, history, planning

    app.add_middleware(LatencyMiddleware, root=app)
    app.include_router(history.router)
    app.include_router(planning.router)
    app.include_router(admin.router)
