"""Discovery endpoints (RFC 7644 §4): ServiceProviderConfig, ResourceTypes, Schemas.

Everything is derived from `identity.scim.PROVIDER`, the same description the handlers validate
with, so what we announce is what we accept. Discovery needs a scim (or admin) token like the rest.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from scim2_models import Context, ListResponse, NotFoundException, ResourceType, Schema

from gpucommons.identity.principal import Principal
from gpucommons.identity.scim import PROVIDER, SERVICE_PROVIDER_CONFIG
from gpucommons.server.scim.auth import scim_reader
from gpucommons.server.scim.responses import ScimResponse

router = APIRouter()
Reader = Annotated[Principal, Depends(scim_reader)]


def _with_meta(obj: Any, kind: str, location: str) -> dict[str, Any]:
    body: dict[str, Any] = obj.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    body["meta"] = {"resourceType": kind, "location": location}
    return body


def _schema_body(schema: Schema, base: str) -> dict[str, Any]:
    return _with_meta(schema, "Schema", f"{base}Schemas/{schema.id}")


def _resource_type_body(rt: ResourceType, base: str) -> dict[str, Any]:
    return _with_meta(rt, "ResourceType", f"{base}ResourceTypes/{rt.id}")


def _listing(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schemas": [str(ListResponse.__schema__)],
        "totalResults": len(items),
        "startIndex": 1,
        "itemsPerPage": len(items),
        "Resources": items,
    }


@router.get("/ServiceProviderConfig")
def service_provider_config(request: Request, _: Reader) -> ScimResponse:
    return ScimResponse(
        _with_meta(
            SERVICE_PROVIDER_CONFIG, "ServiceProviderConfig", f"{request.base_url}ServiceProviderConfig"
        )
    )


@router.get("/ResourceTypes")
def resource_types(request: Request, _: Reader) -> ScimResponse:
    base = str(request.base_url)
    return ScimResponse(_listing([_resource_type_body(rt, base) for rt in PROVIDER.resource_types]))


@router.get("/ResourceTypes/{name}")
def resource_type(request: Request, name: str, _: Reader) -> ScimResponse:
    for rt in PROVIDER.resource_types:
        if rt.id == name:
            return ScimResponse(_resource_type_body(rt, str(request.base_url)))
    raise NotFoundException(detail=f"no resource type {name!r}")


@router.get("/Schemas")
def schemas(request: Request, _: Reader) -> ScimResponse:
    base = str(request.base_url)
    return ScimResponse(_listing([_schema_body(s, base) for s in PROVIDER.schemas]))


@router.get("/Schemas/{schema_id}")
def schema(request: Request, schema_id: str, _: Reader) -> ScimResponse:
    for s in PROVIDER.schemas:
        if s.id == schema_id:
            return ScimResponse(_schema_body(s, str(request.base_url)))
    raise NotFoundException(detail=f"no schema {schema_id!r}")
