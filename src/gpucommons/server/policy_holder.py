"""The current policy and its version, shared by the app's context and the replica's policy watcher.

Its own module, below both: `workers.policy_watch` swaps it and `context.ServerContext` carries it, and
the context sits above the workers (docs/design.md, "The server's layers")."""

from __future__ import annotations

import threading

from gpucommons.domain.model import Policy


class PolicyHolder:
    """The current policy and its version; swapped whole on `policy apply`, never edited."""

    def __init__(self, policy: Policy, version: int) -> None:
        self._lock = threading.Lock()
        self._policy = policy
        self._version = version

    @property
    def policy(self) -> Policy:
        with self._lock:
            return self._policy

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def replace(self, policy: Policy, version: int) -> None:
        with self._lock:
            self._policy = policy
            self._version = version

    def replace_if_newer(self, policy: Policy, version: int) -> bool:
        with self._lock:
            if version <= self._version:
                return False
            self._policy, self._version = policy, version
            return True
