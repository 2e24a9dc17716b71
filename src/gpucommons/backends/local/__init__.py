"""The local backend: tasks as real process groups on this machine, its GPUs, its team accounts.

(The stop escalation it follows is pure and shared by every backend: `gpucommons.domain.stopping`;
it is re-exported here for the tests and benchmarks written against the local executor.)

Names are loaded on first use: the runner (`python -m gpucommons.backends.local.runner`) starts
once per attempt and must not pay for importing the executor it does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucommons.backends.local.executor import LOST as LOST
    from gpucommons.backends.local.executor import LaunchError as LaunchError
    from gpucommons.backends.local.executor import LocalExecutor as LocalExecutor
    from gpucommons.domain.stopping import StopAction as StopAction
    from gpucommons.domain.stopping import StopPlan as StopPlan
    from gpucommons.domain.stopping import StopStep as StopStep
    from gpucommons.domain.stopping import next_stop_step as next_stop_step
    from gpucommons.domain.stopping import parse_signal as parse_signal

_HOME = {
    "LOST": "executor",
    "LaunchError": "executor",
    "LocalExecutor": "executor",
    "StopAction": "gpucommons.domain.stopping",
    "StopPlan": "gpucommons.domain.stopping",
    "StopStep": "gpucommons.domain.stopping",
    "next_stop_step": "gpucommons.domain.stopping",
    "parse_signal": "gpucommons.domain.stopping",
}

__all__ = [
    "LOST",
    "LaunchError",
    "LocalExecutor",
    "StopAction",
    "StopPlan",
    "StopStep",
    "next_stop_step",
    "parse_signal",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    path = module if "." in module else f"{__name__}.{module}"
    return getattr(importlib.import_module(path), name)
