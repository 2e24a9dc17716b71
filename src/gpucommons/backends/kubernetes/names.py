"""Kubernetes names derived from policy names, and the labels every rendered object carries.

Policy names allow `A-Z`, `_` and `.`; Kubernetes object names are DNS-1123 labels (lower-case
letters, digits and `-`). `k8s_name` maps one onto the other; the renderer refuses a policy in which
two names map to the same Kubernetes name instead of silently merging them.
"""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL = 63

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpucommons"}
TEAM_LABEL = "gpucommons.io/team"
DEDICATED_LABEL = "gpucommons.io/dedicated-to"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Jobs carry these two labels so that Kueue queues and prioritises them (docs/design.md: backends).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
#: The LocalQueue of every team namespace. Kueue's LocalQueueDefaulting sends jobs without a
#: queue-name label to the LocalQueue called `default`.
LOCAL_QUEUE = "default"


def k8s_name(name: str) -> str:
    """`NLP_team.v2` → `nlp-team-v2`: lower-case, `_` and `.` become `-`."""
    return re.sub(r"[_.]", "-", name.lower())


def is_dns_label(name: str) -> bool:
    return len(name) <= MAX_LABEL and DNS_LABEL.match(name) is not None


def namespace_name(team: str, prefix: str) -> str:
    """The namespace of a team's tasks: `team-nlp` with the default prefix."""
    return f"{prefix}{k8s_name(team)}"


def cluster_queue_name(team: str) -> str:
    return k8s_name(team)


def dedicated_flavor_name(pool: str, team: str) -> str:
    """The flavor of a dedicated team's own nodes in a pool: `h100-recsys`."""
    return f"{k8s_name(pool)}-{k8s_name(team)}"
