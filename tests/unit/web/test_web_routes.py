"""The dashboard's HTTP surface: the page, its configuration, and its static files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gpucommons.policy import load_policy
from gpucommons.server import web
from gpucommons.server.web.assets import catalogue

POLICY = Path(__file__).parents[2] / "e2e" / "web" / "dashboard-policy.yaml"
IMPORT = re.compile(r"""^\s*import\s+(?:[^'"]+\s+from\s+)?["']([^"']+)["']""", re.MULTILINE)


def make_app(*, with_login: bool = False) -> FastAPI:
    app = FastAPI()
    app.state.policy = load_policy(POLICY)
    if with_login:

        @app.get("/auth/login", name="oidc_login")
        def login() -> dict[str, str]:
            return {}

    app.include_router(web.router)
    return app


@pytest.fixture
def client() -> TestClient:
    return TestClient(make_app())


def page_config(html: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="commons-config">(.*?)</script>', html, re.S)
    assert match, "the page carries its configuration as a JSON script block"
    config = json.loads(match.group(1))
    assert isinstance(config, dict)
    return config


def test_dashboard_page_is_served_at_root_with_a_strict_content_security_policy(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_dashboard_page_names_the_cluster_and_loads_the_app_module(client: TestClient) -> None:
    html = client.get("/").text
    assert "webtest" in html
    assert re.search(r'<script type="module" src="/ui/app\.js\?v=[0-9a-f]{16}"></script>', html)
    assert '<main id="main"' in html
    assert 'lang="en"' in html


def test_page_config_points_at_the_api_and_offers_no_sso_without_a_login_route(client: TestClient) -> None:
    config = page_config(client.get("/").text)
    assert config["api_base"] == "/api/v1"
    assert config["sso_login_url"] is None
    assert isinstance(config["refresh_ms"], int) and config["refresh_ms"] > 0


def test_page_config_offers_sso_sign_in_when_the_identity_layer_registers_a_login_route() -> None:
    config = page_config(TestClient(make_app(with_login=True)).get("/").text)
    assert config["sso_login_url"] == "/auth/login"


def test_every_module_the_page_imports_is_served_as_javascript(client: TestClient) -> None:
    """Walk the import graph from app.js as a browser would: a missing module is a blank dashboard."""
    seen: set[str] = set()
    todo = ["app.js"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        response = client.get(f"/ui/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith("text/javascript"), name
        base = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
        for spec in IMPORT.findall(response.text):
            assert spec.startswith("."), (
                f"{name} imports {spec!r}: only relative modules exist (no build step)"
            )
            todo.append(_join(base, spec))
    assert {"app.js", "api.js", "data.js", "dom.js", "views/tasks.js", "views/overview.js"} <= seen


def _join(base: str, spec: str) -> str:
    parts = [p for p in base.split("/") if p]
    for piece in spec.split("/"):
        if piece == "..":
            parts.pop()
        elif piece not in (".", ""):
            parts.append(piece)
    return "/".join(parts)


def test_static_files_revalidate_with_their_etag(client: TestClient) -> None:
    first = client.get("/ui/app.css")
    assert first.status_code == 200
    assert first.headers["content-type"].startswith("text/css")
    etag = first.headers["etag"]
    again = client.get("/ui/app.css", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""


@pytest.mark.parametrize("path", ["/ui/nope.js", "/ui/../routes.py", "/ui/%2e%2e/routes.py", "/ui/assets.py"])
def test_only_the_shipped_static_files_can_be_fetched(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    # `..` may be resolved by the client before it reaches the router; either way no source is served.
    assert b"def " not in response.content and b"import " not in response.content


def test_the_catalogue_ships_scripts_and_styles_only() -> None:
    names = set(catalogue())
    assert "app.js" in names and "app.css" in names
    assert all(n.endswith((".js", ".css")) for n in names)
