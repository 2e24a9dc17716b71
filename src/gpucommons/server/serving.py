"""The uvicorn server `commons up` runs: it ends the event streams first when it shuts down.

uvicorn stops accepting connections, then waits for every open response to finish before it runs
the app's lifespan shutdown; a `GET /api/v1/events` stream never finishes by itself, so without this
a stop (Ctrl-C, SIGTERM) would wait for the stream's maximum duration. `shutdown` closes the event
feed before uvicorn waits: each stream ends at its next wake-up, at once.
"""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from gpucommons.server.context import ServerContext
from gpucommons.server.runtime import tune_gc
from gpucommons.server.settings import Settings


class CommonsServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ctx: ServerContext) -> None:
        super().__init__(config)
        self.ctx = ctx

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.ctx.events.close()
        await super().shutdown(sockets)


def commons_server(app: FastAPI, ctx: ServerContext, settings: Settings) -> CommonsServer:
    """`app` on uvicorn as `commons up` serves it (and each of its `--workers` processes), with the
    garbage collector tuned (`runtime.tune_gc`) now that start-up is done.

    uvloop and httptools (uvicorn[standard]) are what uvicorn's "auto" picks when installed. Idle
    keep-alive connections stay open 75 s instead of 5: a poller (every 3 s) or a client on a busy
    machine never races the server closing its connection, and it stays above the 60 s idle timeout
    of common proxies, which must be the ones to close first."""
    if settings.gc_threshold:
        tune_gc(settings.gc_threshold)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_keep_alive=75,
    )
    return CommonsServer(config, ctx)
