"""Fixtures shared by several test folders: a real multi-node Slurm (gpucommons.testing.slurm_cluster);
and the `pure_python` marker's skip where the engine is compiled (gpucommons._native).

The clusters start on first use, once per session (about a second; a few more with accounting), and
skip the test with the reason when they cannot start here (not root, Slurm or MariaDB missing). The
function-scoped fixtures hand out the session's cluster and empty its queue after each test; a test
that kills a node starts a cluster of its own with `slurm_cluster()` instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpucommons.testing.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_cluster


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A `pure_python` test replaces engine functions to count or break them, which compiled modules
    never see (they call each other directly): where the compiled engine is loaded it is skipped,
    and scripts/test.sh runs it again with GPUCOMMONS_PURE=1."""
    from gpucommons import _native

    if not _native.compiled():
        return
    skip = pytest.mark.skip(reason="patches engine internals: runs under GPUCOMMONS_PURE=1 (scripts/test.sh)")
    for item in items:
        if item.get_closest_marker("pure_python") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def slurm_session() -> Iterator[SlurmCluster]:
    try:
        with slurm_cluster() as cluster:
            yield cluster
    except SlurmUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def slurm_accounting_session() -> Iterator[SlurmCluster]:
    try:
        with slurm_cluster(accounting=True, enforce=True) as cluster:
            yield cluster
    except SlurmUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def slurm(slurm_session: SlurmCluster) -> Iterator[SlurmCluster]:
    """4 nodes (n1..n4) × 8 fake GPUs, partition `gpu`, no accounting; its queue emptied afterwards."""
    yield slurm_session
    slurm_session.cancel_all()


@pytest.fixture
def slurm_accounting(slurm_accounting_session: SlurmCluster) -> Iterator[SlurmCluster]:
    """The same, with slurmdbd on the machine's MariaDB and associations, limits and QOS enforced."""
    yield slurm_accounting_session
    slurm_accounting_session.cancel_all()
