"""The compiled engine (gpucommons._native) decides what its Python sources decide.

Each engine replays the first days of Philly's October trace in this process and again in a child
process with `GPUCOMMONS_PURE=1`; the reports (docs/design.md, contract 3) must be the same bytes.
Where the checkout has no compiled build both sides run the sources and the test says so by skipping.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpucommons import _native

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"

#: Replays a prefix of the trace under each engine and prints {engine: sha256 of the report}.
REPLAY = """
import hashlib, json, sys
from gpucommons.policy import load_policy
from gpucommons.sim import SimConfig, read_trace, simulate
from gpucommons.sim.report import build_report, dumps
from gpucommons import _native
root, count = sys.argv[1], int(sys.argv[2])
policy = load_policy(root + "/examples/philly-oct-704.yaml")
with open(root + "/examples/traces/philly_vc_jobs_2017-10.csv", encoding="utf-8", newline="") as handle:
    jobs = read_trace(handle, source="philly")[:count]
out = {"compiled": _native.compiled()}
for engine in ("static", "kueue", "kueue+spread", "commons"):
    report = build_report(simulate(policy, jobs, SimConfig(engine=engine)), None)
    out[engine] = hashlib.sha256(dumps(report).encode()).hexdigest()
print(json.dumps(out))
"""


def _replay(pure: bool, count: int) -> dict[str, object]:
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    env.pop(_native.PURE_ENV, None)
    if pure:
        env[_native.PURE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", REPLAY, str(ROOT), str(count)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_compiled_engine_writes_the_reports_its_sources_write() -> None:
    compiled, pure = _replay(False, 4000), _replay(True, 4000)
    assert pure.pop("compiled") is False
    if compiled.pop("compiled") is not True:
        pytest.skip("no compiled build in this checkout (scripts/build_native.py): nothing to compare with")
    assert compiled == pure


def test_a_stale_source_is_found_by_its_hash_not_its_time() -> None:
    module = _native.COMPILED[0]
    digest, stamp = _native.source_digest(module), _native.source_stamp(module)
    everything = {m: {"sha256": _native.source_digest(m), "stamp": [0, 0]} for m in _native.COMPILED}
    assert _native.stale_sources(everything) == []  # touched by a checkout, same contents
    edited = {**everything, module: {"sha256": hashlib.sha256(b"other").hexdigest(), "stamp": [0, 0]}}
    assert _native.stale_sources(edited) == [module]
    same_stamp = {**edited, module: {"sha256": "", "stamp": stamp}}
    assert _native.stale_sources(same_stamp) == []  # as built: the hash is not read
    assert digest
    missing = {m: e for m, e in everything.items() if m != module}
    assert _native.stale_sources(missing) == [module]


def test_the_source_finder_serves_only_the_compiled_modules() -> None:
    finder = _native.SourceFinder()
    spec = finder.find_spec("gpucommons.engine.cycle", None)
    assert spec is not None and spec.origin == str(SRC / "gpucommons" / "engine" / "cycle.py")
    assert finder.find_spec("gpucommons.sim.report", None) is None
    assert finder.find_spec("json", None) is None


def test_an_edited_source_is_run_instead_of_its_old_build(tmp_path: Path) -> None:
    """A copy of the built tree with one engine source edited: `import gpucommons` warns and runs
    every compiled module from its source (never the old build of the edited one)."""
    if not _native.compiled():
        pytest.skip("the compiled engine is not loaded (no build, or GPUCOMMONS_PURE=1): nothing goes stale")
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    edited = tmp_path / "src" / "gpucommons" / "engine" / "quota.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "\nEDITED = True\n", encoding="utf-8")
    probe = (
        "import warnings; warnings.simplefilter('always')\n"
        "import gpucommons._native as n, gpucommons.engine.quota as q, gpucommons.engine.cycle as c\n"
        "print(n.compiled(), q.EDITED, c.__file__.endswith('.py'))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    env.pop(_native.PURE_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "True", "True"]
    assert "the compiled engine is older than its source (engine/quota.py changed" in done.stderr
    assert "python scripts/build_native.py" in done.stderr
