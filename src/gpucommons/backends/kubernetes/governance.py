"""The verdicts of the AdmissionCheck `gpucommons-governance` (pure: a Workload, the policy and this
month's spend in, a verdict out; no client, no clock).

Kueue runs a ClusterQueue's admission checks once it has reserved quota for a Workload, and admits
the Workload only when every check is `Ready`. This module decides what our check answers, so that a
Job created with plain `kubectl` obeys the rules a task submitted through GPU Commons obeys:

- **Ready**: the Workload may run. Also for Workloads outside team namespaces: not ours to judge.
- **Retry**, when the team's `hard` budget is spent and the class is not `budget_exempt`: Kueue
  evicts the Workload (releasing the quota) and requeues it after `requeueAfterSeconds`
  (`retry_after_seconds`); at the next reservation the check is asked again, so the Workload runs
  once the budget allows (raised, or a new month). A `soft` budget never holds anything.
- **Rejected**, when the priority class is closed to the team (its `teams` rule), when the class has
  a `roles` rule the Job cannot prove it passed (below), or when the class is not one of the
  policy's: Kueue deactivates the Workload (`spec.active: false`) and the Job stays suspended.

The sentences are the server's own (`identity.classes`, `engine.reasons.budget_sentence`), so
`kubectl get workload -o yaml` says what `commons queue` would say.

**Roles.** Kubernetes does not record who created a Job, so a `roles` rule (team admins only, ...)
cannot be checked for a kubectl Job. The server, which did check the submitter's roles, signs each Job
it creates: the pod template carries `gpucommons.io/class-grant`, an HMAC-SHA256 (key shared by the
server and this controller) of the namespace, the Job's name and the class (`class_grant`). Kueue
copies the pod template into the Workload, so the check reads it there. A Workload of a class with a
`roles` rule and no valid grant is Rejected. A grant copied from another Job is worthless for any
other Job name or class; it only lets the same Job name run again in the same class after that Job
is gone (the server never reuses task ids, so such a copy is billed to that task).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpucommons.backends.kubernetes.grants import CLASS_GRANT_ANNOTATION, class_grant, grant_holds
from gpucommons.backends.kubernetes.names import k8s_name
from gpucommons.backends.kubernetes.observe import ClusterNames
from gpucommons.backends.kubernetes.render import RenderOptions
from gpucommons.domain.model import BudgetEnforcement, Policy, PriorityClass, Team
from gpucommons.domain.money import to_cents
from gpucommons.engine.reasons import budget_sentence
from gpucommons.identity.classes import team_denial, who_may_use

Manifest = dict[str, Any]
#: `class_grant` and its annotation are re-exported: what a Job must carry is part of this check.
__all__ = [
    "CLASS_GRANT_ANNOTATION",
    "CheckState",
    "Governance",
    "Verdict",
    "class_grant",
    "decide",
    "is_our_note",
    "pending_note",
    "retry_after_seconds",
]

#: Kueue's own backoff for admission checks (`UpdateAdmissionCheckRequeueState`): 60 s × 2^retries,
#: at most an hour.
RETRY_BASE_S = 60
RETRY_MAX_S = 3600
#: Kueue refuses longer messages (the CRD's maxLength is 32768); ours stay far below.
MAX_MESSAGE = 1024
#: The beginnings of the notes we leave on a Pending check before Kueue reserves quota.
HELD = "held by GPU Commons: "
WILL_REJECT = "GPU Commons will reject it when Kueue reserves quota: "


class CheckState(StrEnum):
    """`status.admissionChecks[].state` of a Workload."""

    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


@dataclass(frozen=True, slots=True)
class Verdict:
    state: CheckState
    message: str


def retry_after_seconds(retry_count: int) -> int:
    """How long Kueue keeps a held Workload out of the queue before it asks again."""
    doublings: int = min(max(retry_count, 0), 16)
    return min(RETRY_MAX_S, RETRY_BASE_S << doublings)


def _owner_job(workload: Manifest) -> str | None:
    for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("apiVersion", "batch/v1") == "batch/v1":
            name = owner.get("name")
            return str(name) if name else None
    return None


def _grants(workload: Manifest) -> list[str]:
    """The grant of every pod set (an empty string where one has none)."""
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    return [
        str(
            (((ps.get("template") or {}).get("metadata") or {}).get("annotations") or {}).get(
                CLASS_GRANT_ANNOTATION, ""
            )
        )
        for ps in pod_sets
    ]


class Governance:
    """The policy's rules indexed for Workloads; build one per policy and ask it per Workload."""

    def __init__(self, policy: Policy, options: RenderOptions | None = None, grant_key: bytes | None = None):
        self.policy = policy
        self.names = ClusterNames.from_policy(policy, options)
        self._classes = {k8s_name(c.name): c for c in policy.priority_classes}
        self._teams = {t.name: t for t in policy.teams}
        self._grant_key = grant_key

    def verdict(self, workload: Manifest, spend: Mapping[str, int]) -> Verdict:
        """What the check answers for `workload`; `spend` is each team's spend this month, in cents."""
        meta = workload.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        team_name = self.names.teams_by_namespace.get(namespace)
        if team_name is None:
            return Verdict(
                CheckState.READY, f"namespace {namespace} is not a GPU Commons team's: no rules apply"
            )
        team = self._teams[team_name]
        ref = (workload.get("spec") or {}).get("priorityClassRef") or {}
        if not ref.get("name"):
            pclass = self.policy.priority_class(self.policy.default_priority_class)
        else:
            found = self._classes.get(str(ref["name"])) if _ours(ref) else None
            if found is None:
                return Verdict(CheckState.REJECTED, self._unknown_class(ref))
            pclass = found
        denied = team_denial(pclass, team.name) or self._roles_denial(workload, namespace, pclass)
        if denied is not None:
            return Verdict(CheckState.REJECTED, _short(denied))
        held = self._budget_hold(team, pclass, spend)
        if held is not None:
            return Verdict(CheckState.RETRY, _short(HELD + held))
        return Verdict(
            CheckState.READY, f"approved by GPU Commons: priority class {pclass.name!r}, team {team.name}"
        )

    def _unknown_class(self, ref: Mapping[str, Any]) -> str:
        names = ", ".join(k8s_name(c.name) for c in self.policy.priority_classes)
        what = "priority class" if _ours(ref) else "pod priority class"
        return _short(
            f"{what} {ref.get('name')!r} is not a GPU Commons priority class ({names}): "
            "label the Job kueue.x-k8s.io/priority-class with one of them"
        )

    def _roles_denial(self, workload: Manifest, namespace: str, pclass: PriorityClass) -> str | None:
        if not pclass.roles:
            return None
        job = _owner_job(workload)
        if self._grant_key is not None and job is not None:
            key, grants = self._grant_key, _grants(workload)
            if grants and all(grant_holds(key, g, namespace, job, pclass.name) for g in grants):
                return None
        return (
            f"{who_may_use(pclass)}; a Job created outside GPU Commons carries no identity to check "
            "that rule against: submit the task with `commons submit`"
        )

    def _budget_hold(self, team: Team, pclass: PriorityClass, spend: Mapping[str, int]) -> str | None:
        budget = team.budget
        if budget is None or budget.enforce is not BudgetEnforcement.HARD or pclass.budget_exempt:
            return None
        limit, spent = to_cents(budget.monthly), int(spend.get(team.name, 0))
        if spent < limit:
            return None
        sentence = budget_sentence(team.name, spent, limit, self.policy.chargeback.currency)
        return f"{sentence}; its new tasks wait until the budget is raised or the month ends"


def decide(
    workload: Manifest,
    policy: Policy,
    spend: Mapping[str, int],
    options: RenderOptions | None = None,
    grant_key: bytes | None = None,
) -> Verdict:
    """`Governance(policy, options, grant_key).verdict(workload, spend)`, for one Workload."""
    return Governance(policy, options, grant_key).verdict(workload, spend)


def pending_note(verdict: Verdict) -> str | None:
    """The message for our check while it is Pending and Kueue has reserved no quota yet, so that a
    waiting Workload says early what it waits for; None: leave the message as it is."""
    if verdict.state is CheckState.RETRY:
        return verdict.message
    if verdict.state is CheckState.REJECTED:
        return _short(WILL_REJECT + verdict.message)
    return None


def is_our_note(message: str) -> bool:
    """A note `pending_note` wrote, to be cleared once the verdict is Ready."""
    return message.startswith((HELD, WILL_REJECT))


def _short(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def _ours(ref: Mapping[str, Any]) -> bool:
    """A Kueue WorkloadPriorityClass (not a pod PriorityClass of `scheduling.k8s.io`)."""
    return str(ref.get("kind", "WorkloadPriorityClass")) == "WorkloadPriorityClass"
