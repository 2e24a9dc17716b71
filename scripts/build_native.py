"""Compile the engine and the simulator's loop with mypyc, beside their sources in src/.

    python scripts/build_native.py          # build if any source changed since the last build
    python scripts/build_native.py --force  # build anyway
    python scripts/build_native.py --clean  # remove the compiled files: back to pure Python

Needs mypy (which ships mypyc), setuptools and a C compiler with Python's headers; `scripts/setup.sh`
runs it and carries on with the Python sources when it fails. The modules compiled are
`gpucommons._native.COMPILED`; `_native.json` records the SHA-256 of each source compiled, and
`import gpucommons` loads the sources instead while any of them differs (src/gpucommons/_native.py).
The same code compiled decides the same: docs/decisions/0017-compiled-engine.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
#: The shared library's name (mypyc's `group_name`): `src/gpucommons__mypyc.*.so`.
GROUP = "gpucommons"

os.environ["GPUCOMMONS_PURE"] = "1"  # this process reads the sources, never an old build
sys.path.insert(0, str(SRC))
from gpucommons import _native  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="build even if the sources are unchanged")
    ap.add_argument("--clean", action="store_true", help="remove the compiled files and the manifest")
    args = ap.parse_args()
    if args.clean:
        print(f"build_native: removed {clean()} compiled files; the engine runs from its sources")
        return 0
    manifest = _native._read_manifest()
    if not args.force and manifest is not None and not _native.stale_sources(manifest) and built():
        print("build_native: the compiled engine is up to date")
        return 0
    started = time.perf_counter()
    clean()
    stamps = {
        m: {"sha256": _native.source_digest(m), "stamp": _native.source_stamp(m)} for m in _native.COMPILED
    }
    compile_modules()
    # Written last: an interrupted build leaves no manifest, and without one nothing compiled loads.
    _native.MANIFEST.write_text(
        json.dumps({"python": sys.implementation.cache_tag, "modules": stamps}, indent=1) + "\n",
        encoding="utf-8",
    )
    print(
        f"build_native: compiled {len(_native.COMPILED)} modules in {time.perf_counter() - started:.0f} s "
        f"({_native.MANIFEST.relative_to(ROOT)})"
    )
    return 0


def extensions() -> list[Path]:
    """The compiled files a build leaves in src/ (for any Python version)."""
    found = list(SRC.glob(f"{GROUP}__mypyc.*"))
    for module in _native.COMPILED:
        path = _native.source_path(module)
        found += [p for p in path.parent.glob(path.stem + ".*") if p.suffix in (".so", ".pyd")]
    return found


def built() -> bool:
    """Every compiled module has an extension for this Python."""
    return all(_native.source_path(m).with_suffix(EXTENSION_SUFFIXES[0]).exists() for m in _native.COMPILED)


def clean() -> int:
    _native.MANIFEST.unlink(missing_ok=True)
    files = extensions()
    for path in files:
        path.unlink()
    return len(files)


def compile_modules() -> None:
    """mypyc through setuptools' `build_ext --inplace`, with its temporary files out of the tree."""
    from mypyc.build import mypycify
    from setuptools import setup

    paths = [str(_native.source_path(m).relative_to(SRC)) for m in _native.COMPILED]
    build_dir = Path(tempfile.mkdtemp(prefix="gpucommons-mypyc-"))
    cwd = Path.cwd()
    os.chdir(SRC)
    try:
        ext_modules = mypycify(paths, opt_level="3", group_name=GROUP, target_dir=str(build_dir / "c"))
        setup(
            name="gpucommons-native",
            ext_modules=ext_modules,
            script_args=[
                "-q",
                "build_ext",
                "--inplace",
                "--build-temp",
                str(build_dir / "temp"),
                "--build-lib",
                str(build_dir / "lib"),
            ],
        )
    finally:
        os.chdir(cwd)
        shutil.rmtree(build_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
