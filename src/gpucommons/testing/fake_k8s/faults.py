"""Faults a test injects into the fake API server: what goes wrong on a real cluster.

- `drop_watches()`: every open watch stream ends now (cleanly, as on the server's own timeout, or
  abruptly, as when an API server restarts or a load balancer cuts the connection);
- `expire_next_watches(n)`: the next n watches answer an `ERROR` event with a 410 Gone Status, and
  `expire_next_lists(n)` the next n lists answer HTTP 410, as after etcd's compaction;
- `fail_next(verb, resource, n, code)`: the next n matching requests answer 5xx (500 InternalError,
  503 ServiceUnavailable, 504 Timeout, 429 TooManyRequests) with the API server's Status;
- `hang_next(verb, resource, n, seconds)`: the next n matching requests get no answer for that
  long (real seconds), then the connection closes: the client's read timeout fires first.

`verb` is get, list, watch, create, update, patch, delete or `*`; `resource` is a plural (`jobs`), a
subresource (`workloads/status`, `pods/log`) or `*`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class _Rule:
    verb: str
    resource: str
    remaining: int
    action: str  # "status" | "hang"
    code: int = 500
    seconds: float = 0.0

    def matches(self, verb: str, resource: str) -> bool:
        return (
            self.verb in ("*", verb)
            and self.resource in ("*", resource, resource.split("/")[0])
            and ("/" not in self.resource or self.resource == resource)
        )


@dataclass(frozen=True, slots=True)
class Injected:
    action: str
    code: int = 500
    seconds: float = 0.0


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._expire_watches = 0
        self._expire_lists = 0
        self.drop_generation = 0
        self.abrupt_drop = False
        self.released = threading.Event()
        #: (verb, resource, action) of every fault that fired, for assertions.
        self.fired: list[tuple[str, str, str]] = []

    def drop_watches(self, abrupt: bool = False) -> None:
        with self._lock:
            self.abrupt_drop = abrupt
            self.drop_generation += 1

    def expire_next_watches(self, n: int = 1) -> None:
        with self._lock:
            self._expire_watches += n

    def expire_next_lists(self, n: int = 1) -> None:
        with self._lock:
            self._expire_lists += n

    def fail_next(self, verb: str = "*", resource: str = "*", n: int = 1, code: int = 500) -> None:
        if code not in (429, 500, 502, 503, 504):
            raise ValueError("fail_next injects 429, 500, 502, 503 or 504")
        with self._lock:
            self._rules.append(_Rule(verb, resource, n, "status", code=code))

    def hang_next(self, verb: str = "*", resource: str = "*", n: int = 1, seconds: float = 30.0) -> None:
        with self._lock:
            self._rules.append(_Rule(verb, resource, n, "hang", seconds=seconds))

    def clear(self) -> None:
        """Forget every pending fault and end every hanging request now."""
        with self._lock:
            self._rules.clear()
            self._expire_watches = self._expire_lists = 0
        self.released.set()
        self.released = threading.Event()

    def take(self, verb: str, resource: str) -> Injected | None:
        with self._lock:
            if verb == "watch" and self._expire_watches:
                self._expire_watches -= 1
                self.fired.append((verb, resource, "expired"))
                return Injected("expired", 410)
            if verb == "list" and self._expire_lists:
                self._expire_lists -= 1
                self.fired.append((verb, resource, "expired"))
                return Injected("expired", 410)
            for rule in self._rules:
                if rule.remaining > 0 and rule.matches(verb, resource):
                    rule.remaining -= 1
                    self.fired.append((verb, resource, rule.action))
                    self._rules = [r for r in self._rules if r.remaining > 0]
                    return Injected(rule.action, rule.code, rule.seconds)
        return None
