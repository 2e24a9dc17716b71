"""Failed authentications per client address: counted, and refused with 429 past a limit.

A request that presents a credential (a bearer token or the session cookie) and is answered 401 is a
failed authentication. Past `limit` of them from one address within `window_s` seconds, every request
from that address but `/healthz` is answered 429 with `Retry-After` — before its credential is
looked up or its body read — until the oldest failure leaves the window. A request without any
credential is not an attempt and does not count (a browser opening the sign-in page, a probe).

The address is the peer the server sees (no proxy header is trusted, as in the audit log): behind a
reverse proxy every client shares the proxy's address, so set the limit for the proxy's traffic or
rate-limit at the proxy (docs/operations.md).

Memory is bounded: `SlidingWindows` keeps at most `max_keys` addresses (the least recently seen
are forgotten first) and at most `limit` times per address.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpucommons.api.errors import ErrorCode
from gpucommons.server.asgi_errors import send_error

#: Defaults of `Settings.auth_failure_limit` / `auth_failure_window_s`.
DEFAULT_FAILURE_LIMIT = 20
DEFAULT_WINDOW_S = 60.0
#: Routes a blocked address still reaches: load balancers' health checks.
_ALWAYS_OPEN = ("/healthz",)


class SlidingWindows:
    """Event times per key within the last `window_s` seconds, at most `limit` kept per key."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_keys = max_keys
        self.clock = clock
        self._events: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        events = self._events.get(key)
        if events is None:
            events = deque(maxlen=max(1, self.limit))
            self._events[key] = events
            while len(self._events) > self.max_keys:
                self._events.popitem(last=False)
        else:
            self._events.move_to_end(key)
        while events and events[0] <= now - self.window_s:
            events.popleft()
        return events

    def add(self, key: str) -> int:
        """Count one event for `key`; how many it has in the window now (at most `limit`)."""
        with self._lock:
            now = self.clock()
            events = self._recent(key, now)
            events.append(now)
            return len(events)

    def full_for(self, key: str) -> float:
        """Seconds until `key` is under its limit again; 0 when it is under it now."""
        if self.limit <= 0:
            return 0.0
        with self._lock:
            if key not in self._events:
                return 0.0
            now = self.clock()
            events = self._recent(key, now)
            if len(events) < self.limit:
                return 0.0
            return max(0.0, events[0] + self.window_s - now)


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def presents_credential(scope: Scope) -> bool:
    """An `Authorization` header or the web session cookie: the request tries to authenticate."""
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value.strip():
            return True
        if name == b"cookie" and b"commons_session=" in value:
            return True
    return False


class FailedAuthThrottle:
    """ASGI middleware: counts failed authentications per address and answers 429 past the limit."""

    def __init__(self, app: ASGIApp, windows: SlidingWindows) -> None:
        self.app = app
        self.windows = windows

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.windows.limit <= 0 or scope.get("path") in _ALWAYS_OPEN:
            await self.app(scope, receive, send)
            return
        address = client_address(scope)
        wait = self.windows.full_for(address)
        if wait > 0:
            retry_after = max(1, math.ceil(wait))
            message = f"too many failed sign-ins from this address; retry in {retry_after} s"
            details = {"retry_after_s": retry_after}
            headers = {"Retry-After": str(retry_after)}
            await send_error(scope, send, 429, ErrorCode.RATE_LIMITED, message, details, headers)
            return
        if not presents_credential(scope):
            await self.app(scope, receive, send)
            return
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if status == 401:
                self.windows.add(address)
