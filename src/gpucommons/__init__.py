"""GPU Commons: share one GPU cluster between many ML teams, fairly and with clear bills."""

from gpucommons import _native

__version__ = "0.1.0"

# Before any engine module is imported: a compiled build older than its sources is not loaded.
_native.activate()
