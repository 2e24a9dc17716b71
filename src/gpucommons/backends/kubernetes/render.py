"""The policy compiled to Kubernetes objects (pure: a `Policy` in, plain dicts out, no client, no I/O).

Per team: a Namespace, RBAC bindings for its directory groups, default-deny NetworkPolicies and a
LocalQueue. For the cluster: Kueue (kueue.x-k8s.io/v1beta2) ResourceFlavors (one per pool, plus one
per pool a dedicated team owns), nested Cohorts, one ClusterQueue per team, WorkloadPriorityClasses,
the AdmissionCheck `gpucommons-governance` every ClusterQueue lists (budgets and class rules, enforced
by `admission_check.GovernanceController`), and the ClusterRoles the bindings refer to.

The mapping is one-to-one with the governance model, so that Kueue admits what the simulator
predicts: nominal quota → `nominalQuota`, borrow limit → `borrowingLimit`, lend limit →
`lendingLimit` (absent limits stay absent), the three preemption words → Kueue's enums.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpucommons.backends.kubernetes.names import (
    DEDICATED_LABEL,
    LOCAL_QUEUE,
    MANAGED_BY,
    NAMESPACE_NAME_LABEL,
    TEAM_LABEL,
    cluster_queue_name,
    dedicated_flavor_name,
    is_dns_label,
    k8s_name,
    namespace_name,
)
from gpucommons.domain.model import (
    BorrowWithinCohortPolicy,
    Isolation,
    Policy,
    PriorityClass,
    QueueingStrategy,
    Quota,
    ReclaimPolicy,
    Team,
    WithinTeamPolicy,
)
from gpucommons.domain.resources import UNLIMITED, Resources
from gpucommons.policy.durations import format_duration

Manifest = dict[str, Any]

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RBAC_API = "rbac.authorization.k8s.io/v1"
NETWORKING_API = "networking.k8s.io/v1"

MEMBER_ROLE = "gpucommons-team-member"
TEAM_ADMIN_ROLE = "gpucommons-team-admin"
PLATFORM_ADMIN_ROLE = "gpucommons-platform-admin"
FINANCE_ROLE = "gpucommons-finance"

_RECLAIM = {
    ReclaimPolicy.NEVER: "Never",
    ReclaimPolicy.LOWER_PRIORITY: "LowerPriority",
    ReclaimPolicy.ANY: "Any",
}
_BORROW_WITHIN = {
    BorrowWithinCohortPolicy.NEVER: "Never",
    BorrowWithinCohortPolicy.LOWER_PRIORITY: "LowerPriority",
}
_WITHIN_TEAM = {
    WithinTeamPolicy.NEVER: "Never",
    WithinTeamPolicy.LOWER_PRIORITY: "LowerPriority",
    WithinTeamPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY: "LowerOrNewerEqualPriority",
}
_QUEUEING = {QueueingStrategy.BEST_EFFORT_FIFO: "BestEffortFIFO", QueueingStrategy.STRICT_FIFO: "StrictFIFO"}

#: Private address ranges: "the internet" for the optional egress rule excludes them, so a team's
#: pods can reach the outside world (datasets, package indexes) but not other teams' pods.
_PRIVATE_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"]

#: The AdmissionCheck every team's ClusterQueue lists, and the controller that answers it.
GOVERNANCE_CHECK = "gpucommons-governance"
GOVERNANCE_CONTROLLER = "gpucommons.io/governance"


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """Site settings that are not governance policy."""

    #: The extended resource name of a GPU on the nodes.
    gpu_resource: str = "nvidia.com/gpu"
    #: Team namespaces are `<prefix><team>`.
    namespace_prefix: str = "team-"
    #: The node label whose value names a node's pool (ResourceFlavor nodeLabels).
    pool_label: str = "gpucommons.io/pool"
    #: Prefix the cluster's authentication adds to directory group names (e.g. `oidc:`).
    group_prefix: str = ""
    #: Let team pods reach addresses outside private ranges (package indexes, object storage).
    internet_egress: bool = True
    #: Render the AdmissionCheck `gpucommons-governance` and list it in every team's ClusterQueue, so
    #: that Kueue admits a Workload only once the governance controller approves it (hard budgets,
    #: class rules), whoever created its Job. Off: Kueue admits by quota alone.
    governance_check: bool = True


class RenderError(ValueError):
    """The policy cannot be expressed as Kubernetes objects (e.g. two teams map to one namespace)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("cannot render the policy for Kubernetes:\n" + "\n".join(f"- {p}" for p in problems))


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**MANAGED_BY, **(labels or {})}
    return meta


def quantity(component: str, amount: int) -> int | str:
    """A Kubernetes quantity: GPUs as integers, CPUs as cores or `500m`, memory as `64Gi` or `512Mi`."""
    if component == "cpu_milli":
        return amount // 1000 if amount % 1000 == 0 else f"{amount}m"
    if component == "memory_mib":
        return f"{amount // 1024}Gi" if amount % 1024 == 0 else f"{amount}Mi"
    return amount


def _covered_components(policy: Policy) -> list[str]:
    """GPUs always; CPUs and memory when any team's or cohort's quota names them (one set for every
    queue, so that a task asking for CPUs is admissible in every team's queue)."""
    quotas = [q for t in policy.teams for q in t.quotas] + [q for c in policy.cohorts for q in c.quotas]
    covered = ["gpus"]
    for component in ("cpu_milli", "memory_mib"):
        if any(
            getattr(q.nominal, component)
            or _limited(q.borrow_limit, component)
            or _limited(q.lend_limit, component)
            for q in quotas
        ):
            covered.append(component)
    return covered


def _limited(limit: Resources, component: str) -> bool:
    value: int = getattr(limit, component)
    return value < UNLIMITED


def _resource_name(component: str, options: RenderOptions) -> str:
    return {"gpus": options.gpu_resource, "cpu_milli": "cpu", "memory_mib": "memory"}[component]


# --- cluster-scoped Kueue objects -------------------------------------------------------------------


def resource_flavors(policy: Policy, options: RenderOptions) -> list[Manifest]:
    flavors = [
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": _meta(k8s_name(pool.name)),
            "spec": {"nodeLabels": {options.pool_label: k8s_name(pool.name)}},
        }
        for pool in policy.pools
    ]
    for team in policy.teams:
        if team.isolation is not Isolation.DEDICATED:
            continue
        for quota in team.quotas:
            team_value = k8s_name(team.name)
            taint = {"key": DEDICATED_LABEL, "value": team_value, "effect": "NoSchedule"}
            flavors.append(
                {
                    "apiVersion": KUEUE_API,
                    "kind": "ResourceFlavor",
                    "metadata": _meta(
                        dedicated_flavor_name(quota.pool, team.name), labels={TEAM_LABEL: team_value}
                    ),
                    "spec": {
                        "nodeLabels": {options.pool_label: k8s_name(quota.pool), DEDICATED_LABEL: team_value},
                        "nodeTaints": [taint],
                        "tolerations": [{**taint, "operator": "Equal"}],
                    },
                }
            )
    return flavors


def cohorts(
    policy: Policy, covered: list[str] | None = None, options: RenderOptions | None = None
) -> list[Manifest]:
    """One Cohort per cohort; a cohort's own quota becomes its `spec.resourceGroups`, shaped as a
    ClusterQueue's (one group covering the same resources, one flavor per pool it has quota in)."""
    covered = covered or _covered_components(policy)
    options = options or RenderOptions()
    out = []
    for cohort in policy.cohorts:
        spec: dict[str, Any] = {}
        if cohort.parent is not None:
            spec["parentName"] = k8s_name(cohort.parent)
        if cohort.quotas:
            flavors = [
                {"name": k8s_name(q.pool), "resources": _resource_quotas(q, covered, options, cap_lend=False)}
                for q in cohort.quotas
            ]
            resources = [_resource_name(c, options) for c in covered]
            spec["resourceGroups"] = [{"coveredResources": resources, "flavors": flavors}]
        out.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "Cohort",
                "metadata": _meta(k8s_name(cohort.name)),
                "spec": spec,
            }
        )
    return out


def _flavor_quota(team: Team, pool: str, covered: list[str], options: RenderOptions) -> dict[str, Any]:
    quota = team.quota(pool)
    assert quota is not None
    dedicated = team.isolation is Isolation.DEDICATED
    # A ClusterQueue without a cohort may carry no limits (Kueue's CEL rule).
    resources = _resource_quotas(quota, covered, options, cap_lend=True, limits=not dedicated)
    name = dedicated_flavor_name(pool, team.name) if dedicated else k8s_name(pool)
    return {"name": name, "resources": resources}


def _resource_quotas(
    quota: Quota, covered: list[str], options: RenderOptions, cap_lend: bool, limits: bool = True
) -> list[dict[str, Any]]:
    """One flavor's `resources`: nominal quota and the limits that are set, in `covered` order. A
    ClusterQueue lends at most its nominal quota (`cap_lend`); a Cohort's lending limit bounds its
    whole subtree's quota, so it stays as written."""
    resources = []
    for component in covered:
        entry: dict[str, Any] = {
            "name": _resource_name(component, options),
            "nominalQuota": quantity(component, getattr(quota.nominal, component)),
        }
        if limits:
            borrow = getattr(quota.borrow_limit, component)
            lend = getattr(quota.lend_limit, component)
            if borrow < UNLIMITED:
                entry["borrowingLimit"] = quantity(component, borrow)
            if lend < UNLIMITED:
                entry["lendingLimit"] = quantity(
                    component, min(lend, getattr(quota.nominal, component)) if cap_lend else lend
                )
        resources.append(entry)
    return resources


def cluster_queue(policy: Policy, team: Team, covered: list[str], options: RenderOptions) -> Manifest:
    rules = team.preemption
    spec: dict[str, Any] = {
        "namespaceSelector": {
            "matchLabels": {NAMESPACE_NAME_LABEL: namespace_name(team.name, options.namespace_prefix)}
        },
        "queueingStrategy": _QUEUEING[policy.scheduling.queueing],
        "preemption": {
            "reclaimWithinCohort": _RECLAIM[rules.reclaim],
            "borrowWithinCohort": {"policy": _BORROW_WITHIN[rules.borrow_within_cohort]},
            "withinClusterQueue": _WITHIN_TEAM[rules.within_team],
        },
        "fairSharing": {"weight": _decimal_quantity(team.fair_share_weight)},
        "resourceGroups": (
            [
                {
                    "coveredResources": [_resource_name(c, options) for c in covered],
                    "flavors": [_flavor_quota(team, q.pool, covered, options) for q in team.quotas],
                }
            ]
            if team.quotas
            else []
        ),
    }
    if team.isolation is Isolation.SHARED:  # a dedicated team stands alone: no cohort, no lending
        spec = {"cohortName": k8s_name(team.cohort), **spec}
    if options.governance_check:  # for every flavor: no onFlavors
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": GOVERNANCE_CHECK}]}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": _meta(cluster_queue_name(team.name), labels={TEAM_LABEL: k8s_name(team.name)}),
        "spec": spec,
    }


def _decimal_quantity(value: Any) -> str:
    text = f"{value:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _class_description(cls: PriorityClass) -> str:
    rules = [
        "never preempted" if not cls.preemptible else f"grace period {format_duration(cls.grace_period_s)}"
    ]
    if cls.max_runtime_s is not None:
        rules.append(f"max runtime {format_duration(cls.max_runtime_s)}")
    if cls.preemptible:
        rules.append(f"min runtime on borrowed GPUs {format_duration(cls.min_runtime_s)}")
    if cls.checkpoint_required:
        rules.append("checkpoint required")
    if cls.budget_exempt:
        rules.append("budget exempt")
    if cls.teams:
        rules.append("teams " + " ".join(cls.teams))
    if cls.roles:
        rules.append("roles " + " ".join(cls.roles))
    return f"GPU Commons priority class {cls.name}: " + ", ".join(rules)


#: Who may use a priority class (`priority_classes[].teams` / `.roles`), for the admission-check
#: controller to enforce: comma-separated team names, their namespaces, and roles. Absent: everyone.
CLASS_TEAMS_ANNOTATION = "gpucommons.io/allowed-teams"
CLASS_NAMESPACES_ANNOTATION = "gpucommons.io/allowed-namespaces"
CLASS_ROLES_ANNOTATION = "gpucommons.io/allowed-roles"


def _class_access(cls: PriorityClass, options: RenderOptions) -> dict[str, str]:
    rules: dict[str, str] = {}
    if cls.teams:
        rules[CLASS_TEAMS_ANNOTATION] = ",".join(cls.teams)
        namespaces = (namespace_name(t, options.namespace_prefix) for t in cls.teams)
        rules[CLASS_NAMESPACES_ANNOTATION] = ",".join(namespaces)
    if cls.roles:
        rules[CLASS_ROLES_ANNOTATION] = ",".join(cls.roles)
    return rules


def workload_priority_classes(policy: Policy, options: RenderOptions | None = None) -> list[Manifest]:
    options = options or RenderOptions()
    out = []
    for cls in policy.priority_classes:
        metadata = _meta(k8s_name(cls.name))
        access = _class_access(cls, options)
        if access:
            metadata["annotations"] = access
        out.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "WorkloadPriorityClass",
                "metadata": metadata,
                "value": cls.value,
                "description": _class_description(cls),
            }
        )
    return out


def admission_checks(options: RenderOptions) -> list[Manifest]:
    """The governance AdmissionCheck (none when `options.governance_check` is off). Kueue keeps a
    ClusterQueue inactive until the check's controller marks it `Active`."""
    if not options.governance_check:
        return []
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": _meta(GOVERNANCE_CHECK),
            "spec": {"controllerName": GOVERNANCE_CONTROLLER},
        }
    ]


# --- RBAC --------------------------------------------------------------------------------------------


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_READ = ["get", "list", "watch"]


def cluster_roles() -> list[Manifest]:
    """What members, team admins, platform admins and finance may do (bound per namespace or cluster)."""
    member_rules = [
        _rule(["batch"], ["jobs"], ["create", *_READ, "delete"]),
        _rule([""], ["pods", "pods/log", "events"], _READ),
        _rule(
            [""], ["configmaps", "secrets", "persistentvolumeclaims"], ["create", *_READ, "update", "delete"]
        ),
        _rule(["kueue.x-k8s.io"], ["workloads", "localqueues"], _READ),
    ]
    roles = {
        MEMBER_ROLE: member_rules,
        TEAM_ADMIN_ROLE: [
            *member_rules,
            _rule(["batch"], ["jobs"], ["update", "patch"]),
            _rule([""], ["pods"], ["delete"]),
            _rule(["kueue.x-k8s.io"], ["workloads"], ["update", "patch"]),
        ],
        PLATFORM_ADMIN_ROLE: [
            _rule(["kueue.x-k8s.io"], ["*"], ["*"]),
            _rule(["batch"], ["jobs"], ["*"]),
            _rule([""], ["namespaces", "pods", "pods/log", "events", "nodes"], _READ),
        ],
        # Usage and quotas of every team, never task contents (Workloads embed pod templates).
        FINANCE_ROLE: [
            _rule(["kueue.x-k8s.io"], ["clusterqueues", "cohorts", "localqueues", "resourceflavors"], _READ)
        ],
    }
    return [
        {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _meta(name), "rules": rules}
        for name, rules in roles.items()
    ]


def _subjects(groups: Iterable[str], options: RenderOptions) -> list[dict[str, str]]:
    return [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": options.group_prefix + g}
        for g in groups
    ]


def cluster_role_bindings(policy: Policy, options: RenderOptions) -> list[Manifest]:
    out = []
    for role, groups in (
        (PLATFORM_ADMIN_ROLE, policy.identity.admin_groups),
        (FINANCE_ROLE, policy.identity.finance_groups),
    ):
        if groups:
            out.append(
                {
                    "apiVersion": RBAC_API,
                    "kind": "ClusterRoleBinding",
                    "metadata": _meta(role),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": _subjects(groups, options),
                }
            )
    return out


# --- per team -----------------------------------------------------------------------------------------


def team_objects(team: Team, options: RenderOptions) -> list[Manifest]:
    """Namespace, role bindings, network policies and LocalQueue of one team."""
    ns = namespace_name(team.name, options.namespace_prefix)
    team_label = {TEAM_LABEL: k8s_name(team.name)}
    objects: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta(
                ns,
                labels={
                    **team_label,
                    # Pod Security "baseline": no privileged pods, host namespaces or hostPath mounts,
                    # which would let a team's task read another team's data on the node.
                    "pod-security.kubernetes.io/enforce": "baseline",
                },
            ),
        }
    ]
    for role, groups in ((MEMBER_ROLE, team.groups), (TEAM_ADMIN_ROLE, team.admin_groups)):
        if groups:
            objects.append(
                {
                    "apiVersion": RBAC_API,
                    "kind": "RoleBinding",
                    "metadata": _meta(role, ns, team_label),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": _subjects(groups, options),
                }
            )
    objects += network_policies(ns, team_label, options)
    objects.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": _meta(LOCAL_QUEUE, ns, team_label),
            "spec": {"clusterQueue": cluster_queue_name(team.name)},
        }
    )
    return objects


def network_policies(ns: str, labels: dict[str, str], options: RenderOptions) -> list[Manifest]:
    """Deny everything, then allow the team's own pods (multi-node tasks), DNS and optionally the internet."""

    def policy(name: str, spec: dict[str, Any]) -> Manifest:
        return {
            "apiVersion": NETWORKING_API,
            "kind": "NetworkPolicy",
            "metadata": _meta(name, ns, labels),
            "spec": spec,
        }

    same_namespace: list[dict[str, Any]] = [{"podSelector": {}}]
    out = [
        policy("default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        policy(
            "allow-same-namespace",
            {
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": same_namespace}],
                "egress": [{"to": same_namespace}],
            },
        ),
        policy(
            "allow-dns",
            {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
                                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                            }
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
        ),
    ]
    if options.internet_egress:
        out.append(
            policy(
                "allow-internet-egress",
                {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(_PRIVATE_RANGES)}}]}],
                },
            )
        )
    return out


# --- the whole policy ------------------------------------------------------------------------------


def _name_problems(policy: Policy, options: RenderOptions) -> list[str]:
    problems = []
    kinds = {
        "pool": [p.name for p in policy.pools],
        "team": [t.name for t in policy.teams],
        "cohort": [c.name for c in policy.cohorts],
        "priority class": [c.name for c in policy.priority_classes],
    }
    for kind, names in kinds.items():
        seen: dict[str, str] = {}
        for name in names:
            k8s = k8s_name(name)
            if k8s in seen and seen[k8s] != name:
                problems.append(
                    f"{kind}s {seen[k8s]!r} and {name!r} both become {k8s!r} in Kubernetes; rename one"
                )
            seen.setdefault(k8s, name)
            if not is_dns_label(k8s):
                problems.append(f"{kind} {name!r} becomes {k8s!r}, which is not a valid Kubernetes name")
    for team in policy.teams:
        ns = namespace_name(team.name, options.namespace_prefix)
        if not is_dns_label(ns):
            problems.append(
                f"namespace {ns!r} of team {team.name!r} is not a valid name (at most 63 characters)"
            )
    return problems


def render(policy: Policy, options: RenderOptions | None = None) -> list[Manifest]:
    """Every object, cluster-scoped first, in the order `kubectl apply` should create them."""
    options = options or RenderOptions()
    problems = _name_problems(policy, options)
    if problems:
        raise RenderError(problems)
    covered = _covered_components(policy)
    objects: list[Manifest] = [
        *resource_flavors(policy, options),
        *cohorts(policy, covered, options),
        *workload_priority_classes(policy, options),
        *admission_checks(options),
        *(cluster_queue(policy, team, covered, options) for team in policy.teams),
        *cluster_roles(),
        *cluster_role_bindings(policy, options),
    ]
    for team in policy.teams:
        objects += team_objects(team, options)
    return objects
