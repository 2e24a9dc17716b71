"""Where the sample data that ships with the repository lives, for tests and benchmarks.

`examples/traces/` holds the real cluster traces (origin and licence in its README);
`tests/data/kueue/` holds Kueue's CRD schemas and the Workload/Job/Pod shapes a fake cluster answers
with. Both are in the checkout: a test that cannot find them is run from an installed package
without the source tree, which the suite does not support.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TRACES = REPO / "examples" / "traces"
KUEUE_DATA = REPO / "tests" / "data" / "kueue"


def trace_file(name: str) -> Path:
    """A file of `examples/traces/`, e.g. `philly_vc_jobs_2017-10.csv`."""
    return _existing(TRACES / name)


def kueue_file(*parts: str) -> Path:
    """A file of `tests/data/kueue/`, e.g. `kueue_file("crds", "kueue.x-k8s.io_cohorts.yaml")`."""
    return _existing(KUEUE_DATA.joinpath(*parts))


def _existing(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the tests from a checkout of the repository")
    return path
