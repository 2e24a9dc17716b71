"""`CommonsClient`: one method per API operation, httpx underneath."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from gpucommons.api import schemas, sse
from gpucommons.api.errors import CommonsError, Unavailable, error_from_body

M = TypeVar("M", bound=BaseModel)


class ServerUnreachable(Unavailable):
    """No answer from the server (not running, wrong COMMONS_URL, network)."""


class CommonsClient:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._token, self._timeout, self._transport = token, timeout, transport
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def copy(self) -> CommonsClient:
        """Another client for the same server and token, with its own connections (for a thread)."""
        return CommonsClient(self.base_url, self._token, timeout=self._timeout, transport=self._transport)

    def __enter__(self) -> CommonsClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- plumbing ---------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ServerUnreachable(
                f"cannot reach the GPU Commons server at {self.base_url}: {exc}"
            ) from None
        _raise_for_error(response)
        return response

    def _model(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        return model.model_validate(self._request(method, path, **kwargs).json())

    def _models(self, model: type[M], method: str, path: str, **kwargs: Any) -> list[M]:
        return _list_of(model, self._request(method, path, **kwargs))

    # --- tasks ------------------------------------------------------------------------------------

    def submit(self, request: schemas.TaskSubmit) -> schemas.Task:
        return self._model(schemas.Task, "POST", "/api/v1/tasks", json=request.model_dump(exclude_none=True))

    def submit_many(self, requests: list[schemas.TaskSubmit]) -> list[schemas.Task]:
        """All queued or none (a job array); at most 1,000 per call."""
        body = {"tasks": [r.model_dump(exclude_none=True) for r in requests]}
        return self._models(schemas.Task, "POST", "/api/v1/tasks/batch", json=body)

    def tasks(
        self, team: str | None = None, states: list[str] | None = None, limit: int = 500
    ) -> list[schemas.Task]:
        params: dict[str, Any] = {"limit": limit}
        if team:
            params["team"] = team
        if states:
            params["state"] = states
        return self._models(schemas.Task, "GET", "/api/v1/tasks", params=params)

    def task(self, task_id: str) -> schemas.Task:
        return self._model(schemas.Task, "GET", f"/api/v1/tasks/{task_id}")

    def cancel(self, task_id: str) -> schemas.Task:
        return self._model(schemas.Task, "POST", f"/api/v1/tasks/{task_id}/cancel")

    def checkpoint(self, task_id: str, path: str | None = None, note: str = "") -> schemas.Task:
        body = schemas.CheckpointReport(path=path, note=note)
        return self._model(
            schemas.Task,
            "POST",
            f"/api/v1/tasks/{task_id}/checkpoint",
            json=body.model_dump(exclude_none=True),
        )

    def events(self, task_id: str, after: int = 0) -> list[schemas.TaskEvent]:
        return self._models(
            schemas.TaskEvent, "GET", f"/api/v1/tasks/{task_id}/events", params={"after": after}
        )

    def logs(self, task_id: str, follow: bool = False, offset: int = 0) -> Iterator[bytes]:
        params: dict[str, str | int] = {"follow": str(follow).lower(), "offset": offset}
        try:
            with self._http.stream(
                "GET", f"/api/v1/tasks/{task_id}/logs", params=params, timeout=httpx.Timeout(30.0, read=None)
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_error(response)
                yield from response.iter_bytes()
        except httpx.TransportError as exc:
            raise ServerUnreachable(
                f"cannot reach the GPU Commons server at {self.base_url}: {exc}"
            ) from None

    def follow_events(
        self,
        team: str | None = None,
        last_id: str | None = None,
        timeout: float | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> Iterator[sse.Message]:
        """Task events as they happen (`GET /api/v1/events`), after `last_id` when given; ends when
        the server ends the stream (its maximum duration, or `timeout`): follow it again with the
        last message's `last_id`. `on_open` is called once the server has accepted the stream.
        `NotFound` from a server that has no event stream."""
        params: dict[str, str | float] = {"team": team} if team else {}
        if timeout is not None:
            params["timeout"] = timeout
        headers = {"Last-Event-ID": last_id} if last_id else {}
        parser = sse.Parser()
        try:
            # The server sends a comment every 15 s: a minute of silence is a connection gone.
            with self._http.stream(
                "GET",
                "/api/v1/events",
                params=params,
                headers=headers,
                timeout=httpx.Timeout(30.0, read=60.0),
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_error(response)
                if on_open is not None:
                    on_open()
                for chunk in response.iter_bytes():
                    yield from parser.feed(chunk)
        except httpx.TransportError as exc:
            raise ServerUnreachable(
                f"cannot reach the GPU Commons server at {self.base_url}: {exc}"
            ) from None

    # --- cluster ----------------------------------------------------------------------------------

    def teams(self) -> list[schemas.TeamSummary]:
        return self._models(schemas.TeamSummary, "GET", "/api/v1/teams")

    def queue(self, team: str | None = None) -> list[schemas.QueueEntry]:
        return self._models(schemas.QueueEntry, "GET", "/api/v1/queue", params={"team": team} if team else {})

    def queue_page(
        self, team: str | None = None, limit: int = 100, after: int | None = None
    ) -> tuple[list[schemas.QueueEntry], int | None]:
        """A page of the queue, and the position to ask after for the next one (None: the last)."""
        params: dict[str, str | int] = {"limit": limit, **({"team": team} if team else {})}
        if after is not None:
            params["after"] = after
        response = self._request("GET", "/api/v1/queue", params=params)
        cursor = response.headers.get("x-next-cursor")
        return _list_of(schemas.QueueEntry, response), int(cursor) if cursor else None

    def usage(
        self, start: datetime | None = None, end: datetime | None = None, team: str | None = None
    ) -> list[schemas.UsageInterval]:
        return self._models(schemas.UsageInterval, "GET", "/api/v1/usage", params=_window(start, end, team))

    def usage_csv(
        self, start: datetime | None = None, end: datetime | None = None, team: str | None = None
    ) -> str:
        return self._request("GET", "/api/v1/usage.csv", params=_window(start, end, team)).text

    def policy(self) -> schemas.PolicyInfo:
        return self._model(schemas.PolicyInfo, "GET", "/api/v1/policy")

    def apply_policy(self, text: str, dry_run: bool = False) -> schemas.PolicyInfo:
        body = schemas.PolicyApply(text=text, dry_run=dry_run)
        return self._model(schemas.PolicyInfo, "PUT", "/api/v1/policy", json=body.model_dump())

    def health(self) -> schemas.Health:
        return self._model(schemas.Health, "GET", "/healthz")


def _list_of(model: type[M], response: httpx.Response) -> list[M]:
    """The response's JSON list, each item read as `model`."""
    return TypeAdapter(list[model]).validate_python(response.json())  # type: ignore[valid-type]


def _window(start: datetime | None, end: datetime | None, team: str | None) -> dict[str, str]:
    params = {}
    if start is not None:
        params["from"] = start.isoformat()
    if end is not None:
        params["to"] = end.isoformat()
    if team:
        params["team"] = team
    return params


def _raise_for_error(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    error: CommonsError = error_from_body(response.status_code, body)
    raise error
