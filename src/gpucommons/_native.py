"""The engine and the simulator's loop, compiled with mypyc when the checkout has been built.

`scripts/build_native.py` compiles the modules of `COMPILED` into C extensions beside their
sources and writes `_native.json`, the SHA-256 of each source it compiled. Python would load such
an extension in place of its `.py` file even after the file was edited, which would run old
code silently; so at `import gpucommons` (`activate`), unless every listed source still has the
hash it was compiled from, a finder placed first on `sys.meta_path` loads all of them from source,
and a warning says how to rebuild. All or none: compiled modules call each other directly inside
one shared library, so a module loaded from source would not be seen by the compiled ones.

`GPUCOMMONS_PURE=1` asks for the sources without a warning (tests run both ways; a traceback
through Python frames is easier to read). The compiled modules make the same decisions: they are
the same code, and the test suite runs against whichever the checkout has (docs/decisions/0017).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# The rest is imported where it is used: this module runs at every `import gpucommons`, and the
# CLI's start-up is measured (tests/unit/cli/test_cli_startup.py); a checkout never built pays
# for one `stat`.

#: Modules compiled by `scripts/build_native.py`: the pure core's hot path (what one replay or one
#: scheduling cycle runs). Package `__init__` files and modules that define exceptions stay Python
#: (mypyc cannot compile classes derived from built-in exceptions).
COMPILED: tuple[str, ...] = (
    "gpucommons.domain.resources",
    "gpucommons.engine.apply",
    "gpucommons.engine.consolidation",
    "gpucommons.engine.context",
    "gpucommons.engine.cycle",
    "gpucommons.engine.fairshare",
    "gpucommons.engine.instant",
    "gpucommons.engine.placement",
    "gpucommons.engine.preemption",
    "gpucommons.engine.quota",
    "gpucommons.engine.reasons",
    "gpucommons.engine.requests",
    "gpucommons.engine.state",
    "gpucommons.engine.types",
    "gpucommons.engine.whatif",
    "gpucommons.sim.events",
    "gpucommons.sim.jobs",
    "gpucommons.sim.metrics",
    "gpucommons.sim.simulator",
)

PACKAGE_DIR = Path(__file__).resolve().parent
MANIFEST = PACKAGE_DIR / "_native.json"
PURE_ENV = "GPUCOMMONS_PURE"


def source_path(module: str) -> Path:
    """The `.py` file of a module of this package."""
    return PACKAGE_DIR.joinpath(*module.split(".")[1:]).with_suffix(".py")


def source_digest(module: str) -> str:
    import hashlib

    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def source_stamp(module: str) -> list[int]:
    """Size and modification time of a source: when both are as built, the hash is not read."""
    st = source_path(module).stat()
    return [st.st_size, st.st_mtime_ns]


def stale_sources(manifest: dict[str, dict[str, object]]) -> list[str]:
    """The compiled modules whose source no longer has the hash it was compiled from (read only
    for a source whose size or time differs from the build's: a checkout touches files)."""
    return [m for m in COMPILED if not _as_built(m, manifest.get(m))]


def _as_built(module: str, entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    return entry.get("stamp") == source_stamp(module) or entry.get("sha256") == source_digest(module)


class SourceFinder:
    """Finds the compiled modules' `.py` files, ahead of the extensions beside them (a
    `sys.meta_path` finder: `importlib.abc.MetaPathFinder`'s protocol)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        from importlib.util import spec_from_file_location

        return spec_from_file_location(fullname, source_path(fullname))


def _read_manifest() -> dict[str, dict[str, object]] | None:
    import json

    try:
        data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    modules = data.get("modules") if isinstance(data, dict) else None
    return modules if isinstance(modules, dict) else None


def compiled() -> bool:
    """True if the compiled engine is the one in use (benchmarks and `commons doctor` say which)."""
    from gpucommons.engine import cycle

    return not (cycle.__file__ or "").endswith(".py")


def pure_requested(env: Mapping[str, str]) -> bool:
    """`GPUCOMMONS_PURE` set to anything but empty or 0."""
    return env.get(PURE_ENV, "") not in ("", "0")


def activate() -> None:
    """Decide, once per process, whether the compiled modules may be loaded (see the module doc)."""
    if any(isinstance(f, SourceFinder) for f in sys.meta_path):
        return
    if not MANIFEST.exists():
        return  # never built: there are only sources
    if pure_requested(os.environ):
        sys.meta_path.insert(0, SourceFinder())
        return
    manifest = _read_manifest()
    stale = stale_sources(manifest) if manifest is not None else list(COMPILED)
    if stale:
        sys.meta_path.insert(0, SourceFinder())
        names = ", ".join(source_path(m).relative_to(PACKAGE_DIR).as_posix() for m in stale[:3])
        more = f" and {len(stale) - 3} more" if len(stale) > 3 else ""
        import warnings

        warnings.warn(
            f"the compiled engine is older than its source ({names}{more} changed since "
            "scripts/build_native.py ran): using the Python sources, which decide the same but "
            "slower; run `python scripts/build_native.py` to rebuild",
            RuntimeWarning,
            stacklevel=2,
        )
