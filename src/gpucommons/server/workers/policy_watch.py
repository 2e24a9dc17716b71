"""Every replica's view of the current policy, when several server processes share one database.

`commons policy apply` through one replica makes the new version current there at once (the router
swaps its `PolicyHolder`); every other replica — the leader's scheduler among them — finds the new
version by this watch, which asks for the newest policy id every `interval_s` (one primary-key
lookup) and swaps its own holder when a newer one is stored. Versions only grow, so a watch that read
an older id than the one just applied here never swaps back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from gpucommons.server.policy_holder import PolicyHolder
from gpucommons.server.services import policies
from gpucommons.store.db import Database

log = logging.getLogger(__name__)


class PolicyWatch:
    def __init__(
        self, db: Database, holder: PolicyHolder, on_change: Callable[[], None], *, interval_s: float = 1.0
    ) -> None:
        self.db = db
        self.holder = holder
        self.on_change = on_change
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> bool:
        """Take a newer stored policy, if there is one; True when the holder changed."""
        newer = policies.newer_than(self.db, self.holder.version)
        if newer is None:
            return False
        policy, version = newer
        if not self.holder.replace_if_newer(policy, version):
            return False
        log.warning("policy version %d applied through another replica is now in force here", version)
        self.on_change()
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="commons-policy-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:
                log.exception("policy check failed; trying again in %.0f s", self.interval_s)
