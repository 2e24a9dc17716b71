"""Resource amounts in integer units, never floats.

GPUs are whole devices, CPUs are milli-cores (Kubernetes' `m`), memory is MiB. Quota arithmetic
is exact integer arithmetic, so that "fits" never depends on rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Stands for "no limit" in a limit field (borrow limit absent, lend limit absent).
UNLIMITED = 1 << 60

RESOURCE_NAMES = ("gpus", "cpu_milli", "memory_mib")


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of each resource the engine accounts for."""

    gpus: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.gpus + other.gpus, self.cpu_milli + other.cpu_milli, self.memory_mib + other.memory_mib
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.gpus - other.gpus, self.cpu_milli - other.cpu_milli, self.memory_mib - other.memory_mib
        )

    def fits_in(self, other: Resources) -> bool:
        """True when every component is at most the other's."""
        return (
            self.gpus <= other.gpus
            and self.cpu_milli <= other.cpu_milli
            and self.memory_mib <= other.memory_mib
        )

    def min(self, other: Resources) -> Resources:
        return Resources(
            min(self.gpus, other.gpus),
            min(self.cpu_milli, other.cpu_milli),
            min(self.memory_mib, other.memory_mib),
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.gpus, other.gpus),
            max(self.cpu_milli, other.cpu_milli),
            max(self.memory_mib, other.memory_mib),
        )

    def clamp_nonnegative(self) -> Resources:
        return self.max(ZERO)

    def scale(self, factor: int) -> Resources:
        return Resources(self.gpus * factor, self.cpu_milli * factor, self.memory_mib * factor)

    def is_zero(self) -> bool:
        return self.gpus == 0 and self.cpu_milli == 0 and self.memory_mib == 0

    def any_positive(self) -> bool:
        return self.gpus > 0 or self.cpu_milli > 0 or self.memory_mib > 0

    def as_dict(self) -> dict[str, int]:
        return {"gpus": self.gpus, "cpu_milli": self.cpu_milli, "memory_mib": self.memory_mib}

    def describe(self) -> str:
        """Human text: '8 GPUs, 16 CPUs' (zero components left out; '0 GPUs' when all are zero)."""
        parts: list[str] = []
        if self.gpus:
            parts.append(f"{self.gpus} GPU" + ("" if self.gpus == 1 else "s"))
        if self.cpu_milli:
            cpus = self.cpu_milli / 1000
            parts.append(f"{cpus:g} CPU" + ("" if cpus == 1 else "s"))
        if self.memory_mib:
            parts.append(f"{self.memory_mib / 1024:g} GiB memory")
        return ", ".join(parts) or "0 GPUs"


ZERO = Resources()
ALL_UNLIMITED = Resources(UNLIMITED, UNLIMITED, UNLIMITED)
