"""The controller of the AdmissionCheck `gpucommons-governance` (I/O around `governance`).

It lists and watches Kueue Workloads (`watch.list_and_watch`). For each Workload whose entry of one
of our checks (AdmissionChecks with `controllerName: gpucommons.io/governance`) is `Pending`:

- once Kueue has reserved quota (`status.admission`), it writes the verdict: `Ready`, `Retry` with
  `requeueAfterSeconds` (Kueue evicts the Workload, releases the quota and requeues it after that
  long; 60 s doubling per retry, at most an hour) or `Rejected` (Kueue deactivates it). This is when
  Kueue's own check controllers answer: the flavors are known and the check runs once per
  reservation. Evicted, deactivated and finished Workloads are left alone;
- before that, it leaves a note on the Pending entry when the answer will not be `Ready` (`held by
  GPU Commons: team nlp has spent …`), so a Workload waiting in its backoff says why, and clears the
  note once the budget allows again.

Writes are JSON merge patches of the Workload's `/status` (field manager `gpucommons-governance`)
carrying the whole `admissionChecks` list as read, with our entry changed, and the resourceVersion
read: the API server refuses the write (409) if anything changed meanwhile, so nothing Kueue wrote is
lost and no verdict is written on a state it was not made for; the watch then brings the new state.
`lastTransitionTime` moves only when the state does, as Kueue's `SetAdmissionCheckState` does.

It also marks each of our AdmissionChecks `Active=True` (Kueue keeps a ClusterQueue whose check is
not active inactive). Errors never end the loop: a refused write is logged and retried at the next
resync, 429/5xx answers and an unreachable server are retried with backoff.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpucommons.backends.kubernetes.connection import ApiStatus, KubeApi, KubeError, Unreachable
from gpucommons.backends.kubernetes.governance import (
    CheckState,
    Governance,
    Verdict,
    is_our_note,
    pending_note,
    retry_after_seconds,
)
from gpucommons.backends.kubernetes.kinds import KINDS
from gpucommons.backends.kubernetes.render import GOVERNANCE_CONTROLLER, RenderOptions
from gpucommons.backends.kubernetes.watch import list_and_watch
from gpucommons.domain.model import Policy

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
FIELD_MANAGER = "gpucommons-governance"
MERGE_PATCH = "application/merge-patch+json"
ACTIVE_MESSAGE = "The GPU Commons governance controller answers this check"
_TRANSIENT = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Answer:
    """What the controller wrote on one Workload's check."""

    namespace: str
    name: str
    state: CheckState
    message: str


def _now_text(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(obj: Manifest, kind: str) -> Manifest | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _is_true(obj: Manifest, kind: str) -> bool:
    return (_condition(obj, kind) or {}).get("status") == "True"


def _key(obj: Manifest) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


class GovernanceController:
    """Answers the governance AdmissionCheck on every Workload Kueue asks it about.

    `api`: a connection (`connection.connect`); it needs get, list, watch and patch on
    `workloads.kueue.x-k8s.io` and `workloads/status`, and list and patch on `admissionchecks` and
    `admissionchecks/status`. `policy` returns the current policy and `spend` each team's spend
    this month in cents (by policy team name); both are asked again for every decision, so a new
    policy or budget applies at once. `clock` gives the time written as `lastTransitionTime`.
    `options` are the render options the cluster was rendered with (namespace prefix). `grant_key`
    verifies the class grants of the server's own Jobs (`governance.class_grant`); without it every
    Workload of a class with a `roles` rule is Rejected. `resync_s`: how often the watched Workloads
    are looked at again without an event (budgets change without one); `backoff_s` and
    `max_backoff_s` bound the waits after failures.
    """

    def __init__(
        self,
        api: KubeApi,
        policy: Callable[[], Policy],
        spend: Callable[[], Mapping[str, int]],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        options: RenderOptions | None = None,
        *,
        grant_key: bytes | None = None,
        resync_s: int = 60,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
    ) -> None:
        self.api = api
        self._policy = policy
        self._spend = spend
        self._clock = clock
        self._options = options or RenderOptions()
        self._grant_key = grant_key
        self.resync_s = resync_s
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._governance: Governance | None = None
        #: Names of the AdmissionChecks whose controllerName is ours.
        self.checks: frozenset[str] = frozenset()
        self._looked = False
        self._workloads: dict[tuple[str, str], Manifest] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()

    # --- the loop ----------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List and watch Workloads and answer them until `stop` is set."""
        self._stop = stop
        delay = self._backoff_s
        while not stop.is_set():
            try:
                self.activate()
                list_and_watch(
                    self.api,
                    KINDS["Workload"].collection_path(),
                    self._listed,
                    self._changed,
                    stop,
                    timeout_s=self.resync_s,
                    after_watch=self._resync,
                )
                delay = self._backoff_s
            except KubeError as error:
                log.warning("governance check: %s; trying again in %.0f s", error, delay)
                stop.wait(delay)
                delay = min(delay * 2, self._max_backoff_s)

    def reconcile_once(self) -> list[Answer]:
        """One pass without a watch: mark our checks active, list every Workload and answer the
        ones waiting for us. Raises `KubeError` when the list itself fails."""
        self.activate()
        items = self.api.request("GET", KINDS["Workload"].collection_path()).body.get("items", [])
        return self._replace(list(items))

    def _resync(self) -> None:
        self.resync()

    def resync(self) -> list[Answer]:
        """Answer the Workloads already seen again (the budget or the policy may have changed)."""
        with self._lock:
            self.activate()
            return self._reconcile_all(list(self._workloads.values()))

    # --- the AdmissionChecks -------------------------------------------------------------------------

    def activate(self) -> frozenset[str]:
        """Find our AdmissionChecks and mark each `Active=True`; returns their names. A refusal
        (RBAC, no Kueue) is logged and the names found before are kept; 429/5xx and an unreachable
        server raise, for the caller to back off."""
        try:
            listing = self.api.request("GET", KINDS["AdmissionCheck"].collection_path()).body
        except ApiStatus as status:
            if status.code in _TRANSIENT:
                raise
            log.error("governance check: cannot list AdmissionChecks: %s", status)
            return self.checks
        ours = [
            c
            for c in listing.get("items", [])
            if (c.get("spec") or {}).get("controllerName") == GOVERNANCE_CONTROLLER
        ]
        for check in ours:
            self._mark_active(check)
        names = frozenset(str(c["metadata"]["name"]) for c in ours)
        if not names and (self.checks or not self._looked):  # once, not at every resync
            log.warning("governance check: no AdmissionCheck names controller %s", GOVERNANCE_CONTROLLER)
        self.checks, self._looked = names, True
        return names

    def _mark_active(self, check: Manifest) -> None:
        meta = check.get("metadata") or {}
        active = _condition(check, "Active") or {}
        generation = int(meta.get("generation") or 1)
        if (
            active.get("status") == "True"
            and int(active.get("observedGeneration") or generation) == generation
        ):
            return
        condition = {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": ACTIVE_MESSAGE,
            "lastTransitionTime": _now_text(self._clock()),
            "observedGeneration": generation,
        }
        others = [c for c in (check.get("status") or {}).get("conditions") or [] if c.get("type") != "Active"]
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "status": {"conditions": [*others, condition]},
        }
        path = KINDS["AdmissionCheck"].object_path(str(meta.get("name", ""))) + "/status"
        try:
            self._patch(path, body, f"AdmissionCheck {meta.get('name')}")
        except KubeError as error:  # Kueue keeps the queues inactive meanwhile: say so, carry on
            log.error("governance check: cannot mark it Active: %s", error)

    # --- the Workloads -------------------------------------------------------------------------------

    def _replace(self, items: list[Manifest]) -> list[Answer]:
        with self._lock:
            self._workloads = {_key(obj): obj for obj in items}
            return self._reconcile_all(items)

    def _listed(self, items: list[Manifest]) -> None:
        self._replace(items)

    def _changed(self, kind: str, obj: Manifest) -> None:
        with self._lock:
            if kind == "DELETED":
                self._workloads.pop(_key(obj), None)
                return
            self._workloads[_key(obj)] = obj
            self._reconcile_all([obj])

    def _reconcile_all(self, items: list[Manifest]) -> list[Answer]:
        waiting = [obj for obj in items if self._our_pending_entry(obj) is not None]
        if not waiting:
            return []
        try:
            governance = self._rules()
            spend = dict(self._spend())
        except Exception:  # the server's callables: a failure must not answer wrongly, nor stop us
            log.exception("governance check: cannot read the policy or the spend; answering later")
            return []
        answers = []
        for obj in waiting:
            try:
                answer = self.reconcile(obj, governance.verdict(obj, spend))
            except KubeError as error:
                log.warning("governance check: %s/%s: %s; trying again later", *_key(obj), error)
                continue
            except Exception:  # one odd Workload must not stop the answers to the others
                log.exception("governance check: %s/%s: cannot answer it", *_key(obj))
                continue
            if answer is not None:
                answers.append(answer)
        return answers

    def _rules(self) -> Governance:
        policy = self._policy()
        if self._governance is None or self._governance.policy is not policy:
            self._governance = Governance(policy, self._options, self._grant_key)
        return self._governance

    def _our_pending_entry(self, workload: Manifest) -> Manifest | None:
        """Our check's entry when it is Pending on a Workload that can still be admitted."""
        meta, spec = workload.get("metadata") or {}, workload.get("spec") or {}
        if meta.get("deletionTimestamp") or spec.get("active") is False:
            return None
        if _is_true(workload, "Finished") or _is_true(workload, "DeactivationTarget"):
            return None
        for entry in (workload.get("status") or {}).get("admissionChecks") or []:
            if entry.get("name") in self.checks and entry.get("state") == CheckState.PENDING:
                return dict(entry)
        return None

    def reconcile(self, workload: Manifest, verdict: Verdict) -> Answer | None:
        """Write `verdict` on `workload` if it is waiting for it (see the module's rules); the
        answer written, or None when there was nothing to write or the write lost a race."""
        entry = self._our_pending_entry(workload)
        if entry is None:
            return None
        if (workload.get("status") or {}).get("admission"):
            if _is_true(workload, "Evicted"):  # Kueue is releasing the quota: asked again later
                return None
            state, message = verdict.state, verdict.message
        else:
            note = pending_note(verdict)
            if note is None:
                if not is_our_note(str(entry.get("message", ""))):
                    return None
                note = ""
            state, message = CheckState.PENDING, note
        if state is CheckState.PENDING and message == entry.get("message"):
            return None
        if state is CheckState.PENDING:  # a note: only the message changes
            new = {**entry, "message": message}
        else:  # as Kueue's SetAdmissionCheckState: the time moves with the state
            new = {k: v for k, v in entry.items() if k not in ("requeueAfterSeconds", "podSetUpdates")}
            new.update(state=str(state), message=message, lastTransitionTime=_now_text(self._clock()))
        if state is CheckState.RETRY:
            new["requeueAfterSeconds"] = retry_after_seconds(int(entry.get("retryCount") or 0))
        checks = [new if c.get("name") == entry["name"] else c for c in workload["status"]["admissionChecks"]]
        namespace, name = _key(workload)
        body = {
            "metadata": {"resourceVersion": workload["metadata"].get("resourceVersion")},
            "status": {"admissionChecks": checks},
        }
        path = KINDS["Workload"].object_path(name, namespace) + "/status"
        written = self._patch(path, body, f"Workload {namespace}/{name}")
        if written is None:
            return None
        self._workloads[(namespace, name)] = written
        log.info("governance check: %s/%s %s: %s", namespace, name, state, message)
        return Answer(namespace, name, state, message)

    # --- writing -------------------------------------------------------------------------------------

    def _patch(self, path: str, body: Manifest, what: str) -> Manifest | None:
        """The merge patch, retried with backoff on 429/5xx and an unreachable server; None when the
        object changed meanwhile (409) or is gone (404). Other refusals raise `KubeError`."""
        delay = self._backoff_s
        for attempt in range(4):
            try:
                query = [("fieldManager", FIELD_MANAGER)]
                return self.api.request("PATCH", path, query, body, MERGE_PATCH).body
            except ApiStatus as status:
                if status.code in (404, 409):
                    log.debug("governance check: %s changed or went before our write (%s)", what, status.code)
                    return None
                if status.code not in _TRANSIENT or attempt == 3:
                    raise KubeError(f"{what}: {status}") from None
            except Unreachable:
                if attempt == 3:
                    raise
            self._stop.wait(delay)
            delay = min(delay * 2, self._max_backoff_s)
        return None
