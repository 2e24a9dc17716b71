"""The uvicorn server `commons up` runs: it ends the event streams first when it shuts down.

uvicorn stops accepting connections, then waits for every open response to finish before it runs
the app's lifespan shutdown; a `GET /api/v1/events` stream never finishes by itself, so without this
a stop (Ctrl-C, SIGTERM) would wait for the stream's maximum duration. `shutdown` closes the event
feed before uvicorn waits: each stream ends at its next wake-up, at once.
"""

from __future__ import annotations

import socket

import uvicorn

from gpucommons.server.context import ServerContext


class CommonsServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ctx: ServerContext) -> None:
        super().__init__(config)
        self.ctx = ctx

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.ctx.events.close()
        await super().shutdown(sockets)
