"""The server's signature on the Jobs it creates: proof, for the governance admission check, that
the server checked the submitter against the class's `roles` rule (docs/kubernetes.md, "Budgets and
class rules inside Kueue"). Its own module so that `jobs` (which writes it) and `governance` (which
verifies it) need not import each other."""

from __future__ import annotations

import hashlib
import hmac

from gpucommons.backends.kubernetes.names import k8s_name

#: On the pod template of Jobs the server creates (Kueue copies it into the Workload's pod sets).
CLASS_GRANT_ANNOTATION = "gpucommons.io/class-grant"
_VERSION = "v1"


def class_grant(key: bytes, namespace: str, job: str, priority_class: str) -> str:
    """`v1:` and the HMAC-SHA256 of `namespace/job/class` (the class as the policy or the Workload
    names it: both give its Kubernetes name)."""
    text = f"{namespace}/{job}/{k8s_name(priority_class)}".encode()
    return f"{_VERSION}:{hmac.new(key, text, hashlib.sha256).hexdigest()}"


def grant_holds(key: bytes, grant: str, namespace: str, job: str, priority_class: str) -> bool:
    return hmac.compare_digest(grant, class_grant(key, namespace, job, priority_class))
