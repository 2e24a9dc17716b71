"""The budget watcher: keeps the engine's view of each team's monthly spend current, and alerts.

Every `interval_s` (env `COMMONS_BUDGET_INTERVAL_S`, default 30 s) it prices this month's ledger so
far (`chargeback.budget`) and hands each team's spend to the engine (`ClusterState.set_team_spend`),
so `hard` budgets hold new tasks with "budget exhausted" unless their class is `budget_exempt`. The
spends go to the worker as a command (`workers.commands.SetTeamSpends`); the worker keeps the last
ones and hands them to every state it rebuilds from the store (which keeps no spend). It also sets
the `commons_budget_spent_cents` / `commons_budget_cents` gauges, and raises each newly crossed
threshold (80 %, 100 %) once per team and month:
- an event: an `audit_events` row with action `budget.alert` (this also remembers what was alerted,
  across restarts);
- a metric: `commons_budget_alerts_total{team, threshold}`;
- a webhook, when `COMMONS_BUDGET_WEBHOOK` names a URL: a JSON POST (failures are logged, not retried).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy import select

from gpucommons.backends.ports import Clock
from gpucommons.chargeback.budget import BudgetAlert, BudgetStatus, new_alerts
from gpucommons.server.policy_holder import PolicyHolder
from gpucommons.server.services import chargeback as costs
from gpucommons.server.workers.commands import SetTeamSpends
from gpucommons.server.workers.port import TaskWorker
from gpucommons.store.db import Database
from gpucommons.store.identity_models import AuditEvent

log = logging.getLogger(__name__)

ALERT_ACTION = "budget.alert"


def post_webhook(url: str, payload: dict[str, Any]) -> None:
    try:
        httpx.post(url, json=payload, timeout=5.0).raise_for_status()
    except httpx.HTTPError as exc:
        log.warning("budget webhook %s failed: %s", url, exc)


_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, tuple[Gauge, Gauge, Counter]] = (
    weakref.WeakKeyDictionary()
)
_METRICS_LOCK = threading.Lock()


def _metrics(registry: CollectorRegistry) -> tuple[Gauge, Gauge, Counter]:
    """The budget metrics of an app's registry, made once (a registry refuses a name twice)."""
    with _METRICS_LOCK:
        found = _METRICS.get(registry)
        if found is None:
            found = (
                Gauge("commons_budget_spent_cents", "Team spend this month", ["team"], registry=registry),
                Gauge("commons_budget_cents", "Team monthly budget", ["team"], registry=registry),
                Counter(
                    "commons_budget_alerts",
                    "Budget thresholds crossed",
                    ["team", "threshold"],
                    registry=registry,
                ),
            )
            _METRICS[registry] = found
        return found


class _HasRegistry(Protocol):
    @property
    def registry(self) -> CollectorRegistry: ...


class BudgetSources(Protocol):
    """What the watcher reads of the app's `ServerContext` (which satisfies it), named here because
    the context sits above the workers: the watcher must not import it."""

    @property
    def db(self) -> Database: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def policies(self) -> PolicyHolder: ...

    @property
    def scheduler(self) -> TaskWorker: ...

    @property
    def metrics(self) -> _HasRegistry: ...


class BudgetWatcher:
    def __init__(
        self,
        ctx: BudgetSources,
        *,
        interval_s: float = 30.0,
        webhook: str | None = None,
        send: Callable[[str, dict[str, Any]], None] = post_webhook,
    ) -> None:
        self.ctx = ctx
        self.interval_s = interval_s
        self.webhook = webhook
        self._send = send
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._holding: frozenset[str] = frozenset()
        self.spent, self.budget, self.alerts = _metrics(ctx.metrics.registry)
        self.last: dict[str, BudgetStatus] = {}

    @classmethod
    def from_env(cls, ctx: BudgetSources) -> BudgetWatcher:
        interval = float(os.environ.get("COMMONS_BUDGET_INTERVAL_S", "30") or 30)
        return cls(
            ctx, interval_s=max(interval, 1.0), webhook=os.environ.get("COMMONS_BUDGET_WEBHOOK") or None
        )

    # --- one check ---------------------------------------------------------------------------------

    def check(self) -> list[BudgetAlert]:
        """Price this month so far, update the engine and the gauges, raise new alerts."""
        ctx = self.ctx
        now = ctx.clock.now()
        policy = ctx.policies.policy
        statuses = costs.budgets(ctx.db, policy, now)
        self.last = statuses
        self.reapply()
        holding = frozenset(t for t, s in statuses.items() if s.holds_new_tasks)
        if holding != self._holding:
            self._holding = holding
            ctx.scheduler.wake()
        for team, status in statuses.items():
            self.spent.labels(team).set(status.spent_cents)
            self.budget.labels(team).set(status.budget_cents)
        alerts = new_alerts(statuses, self._already_alerted(now))
        for alert in alerts:
            self._raise(alert, now, policy.chargeback.currency)
        return alerts

    def reapply(self) -> None:
        """Hand the last known spends to the worker (it applies them under its own lock)."""
        spends = {team: status.spent_cents for team, status in self.last.items()}
        self.ctx.scheduler.desk.execute(SetTeamSpends(spends))

    def _already_alerted(self, now: float) -> set[tuple[str, str, int]]:
        month = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m")
        with self.ctx.db.session() as session:
            rows = session.execute(
                select(AuditEvent.team, AuditEvent.target).where(
                    AuditEvent.action == ALERT_ACTION, AuditEvent.target.like(f"{month}:%")
                )
            ).all()
            out = set()
            for team, target in rows:
                m, _, threshold = (target or "").partition(":")
                if team and threshold.isdigit():
                    out.add((team, m, int(threshold)))
            return out

    def _raise(self, alert: BudgetAlert, now: float, currency: str) -> None:
        message = alert.message(currency)
        log.warning("budget alert: %s", message)
        payload = {
            "event": ALERT_ACTION,
            "team": alert.team,
            "month": alert.month,
            "threshold_percent": alert.threshold,
            "spent_cents": alert.spent_cents,
            "budget_cents": alert.budget_cents,
            "enforce": alert.enforce.value,
            "currency": currency,
            "message": message,
        }
        with self.ctx.db.session() as session:
            session.add(
                AuditEvent(
                    at=now,
                    actor=None,
                    credential_id=None,
                    action=ALERT_ACTION,
                    method="",
                    path="",
                    team=alert.team,
                    target=f"{alert.month}:{alert.threshold}",
                    outcome="ok",
                    status_code=200,
                    remote_addr=None,
                    details=payload,
                )
            )
        self.alerts.labels(alert.team, str(alert.threshold)).inc()
        if self.webhook:
            threading.Thread(target=self._send, args=(self.webhook, payload), daemon=True).start()

    # --- the thread ----------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="commons-budgets", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        next_check = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + self.interval_s
                try:
                    self.check()
                except Exception:
                    log.exception("budget check failed; retrying in %.0f s", self.interval_s)
            self._stop.wait(min(1.0, self.interval_s))
