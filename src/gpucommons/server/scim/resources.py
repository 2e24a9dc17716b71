"""The /Users and /Groups endpoints (RFC 7644 §3): one set of handlers for both resource types.

Each handler validates with scim2-models under `SCIM_POLICY`, works through `Directory` in one
transaction, and answers with the resource as stored (PATCH answers 200 with the resource, which
scim-sanity and Okta expect). Handlers are sync: FastAPI runs them in its thread pool, beside the
scheduler's use of the same database.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from scim2_models import (
    Context,
    InvalidFilterException,
    InvalidValueException,
    ListResponse,
    PatchOp,
    Resource,
    ResponseParameters,
    SearchRequest,
)
from sqlalchemy.orm import Session

from gpucommons.identity.principal import Principal
from gpucommons.identity.scim import (
    SCIM_POLICY,
    ScimGroup,
    ScimUser,
    dedupe_members,
    members_only_patch,
    normalise_patch,
    normalise_resource,
)
from gpucommons.identity.scim_filter import Equals, FilterError, parse_filter
from gpucommons.server.auth.deps import current_policy, database
from gpucommons.server.scim.auth import scim_reader, scim_writer
from gpucommons.server.scim.directory import Directory
from gpucommons.server.scim.responses import ScimResponse, json_body, page
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser

_Row = TypeVar("_Row", DirectoryUser, DirectoryGroup)


@dataclass(frozen=True)
class Kind(Generic[_Row]):
    """What differs between Users and Groups; everything else is shared."""

    name: str
    endpoint: str
    model: type[Resource[Any]]
    get: Callable[[Directory, str], _Row]
    query: Callable[[Directory, Sequence[Equals], int, int], tuple[int, list[_Row]]]
    save: Callable[[Directory, _Row | None, Any], _Row]
    delete: Callable[[Directory, _Row], None]
    #: Rows → resources; the flag says the answer excludes `members` (only groups have any).
    render: Callable[[Directory, Sequence[_Row], str, bool], list[Any]]


def _render_users(
    d: Directory, rows: Sequence[DirectoryUser], base: str, _no_members: bool = False
) -> list[Any]:
    groups = d.groups_of(r.id for r in rows)
    return [d.user_resource(r, groups[r.id], base) for r in rows]


def _render_groups(
    d: Directory, rows: Sequence[DirectoryGroup], base: str, no_members: bool = False
) -> list[Any]:
    return [d.group_resource(r, base, members=not no_members) for r in rows]


def _excludes_members(params: ResponseParameters[Any] | None) -> bool:
    excluded = params.excluded_attributes if params is not None else None
    return any(str(p).lower().rsplit(":", 1)[-1] == "members" for p in excluded or [])


USERS: Kind[DirectoryUser] = Kind(
    "User", "/Users", ScimUser, Directory.user, Directory.query_users, Directory.save_user,
    Directory.delete_user, _render_users,
)  # fmt: skip
GROUPS: Kind[DirectoryGroup] = Kind(
    "Group", "/Groups", ScimGroup, Directory.group, Directory.query_groups, Directory.save_group,
    Directory.delete_group, _render_groups,
)  # fmt: skip

Reader = Annotated[Principal, Depends(scim_reader)]
Writer = Annotated[Principal, Depends(scim_writer)]
Body = Annotated[Any, Depends(json_body)]


@functools.cache
def _list_of(model: Any) -> Any:
    """`ListResponse[model]`, built once: parametrising a pydantic generic costs about a millisecond."""
    return ListResponse[model]


@functools.cache
def _patch_of(model: Any) -> Any:
    return PatchOp[model]


def _directory(request: Request, session: Session) -> Directory:
    return Directory(session, time.time(), current_policy(request))


def _base(request: Request) -> str:
    return str(request.base_url)


def _params(model: Any, attributes: str | None, excluded: str | None) -> ResponseParameters[Any] | None:
    if not attributes and not excluded:
        return None
    if attributes and excluded:
        raise InvalidValueException(detail="attributes and excludedAttributes are mutually exclusive")
    return ResponseParameters[model].model_validate(  # type: ignore[index,no-any-return]
        {"attributes": attributes, "excludedAttributes": excluded}
    )


def _filter(text: str | None) -> tuple[Equals, ...]:
    if not text:
        return ()
    try:
        return parse_filter(text)
    except FilterError as exc:
        raise InvalidFilterException(detail=str(exc)) from exc


def _dump(resource: Any, ctx: Context, params: ResponseParameters[Any] | None = None) -> dict[str, Any]:
    return resource.model_dump(scim_ctx=ctx, response_parameters=params)  # type: ignore[no-any-return]


def _one(
    kind: Kind[Any], request: Request, d: Directory, row: Any, ctx: Context, params: Any
) -> dict[str, Any]:
    return _dump(kind.render(d, [row], _base(request), _excludes_members(params))[0], ctx, params)


def add_routes(router: APIRouter, kind: Kind[Any]) -> None:
    """Register list, search, create, read, replace, patch and delete for `kind` on `router`."""
    ep = kind.endpoint

    def listing(
        request: Request, where: tuple[Equals, ...], start: int, count: int, params: Any
    ) -> ScimResponse:
        with database(request).session() as session:
            d = _directory(request, session)
            total, rows = kind.query(d, where, start, count)
            resources = kind.render(d, rows, _base(request), _excludes_members(params))
        body = _list_of(kind.model)(
            total_results=total, start_index=start, items_per_page=len(resources), resources=resources
        )
        return ScimResponse(_dump(body, Context.SEARCH_RESPONSE, params))

    @router.get(ep, name=f"scim_list_{kind.name}")
    def list_resources(
        request: Request,
        _: Reader,
        filter: str | None = None,
        start_index: Annotated[int | None, Query(alias="startIndex")] = None,
        count: int | None = None,
        attributes: str | None = None,
        excluded: Annotated[str | None, Query(alias="excludedAttributes")] = None,
    ) -> ScimResponse:
        start, size = page(start_index, count)
        return listing(request, _filter(filter), start, size, _params(kind.model, attributes, excluded))

    @router.post(ep + "/.search", name=f"scim_search_{kind.name}")
    def search(request: Request, _: Reader, payload: Body) -> ScimResponse:
        sr: SearchRequest[Any] = SearchRequest.model_validate(payload, scim_ctx=Context.SEARCH_REQUEST)
        start, size = page(sr.start_index, sr.count)
        params = _params(
            kind.model,
            ",".join(str(a) for a in sr.attributes or []) or None,
            ",".join(str(a) for a in sr.excluded_attributes or []) or None,
        )
        return listing(request, _filter(str(sr.filter) if sr.filter else None), start, size, params)

    @router.post(ep, status_code=201, name=f"scim_create_{kind.name}")
    def create(request: Request, _: Writer, payload: Body) -> ScimResponse:
        resource = kind.model.model_validate(
            normalise_resource(payload), scim_ctx=Context.RESOURCE_CREATION_REQUEST, scim_policy=SCIM_POLICY
        )
        if isinstance(resource, ScimGroup):
            dedupe_members(resource)
        with database(request).session() as session:
            d = _directory(request, session)
            row = kind.save(d, None, resource)
            body = _one(kind, request, d, row, Context.RESOURCE_CREATION_RESPONSE, None)
        location = f"{_base(request)}{ep.lstrip('/')}/{row.id}"
        return ScimResponse(body, status_code=201, headers={"Location": location})

    @router.get(ep + "/{resource_id}", name=f"scim_get_{kind.name}")
    def read(
        request: Request,
        resource_id: str,
        _: Reader,
        attributes: str | None = None,
        excluded: Annotated[str | None, Query(alias="excludedAttributes")] = None,
    ) -> ScimResponse:
        params = _params(kind.model, attributes, excluded)
        with database(request).session() as session:
            d = _directory(request, session)
            body = _one(kind, request, d, kind.get(d, resource_id), Context.RESOURCE_QUERY_RESPONSE, params)
        return ScimResponse(body)

    @router.put(ep + "/{resource_id}", name=f"scim_replace_{kind.name}")
    def replace(request: Request, resource_id: str, _: Writer, payload: Body) -> ScimResponse:
        incoming = kind.model.model_validate(
            normalise_resource(payload),
            scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST,
            scim_policy=SCIM_POLICY,
        )
        with database(request).session() as session:
            d = _directory(request, session)
            row = kind.get(d, resource_id)
            current = kind.render(d, [row], _base(request), False)[0]
            incoming.replace(current)  # read-only attributes kept, immutable ones checked
            if isinstance(incoming, ScimGroup):
                dedupe_members(incoming)
            row = kind.save(d, row, incoming)
            body = _one(kind, request, d, row, Context.RESOURCE_REPLACEMENT_RESPONSE, None)
        return ScimResponse(body)

    @router.patch(ep + "/{resource_id}", name=f"scim_patch_{kind.name}")
    def patch(
        request: Request,
        resource_id: str,
        _: Writer,
        payload: Body,
        attributes: str | None = None,
        excluded: Annotated[str | None, Query(alias="excludedAttributes")] = None,
    ) -> ScimResponse:
        params = _params(kind.model, attributes, excluded)
        payload = normalise_patch(payload)
        edits = members_only_patch(payload) if kind is GROUPS else None
        if edits is not None:
            with database(request).session() as session:
                d = _directory(request, session)
                row = d.edit_members(d.group(resource_id), edits)
                body = _one(kind, request, d, row, Context.RESOURCE_PATCH_RESPONSE, params)
            return ScimResponse(body)
        operations = _patch_of(kind.model).model_validate(
            payload, scim_ctx=Context.RESOURCE_PATCH_REQUEST, scim_policy=SCIM_POLICY
        )
        with database(request).session() as session:
            d = _directory(request, session)
            row = kind.get(d, resource_id)
            resource = kind.render(d, [row], _base(request), False)[0]
            if operations.patch(resource, scim_policy=SCIM_POLICY):
                if isinstance(resource, ScimGroup):
                    dedupe_members(resource)
                row = kind.save(d, row, resource)
            body = _one(kind, request, d, row, Context.RESOURCE_PATCH_RESPONSE, params)
        return ScimResponse(body)

    @router.delete(ep + "/{resource_id}", status_code=204, name=f"scim_delete_{kind.name}")
    def remove(request: Request, resource_id: str, _: Writer) -> Response:
        with database(request).session() as session:
            d = _directory(request, session)
            kind.delete(d, kind.get(d, resource_id))
        return Response(status_code=204)


def add_root_search(router: APIRouter) -> None:
    """POST /.search (RFC 7644 §3.4.3): Users and Groups together, users first."""

    @router.post("/.search", name="scim_search_all")
    def search_all(request: Request, _: Reader, payload: Body) -> ScimResponse:
        sr: SearchRequest[Any] = SearchRequest.model_validate(payload, scim_ctx=Context.SEARCH_REQUEST)
        start, size = page(sr.start_index, sr.count)
        where = _filter(str(sr.filter) if sr.filter else None)
        union: Any = ScimUser | ScimGroup
        params = _params(
            union,
            ",".join(str(a) for a in sr.attributes or []) or None,
            ",".join(str(a) for a in sr.excluded_attributes or []) or None,
        )
        resources: list[Any] = []
        total = 0
        with database(request).session() as session:
            d = _directory(request, session)
            kinds: tuple[Kind[Any], ...] = (USERS, GROUPS)
            for kind in kinds:
                # The page may straddle the two kinds: offset into this kind, then what is left.
                offset = max(0, start - 1 - total)
                n, rows = kind.query(d, where, offset + 1, size - len(resources))
                total += n
                resources += kind.render(d, rows, _base(request), _excludes_members(params))
        body = _list_of(union)(
            total_results=total, start_index=start, items_per_page=len(resources), resources=resources
        )
        return ScimResponse(_dump(body, Context.SEARCH_RESPONSE, params))
