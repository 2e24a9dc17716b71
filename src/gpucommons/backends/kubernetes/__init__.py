"""The Kubernetes backend: `render` (pure: policy → manifests), `apply` (server-side apply through
the optional `kubernetes` client, imported lazily in `connection`), `jobs` (pure: task → Job) and
`observe` (pure: Kueue Workloads → ledger intervals; `watch` is its I/O loop), `governance` (pure:
what the AdmissionCheck `gpucommons-governance` answers; `admission_check.GovernanceController` is its
controller)."""

from gpucommons.backends.kubernetes.files import checked_render, render_files, render_stream
from gpucommons.backends.kubernetes.kueue_rules import kueue_rule_violations
from gpucommons.backends.kubernetes.names import (
    LOCAL_QUEUE,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    cluster_queue_name,
    k8s_name,
    namespace_name,
)
from gpucommons.backends.kubernetes.render import RenderError, RenderOptions, render

__all__ = [
    "LOCAL_QUEUE",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_NAME_LABEL",
    "RenderError",
    "RenderOptions",
    "checked_render",
    "cluster_queue_name",
    "k8s_name",
    "kueue_rule_violations",
    "namespace_name",
    "render",
    "render_files",
    "render_stream",
]
