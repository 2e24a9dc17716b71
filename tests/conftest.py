"""Fixtures shared by several test folders: a real multi-node Slurm (gpucommons.testing.slurm_cluster).

The clusters start on first use, once per session (about a second; a few more with accounting), and
skip the test with the reason when they cannot start here (not root, Slurm or MariaDB missing). The
function-scoped fixtures hand out the session's cluster and empty its queue after each test; a test
that kills a node starts a cluster of its own with `slurm_cluster()` instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpucommons.testing.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_cluster


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
