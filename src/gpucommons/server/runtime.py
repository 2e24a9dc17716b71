"""Process-wide settings of a serving process (`commons up`, and each `--workers` process): the log
format and the garbage collector.

Measured with bench/api_load.py (docs/benchmarks.md, "Control plane under load"): with CPython's
default thresholds (700, 10, 10) the server spent a third of its time under mixed load in the cyclic
garbage collector — gen-2 passes of ~0.3 s each over every object the process holds (imported
modules, the scheduler's state of thousands of pending tasks), each one stopping every request.
Two changes remove almost all of it:
- `gc.freeze()` once start-up is done moves everything alive then (modules, classes, the policy, the
  app) to a generation that is never scanned again; it is never garbage anyway;
- a larger first threshold makes collections rarer in proportion: objects are still freed by
  reference counting at once; only reference cycles wait for the next collection.
"""

from __future__ import annotations

import gc
import logging

#: Allocations (minus deallocations) between two young-generation collections; CPython's default is 700.
DEFAULT_GEN0_THRESHOLD = 50_000


def log_to_stderr(level: str) -> None:
    """The server's log lines on stderr, at `level` (debug, info, warning or error)."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def tune_gc(gen0_threshold: int = DEFAULT_GEN0_THRESHOLD) -> None:
    """Freeze what start-up built and space collections out; call once, just before serving."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
