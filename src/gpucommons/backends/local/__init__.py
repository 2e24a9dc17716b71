"""The local backend: tasks as real process groups on this machine, its GPUs, its team accounts.

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
    from gpucommons.backends.local.stopping import StopAction as StopAction
    from gpucommons.backends.local.stopping import StopPlan as StopPlan
    from gpucommons.backends.local.stopping import StopStep as StopStep
    from gpucommons.backends.local.stopping import next_stop_step as next_stop_step
    from gpucommons.backends.local.stopping import parse_signal as parse_signal

_HOME = {
    "LOST": "executor",
    "LaunchError": "executor",
    "LocalExecutor": "executor",
    "StopAction": "stopping",
    "StopPlan": "stopping",
    "StopStep": "stopping",
    "next_stop_step": "stopping",
    "parse_signal": "stopping",
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
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
