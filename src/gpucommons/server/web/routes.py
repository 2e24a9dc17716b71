"""HTTP routes of the dashboard: the page at `/` and its static files under `/ui/`.

The page is rendered server-side only to hand the browser a small JSON configuration (API base path,
the sign-in URL when single sign-on is configured, the cluster's name); everything else happens in the
browser against `/api/v1`, under a Content-Security-Policy that allows scripts from this server only.
"""

from __future__ import annotations

from typing import Any

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from gpucommons.server import views
from gpucommons.server.auth import current_policy
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.web.assets import catalogue, template_text
from gpucommons.server.web.context import DashboardContext, dashboard_context

ASSET_PREFIX = "/ui"
API_BASE = "/api/v1"
#: How often a page polls the API, in milliseconds (pages that hold a form do not poll).
REFRESH_MS = 3000

#: The identity layer's browser sign-in (`GET /auth/login?next=…`, authorization code + PKCE, ending
#: in the `commons_session` cookie). The page offers it when the route exists and
#: `/api/v1/auth/config` says an OpenID provider is configured.
SSO_LOGIN_ROUTE_NAME = "oidc_login"
#: Its sign-out (`POST /auth/logout`: revokes the session and clears the cookie; FastAPI names a route
#: after its function).
SSO_LOGOUT_ROUTE_NAME = "logout"

#: Scripts and styles from this server only, no inline code, no framing: the page holds an API token.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

router = APIRouter(include_in_schema=False)

_environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
_page = _environment.from_string(template_text("index.html"))


def asset_url(name: str) -> str:
    """URL of a static file, versioned by its content so a new release is never served from cache."""
    asset = catalogue()[name]
    return f"{ASSET_PREFIX}/{name}?v={asset.etag.strip(chr(34))}"


def _route_path(request: Request, name: str) -> str | None:
    try:
        return str(request.app.url_path_for(name))
    except Exception:  # starlette's NoMatchFound: the identity layer is not installed
        return None


def _cluster_name(request: Request) -> str:
    policy = current_policy(request)
    return policy.cluster_name if policy is not None else ""


def page_config(request: Request) -> dict[str, Any]:
    """What the browser needs before its first API call."""
    return {
        "api_base": API_BASE,
        "refresh_ms": REFRESH_MS,
        "sso_login_url": _route_path(request, SSO_LOGIN_ROUTE_NAME),
        "sso_logout_url": _route_path(request, SSO_LOGOUT_ROUTE_NAME),
    }


@router.get("/", response_class=HTMLResponse, name="dashboard")
def dashboard(request: Request) -> HTMLResponse:
    html = _page.render(asset=asset_url, config=page_config(request), cluster_name=_cluster_name(request))
    return HTMLResponse(html, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


@router.get(ASSET_PREFIX + "/api/context", response_model=DashboardContext, name="dashboard_context")
def context(ctx: ContextDep, who: CurrentPrincipal) -> JSONResponse:
    """The caller and the cluster's shape (see `context.py`); declared before the catch-all asset route."""
    body = dashboard_context(who, ctx.policies.policy, views.gauges(ctx.scheduler))
    return JSONResponse(body.model_dump(mode="json"), headers={"Cache-Control": "no-store"})


@router.get(ASSET_PREFIX + "/{path:path}", name="dashboard_asset")
def dashboard_asset(path: str, request: Request) -> Response:
    asset = catalogue().get(path)
    if asset is None:
        return JSONResponse(
            {"error": {"code": "not_found", "message": f"no dashboard file {path!r}", "details": {}}},
            status_code=404,
        )
    headers = {**SECURITY_HEADERS, "ETag": asset.etag, "Cache-Control": "no-cache"}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)
