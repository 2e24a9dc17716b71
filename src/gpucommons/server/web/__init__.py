"""The web dashboard served at `/` (docs/design.md, contract 6).

A single page of plain HTML, CSS and JavaScript modules (no build step) that talks to the public REST
API with the caller's own credentials; it has no privileges and no data access of its own.
Include it in the app with `app.include_router(web.router)`.
"""

from gpucommons.server.web.routes import router

__all__ = ["router"]
