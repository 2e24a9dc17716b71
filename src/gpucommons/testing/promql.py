"""Test support for the Prometheus side: metric names in PromQL, names a scrape exports, promtool.

metric_names('sum by (team) (rate(commons_x_total{team="a"}[5m]))')   # {"commons_x_total"}
exported_names(scrape_text)       # every name a scrape defines, with _total/_bucket/... suffixes
promtool()                        # path of Debian's promtool, or None
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from gpucommons.testing.web import free_port, stop_process, wait_for

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
_IDENT = re.compile(r"(?<![\w:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right",
     "inf", "nan", "atan2", "topk", "bottomk", "quantile", "count_values"}
)  # fmt: skip
#: Series a metric family of each type exposes in the text format (prometheus_client adds `_created`).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created", ""),
    "gauge": ("",),
    "untyped": ("",),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, keywords, labels or numbers)."""
    text = _STRINGS.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def exported_names(scrape: str) -> set[str]:
    """Every series name a scrape in the text format defines (from its `# TYPE` lines, so a labelled
    metric that has no sample yet counts too)."""
    names: set[str] = set()
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            base = family[: -len("_total")] if kind == "counter" and family.endswith("_total") else family
            names.update(base + suffix for suffix in _SUFFIXES.get(kind, ("",)))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def promtool() -> Path | None:
    found = shutil.which("promtool")
    return Path(found) if found else None


def prometheus() -> Path | None:
    found = shutil.which("prometheus")
    return Path(found) if found else None


MISSING = (
    "Debian's prometheus package is not installed (no promtool/prometheus on PATH): "
    "`apt-get install -y prometheus` (scripts/setup.sh --dev does it as root)"
)


@contextlib.contextmanager
def running_prometheus(config: dict[str, Any], work: Path) -> Iterator[str]:
    """Debian's `prometheus` with `config` on a free loopback port, data under `work`; yields its URL."""
    binary = prometheus()
    if binary is None:
        raise FileNotFoundError(MISSING)
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    with (work / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited: {(work / 'prometheus.log').read_text()[-2000:]}")
            try:
                return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_for("Prometheus to be ready", ready, timeout=30)
            yield url
        finally:
            stop_process(process)
