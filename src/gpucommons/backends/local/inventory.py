"""This machine's GPUs, and how the engine's pool-wide GPU numbers map onto them.

Three sources, in order: NVML (when `pynvml`/nvidia-ml-py is importable and a driver answers),
`nvidia-smi`, or — on a machine without GPUs — a *virtual* inventory built from the policy's pools,
so tasks still run as real processes and `CUDA_VISIBLE_DEVICES` still names what they were given.

The engine numbers a pool's GPUs `node * gpus_per_node + local index`. With real GPUs, each pool
takes the devices whose name contains its `gpu_type` (in device order); `device_indices` turns the
engine's numbers into the indices CUDA knows. The inventory says which source it came from and
what did not fit, for `commons doctor`.
"""

from __future__ import annotations

import csv
import importlib
import io
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gpucommons.domain.model import Policy, Pool

Source = Literal["nvml", "nvidia-smi", "virtual"]

NVIDIA_SMI_QUERY = ("--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader")


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU as the driver (or the virtual inventory) reports it; `index` is what CUDA calls it."""

    index: int
    name: str
    uuid: str
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class PoolGpus:
    """A pool's GPUs in the engine's order: `devices[i]` is the engine's GPU number i."""

    pool: str
    gpu_type: str
    declared: int
    devices: tuple[GpuDevice, ...]


@dataclass(frozen=True, slots=True)
class Inventory:
    source: Source
    pools: tuple[PoolGpus, ...]
    #: Every device found on the machine (empty for a virtual inventory).
    devices: tuple[GpuDevice, ...] = ()
    #: What a person should know: a probe that failed, GPUs no pool uses, pools larger than the machine.
    warnings: tuple[str, ...] = ()

    def pool(self, name: str) -> PoolGpus:
        for pool in self.pools:
            if pool.pool == name:
                return pool
        raise KeyError(f"the inventory has no pool {name!r}")

    def device_indices(self, pool: str, engine_indices: tuple[int, ...]) -> tuple[int, ...]:
        """The CUDA indices of the GPUs the engine numbered `engine_indices` in `pool`.

        Raises ValueError when the policy declares more GPUs than this machine has and the engine
        placed a task on one that is not here.
        """
        devices = self.pool(pool).devices
        missing = [i for i in engine_indices if not 0 <= i < len(devices)]
        if missing:
            raise ValueError(
                f"pool {pool!r} has {len(devices)} GPU(s) on this machine; "
                f"GPU number(s) {', '.join(map(str, missing))} are not here"
            )
        return tuple(devices[i].index for i in engine_indices)

    @property
    def gpu_count(self) -> int:
        return sum(len(p.devices) for p in self.pools)


# -- parsing and probing ------------------------------------------------------------------------


def _mib(text: str) -> int:
    """`81559 MiB` or `81559` → 81559; anything unreadable (`[N/A]`) → 0."""
    number = text.strip().split(" ")[0]
    return int(number) if number.isdigit() else 0


def parse_nvidia_smi(output: str) -> tuple[GpuDevice, ...]:
    """Parse `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader[,nounits]`.

    Raises ValueError naming the line that does not have the four expected fields.
    """
    devices: list[GpuDevice] = []
    for number, row in enumerate(csv.reader(io.StringIO(output), skipinitialspace=True), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 4 or not row[0].strip().isdigit():
            raise ValueError(f"nvidia-smi line {number} is not 'index, name, uuid, memory': {row!r}")
        index, name, uuid, memory = (field.strip() for field in row)
        devices.append(GpuDevice(int(index), name, uuid, _mib(memory)))
    return tuple(devices)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def query_nvml() -> tuple[GpuDevice, ...]:
    """The GPUs NVML reports. Raises ImportError without pynvml, other errors without a driver."""
    nvml: Any = importlib.import_module("pynvml")
    nvml.nvmlInit()
    try:
        devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            devices.append(
                GpuDevice(
                    index,
                    _text(nvml.nvmlDeviceGetName(handle)),
                    _text(nvml.nvmlDeviceGetUUID(handle)),
                    total // (1024 * 1024),
                )
            )
        return tuple(devices)
    finally:
        nvml.nvmlShutdown()


def query_nvidia_smi() -> tuple[GpuDevice, ...]:
    """The GPUs nvidia-smi lists. Raises FileNotFoundError without it, RuntimeError when it fails."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        raise FileNotFoundError("nvidia-smi is not on PATH")
    done = subprocess.run(
        [binary, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=20, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"nvidia-smi exited with {done.returncode}: {done.stderr.strip()[:200]}")
    return parse_nvidia_smi(done.stdout)


# -- building the inventory ----------------------------------------------------------------------


def _declared(pool: Pool) -> int:
    return pool.nodes * pool.gpus_per_node


def _virtual_devices(pool: Pool) -> tuple[GpuDevice, ...]:
    name = f"virtual {pool.gpu_type}"
    return tuple(
        GpuDevice(node * pool.gpus_per_node + local, name, f"virtual-{pool.name}-{node}-{local}")
        for node in range(pool.nodes)
        for local in range(pool.gpus_per_node)
    )


def virtual_inventory(policy: Policy, warnings: tuple[str, ...] = ()) -> Inventory:
    """One virtual GPU per GPU the policy declares; CUDA indices = the engine's pool-wide numbers."""
    pools = tuple(
        PoolGpus(pool.name, pool.gpu_type, _declared(pool), _virtual_devices(pool)) for pool in policy.pools
    )
    return Inventory("virtual", pools, (), warnings)


def _matches(pool: Pool, device: GpuDevice) -> bool:
    return pool.gpu_type.replace(" ", "").lower() in device.name.replace(" ", "").lower()


def assign_devices(policy: Policy, devices: tuple[GpuDevice, ...], source: Source) -> Inventory:
    """Give each pool the unclaimed devices whose name contains its gpu_type (pure)."""
    claimed: set[int] = set()
    pools: list[PoolGpus] = []
    warnings: list[str] = []
    for pool in policy.pools:
        mine = [d for d in devices if d.index not in claimed and _matches(pool, d)][: _declared(pool)]
        claimed.update(d.index for d in mine)
        pools.append(PoolGpus(pool.name, pool.gpu_type, _declared(pool), tuple(mine)))
        if len(mine) < _declared(pool):
            warnings.append(
                f"pool {pool.name!r} declares {_declared(pool)} {pool.gpu_type} GPU(s) "
                f"({pool.nodes} node(s) × {pool.gpus_per_node}); this machine has {len(mine)}: "
                "tasks placed on the others cannot start here"
            )
    for device in devices:
        if device.index not in claimed:
            warnings.append(f"GPU {device.index} ({device.name}) matches no pool's gpu_type and is not used")
    return Inventory(source, tuple(pools), devices, tuple(warnings))


Probe = Callable[[], tuple[GpuDevice, ...]]


def discover_inventory(
    policy: Policy,
    *,
    virtual: bool = False,
    nvml: Probe = query_nvml,
    nvidia_smi: Probe = query_nvidia_smi,
) -> Inventory:
    """NVML, else nvidia-smi, else the policy's pools as virtual GPUs (`virtual=True` forces that).

    Real GPUs that match none of the policy's pools are not used; the inventory falls back to virtual
    GPUs and says so, rather than leaving the scheduler nothing to place tasks on.
    """
    if virtual:
        return virtual_inventory(policy, ("virtual GPUs were asked for",))
    notes: list[str] = []
    probes: tuple[tuple[Source, Probe], ...] = (("nvml", nvml), ("nvidia-smi", nvidia_smi))
    for source, probe in probes:
        try:
            devices = probe()
        except ImportError:
            notes.append(f"{source}: pynvml (nvidia-ml-py) is not installed")
            continue
        except FileNotFoundError as exc:
            notes.append(f"{source}: {exc}")
            continue
        except Exception as exc:  # a driver error must not stop the server; it is reported instead
            notes.append(f"{source}: {type(exc).__name__}: {exc}")
            continue
        if not devices:
            notes.append(f"{source}: no GPU found")
            continue
        inventory = assign_devices(policy, devices, source)
        if inventory.gpu_count == 0:
            notes.extend(inventory.warnings)
            notes.append("no GPU of this machine matches a pool of the policy: using virtual GPUs")
            return virtual_inventory(policy, tuple(notes))
        return inventory
    return virtual_inventory(policy, (*notes, "no GPU found: tasks run on virtual GPUs"))
