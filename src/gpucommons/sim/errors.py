"""Why a simulation stops early. Bad *input* has its own errors (TraceError, UnknownNamesError)."""

from __future__ import annotations


class SimulationError(RuntimeError):
    """The run cannot go on: a zero-time decision loop, a livelock, or the engine broke its contract."""


class CapacityExceeded(SimulationError):
    """The engine admitted more than a pool holds (a bug in the engine, reported, never hidden)."""
