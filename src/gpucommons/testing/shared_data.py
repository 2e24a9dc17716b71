"""Where the project's shared reference data lives (../shared beside the repository).

The traces and Kueue's CRD schemas are not in the repository: a checkout (and CI) has them in a
`shared/` folder beside it. `COMMONS_SHARED_DIR` overrides the location. Tests that need a file call
`shared_file(...)`, which skips the test with a message naming the missing file instead of failing.
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[3]


def shared_dir() -> Path:
    """The shared folder: $COMMONS_SHARED_DIR, else `shared/` beside the repository."""
    override = os.environ.get("COMMONS_SHARED_DIR")
    return Path(override) if override else _REPO.parent / "shared"


def shared_file(*parts: str) -> Path:
    """A file under the shared folder; skips the calling test when it is not there."""
    path = shared_dir().joinpath(*parts)
    if not path.exists():
        import pytest  # only tests call this; keep pytest out of the package's import path

        pytest.skip(f"reference data not found: {path} (set COMMONS_SHARED_DIR to the shared folder)")
    return path
