"""The OpenAPI document names every status each route answers, every error with the error body, and
docs/api.md lists the same statuses route by route."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpucommons.api.fields import TEXT_PATTERN
from gpucommons.server.app import create_app
from gpucommons.server.settings import Settings

REPO = Path(__file__).resolve().parents[3]
POLICY = """\
cluster:
  name: doc
  pools:
    - {name: gpu, gpu_type: L4, nodes: 1, gpus_per_node: 4}
teams:
  - name: a
    quota: {gpu: {gpus: 4}}
"""
ROW = re.compile(r"^\| `(?P<method>[A-Z]+) (?P<path>\S+)` \| (?P<ok>[\d, ]+) \| (?P<errors>[\d, ]*) \|$")


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("openapi")
    (home / "policy.yaml").write_text(POLICY)
    settings = Settings(
        home=home / "home", policy=home / "policy.yaml", executor="timer", run_scheduler=False,
        isolation="logical",
    )  # fmt: skip
    app = create_app(settings)
    doc: dict[str, Any] = app.openapi()
    app.state.commons.db.dispose()
    return doc


def _operations(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{m.upper()} {p}": op for p, ops in document["paths"].items() for m, op in ops.items()}


def _table(operations: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for name, op in operations.items():
        codes = sorted(op["responses"], key=int)
        ok = ", ".join(c for c in codes if int(c) < 400)
        errors = ", ".join(c for c in codes if int(c) >= 400)
        lines.append(f"| `{name}` | {ok} | {errors} |")
    return lines


def test_docs_list_the_statuses_of_every_route_as_the_openapi_document_does(document: dict[str, Any]) -> None:
    documented = [line for line in (REPO / "docs" / "api.md").read_text().splitlines() if ROW.match(line)]
    expected = _table(_operations(document))
    assert sorted(documented) == sorted(expected), (
        "docs/api.md, 'Status codes by route', should read:\n" + "\n".join(expected)
    )


def test_every_error_has_the_error_body_and_every_route_its_derived_statuses(
    document: dict[str, Any],
) -> None:
    for name, op in _operations(document).items():
        errors = {int(s): r for s, r in op["responses"].items() if int(s) >= 400}
        for status, response in errors.items():
            schema = response["content"]["application/json"]["schema"]
            # /healthz answers 503 with its own body, so a probe's log shows what is wrong.
            body = "Health" if (name, status) == ("GET /healthz", 503) else "ErrorBody"
            assert schema == {"$ref": f"#/components/schemas/{body}"}, (name, status)
        assert 422 in errors, name
        assert (429 in errors) == (name != "GET /healthz"), name
        if op.get("security"):
            assert {401, 403, 503} <= set(errors), name
        if "{" in name:
            assert 404 in errors, name
        if "requestBody" in op:
            assert {400, 413} <= set(errors), name
        for parameter in op.get("parameters", []):
            schema = parameter["schema"]
            strings = [m for m in [schema, *schema.get("anyOf", [])] if m.get("type") == "string"]
            assert all("pattern" in m or "format" in m or "enum" in m for m in strings), (name, parameter)
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_a_created_task_links_to_the_routes_that_take_its_id(document: dict[str, Any]) -> None:
    created = document["paths"]["/api/v1/tasks"]["post"]["responses"]["201"]
    links = created["links"]
    assert "GET /api/v1/tasks/{task_id}" in links
    assert links["POST /api/v1/tasks/{task_id}/cancel"]["parameters"] == {"task_id": "$response.body#/id"}


def test_string_parameters_are_documented_without_nul(document: dict[str, Any]) -> None:
    (team,) = [p for p in document["paths"]["/api/v1/tasks"]["get"]["parameters"] if p["name"] == "team"]
    assert team["schema"]["anyOf"][0]["pattern"] == TEXT_PATTERN
