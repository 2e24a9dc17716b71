"""The local backend: tasks as real process groups on this machine, its GPUs, its team accounts."""

from gpucommons.backends.local.executor import LOST, LaunchError, LocalExecutor
from gpucommons.backends.local.stopping import StopAction, StopPlan, StopStep, next_stop_step, parse_signal

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
