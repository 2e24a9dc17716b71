"""Shared setup for the Kubernetes client tests: the example policy rendered, and a fake cluster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpucommons.backends.kubernetes import checked_render
from gpucommons.backends.kubernetes.connection import KubeApi, connect
from gpucommons.policy import load_policy
from gpucommons.testing.fake_k8s import FakeCluster

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "commons.yaml"


def example_objects(text: str | None = None, tmp: Path | None = None) -> list[dict[str, Any]]:
    """The example policy rendered; `text` replaces the file's content (written under `tmp`)."""
    path = EXAMPLE
    if text is not None:
        assert tmp is not None
        path = tmp / "commons.yaml"
        path.write_text(text)
    return checked_render(load_policy(path))


@contextmanager
def fake_cluster(tmp: Path, **settings: Any) -> Iterator[tuple[FakeCluster, KubeApi]]:
    with FakeCluster(**settings) as fake:
        yield fake, connect(fake.kubeconfig(tmp))
