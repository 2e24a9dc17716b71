"""The SCIM 2.0 service provider as its own small ASGI app, mounted at /scim/v2.

A mount keeps SCIM's conventions apart from the REST API's: its own error format (SCIM Error
resources, also for 404 on unknown URLs and for malformed requests), its own media type, and no
entries in the API's OpenAPI document. It reads the database and policy of the app it is mounted on.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from scim2_models import Error, SCIMException
from starlette.exceptions import HTTPException as StarletteHTTPException

from gpucommons.identity.scim import allow_private_mail_domains
from gpucommons.server.errors import database_unavailable
from gpucommons.server.scim import discovery
from gpucommons.server.scim.resources import GROUPS, USERS, add_root_search, add_routes
from gpucommons.server.scim.responses import ScimResponse, error_of, error_response

log = logging.getLogger(__name__)
SCIM_PREFIX = "/scim/v2"


async def _scim_error(_request: Request, exc: Exception) -> ScimResponse:
    assert isinstance(exc, SCIMException)
    return error_of(exc.to_error())


async def _invalid(_request: Request, exc: Exception) -> ScimResponse:
    assert isinstance(exc, ValidationError)
    return error_of(Error.from_validation_errors(exc)[0])


async def _bad_request(_request: Request, exc: Exception) -> ScimResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return error_response(400, f"{where}: {first.get('msg', 'invalid request')}", "invalidValue")


async def _http(_request: Request, exc: Exception) -> ScimResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc.status_code, str(exc.detail))


async def _unexpected(_request: Request, exc: Exception) -> ScimResponse:
    unavailable = database_unavailable(exc)
    if unavailable is not None:
        log.warning("database unavailable: %s", str(exc).splitlines()[0])
        response = error_response(503, unavailable)
        response.headers["Retry-After"] = "1"
        return response
    log.exception("SCIM request failed", exc_info=exc)
    return error_response(500, "internal error; see the server log")


def build_scim_app() -> FastAPI:
    allow_private_mail_domains()
    scim = FastAPI(title="GPU Commons SCIM 2.0", openapi_url=None, docs_url=None, redoc_url=None)
    scim.include_router(discovery.router)
    add_root_search(scim.router)
    add_routes(scim.router, USERS)
    add_routes(scim.router, GROUPS)
    scim.add_exception_handler(SCIMException, _scim_error)
    scim.add_exception_handler(ValidationError, _invalid)
    scim.add_exception_handler(RequestValidationError, _bad_request)
    scim.add_exception_handler(StarletteHTTPException, _http)
    scim.add_exception_handler(Exception, _unexpected)
    return scim


def mount_scim(app: FastAPI) -> None:
    """Serve SCIM at /scim/v2 of `app`, using `app`'s database and policy."""
    scim = build_scim_app()
    scim.state.root = app
    app.mount(SCIM_PREFIX, scim)
