"""A fake Kubernetes cluster with Kueue, for tests: see docs/testing-kubernetes.md.

An independent emulator: it imports nothing of the code under test (only `gpucommons.testing`).
"""

from gpucommons.testing.fake_k8s.clock import DEFAULT_START, FakeClock
from gpucommons.testing.fake_k8s.cluster import FakeCluster
from gpucommons.testing.fake_k8s.faults import Faults
from gpucommons.testing.fake_k8s.kubelet import EXIT_CODE, IGNORE_SIGTERM, RUN_SECONDS, SIGTERM_SECONDS
from gpucommons.testing.fake_k8s.kueue import workload_name
from gpucommons.testing.fake_k8s.statuses import ApiError

__all__ = [
    "DEFAULT_START",
    "EXIT_CODE",
    "IGNORE_SIGTERM",
    "RUN_SECONDS",
    "SIGTERM_SECONDS",
    "ApiError",
    "FakeClock",
    "FakeCluster",
    "Faults",
    "workload_name",
]
