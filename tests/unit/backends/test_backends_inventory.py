"""GPU inventory: nvidia-smi output parsing, matching devices to pools, and the virtual fallback."""

from __future__ import annotations

import pytest

from gpucommons.backends.local.inventory import (
    GpuDevice,
    assign_devices,
    discover_inventory,
    parse_nvidia_smi,
    virtual_inventory,
)
from gpucommons.domain import Policy, Pool, PriorityClass, Quota, Resources, Team

# Recorded from `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader` on a mixed box.
MIXED_BOX = """\
0, NVIDIA H100 80GB HBM3, GPU-5a3b1c2d-0e1f-2a3b-4c5d-6e7f8a9b0c1d, 81559 MiB
1, NVIDIA H100 80GB HBM3, GPU-6b4c2d3e-1f2a-3b4c-5d6e-7f8a9b0c1d2e, 81559 MiB
2, NVIDIA A100-SXM4-40GB, GPU-7c5d3e4f-2a3b-4c5d-6e7f-8a9b0c1d2e3f, 40960 MiB
3, NVIDIA GeForce RTX 4090, GPU-8d6e4f5a-3b4c-5d6e-7f8a-9b0c1d2e3f4a, 24564 MiB
"""
# The same query with `nounits`, and a device whose memory the driver cannot read.
NOUNITS = "0, Tesla T4, GPU-aaaa, 15360\n1, Tesla T4, GPU-bbbb, [N/A]\n\n"


def policy(*pools: Pool) -> Policy:
    return Policy(
        cluster_name="test",
        pools=pools,
        priority_classes=(PriorityClass("default", 0),),
        default_priority_class="default",
        teams=(Team("nlp", tuple(Quota(p.name, Resources(gpus=1)) for p in pools)),),
    )


H100 = Pool("h100", "H100", nodes=1, gpus_per_node=2)
A100 = Pool("a100", "A100", nodes=1, gpus_per_node=4)


def test_parse_nvidia_smi_reads_index_name_uuid_and_memory() -> None:
    devices = parse_nvidia_smi(MIXED_BOX)
    assert [d.index for d in devices] == [0, 1, 2, 3]
    assert devices[2] == GpuDevice(
        2, "NVIDIA A100-SXM4-40GB", "GPU-7c5d3e4f-2a3b-4c5d-6e7f-8a9b0c1d2e3f", 40960
    )
    assert parse_nvidia_smi(NOUNITS) == (
        GpuDevice(0, "Tesla T4", "GPU-aaaa", 15360),
        GpuDevice(1, "Tesla T4", "GPU-bbbb", 0),
    )
    assert parse_nvidia_smi("") == ()


@pytest.mark.parametrize("bad", ["No devices were found", "0, H100, GPU-1", "x, H100, GPU-1, 1 MiB"])
def test_parse_nvidia_smi_names_the_line_it_cannot_read(bad: str) -> None:
    with pytest.raises(ValueError, match="nvidia-smi line 1"):
        parse_nvidia_smi(bad)


def test_pools_take_the_devices_of_their_gpu_type_and_the_rest_is_reported() -> None:
    inventory = assign_devices(policy(H100, A100), parse_nvidia_smi(MIXED_BOX), "nvidia-smi")
    assert [d.index for d in inventory.pool("h100").devices] == [0, 1]
    assert [d.index for d in inventory.pool("a100").devices] == [2]
    assert inventory.device_indices("h100", (1, 0)) == (1, 0)
    assert inventory.device_indices("a100", (0,)) == (2,)
    assert any("pool 'a100' declares 4 A100" in w and "has 1" in w for w in inventory.warnings)
    assert any("GPU 3 (NVIDIA GeForce RTX 4090) matches no pool" in w for w in inventory.warnings)
    with pytest.raises(ValueError, match=r"GPU number\(s\) 1, 3 are not here"):
        inventory.device_indices("a100", (1, 3))
    with pytest.raises(KeyError):
        inventory.device_indices("t4", (0,))


def test_virtual_inventory_numbers_gpus_pool_wide_as_the_engine_does() -> None:
    pool = Pool("h100", "H100", nodes=3, gpus_per_node=4)
    inventory = virtual_inventory(policy(pool))
    assert inventory.source == "virtual" and inventory.gpu_count == 12
    devices = inventory.pool("h100").devices
    assert [d.index for d in devices] == list(range(12))
    assert devices[9].uuid == "virtual-h100-2-1"  # node 2, local GPU 1 = 2 * 4 + 1
    assert inventory.device_indices("h100", (9, 10)) == (9, 10)


def no_gpu() -> tuple[GpuDevice, ...]:
    raise FileNotFoundError("nvidia-smi is not on PATH")


def no_pynvml() -> tuple[GpuDevice, ...]:
    raise ImportError("pynvml")


def test_discovery_prefers_nvml_then_nvidia_smi_then_virtual() -> None:
    two_h100 = parse_nvidia_smi(MIXED_BOX)[:2]
    pol = policy(H100)
    assert discover_inventory(pol, nvml=lambda: two_h100, nvidia_smi=no_gpu).source == "nvml"
    assert discover_inventory(pol, nvml=no_pynvml, nvidia_smi=lambda: two_h100).source == "nvidia-smi"
    fallback = discover_inventory(pol, nvml=no_pynvml, nvidia_smi=no_gpu)
    assert fallback.source == "virtual"
    assert fallback.warnings == (
        "nvml: pynvml (nvidia-ml-py) is not installed",
        "nvidia-smi: nvidia-smi is not on PATH",
        "no GPU found: tasks run on virtual GPUs",
    )
    assert discover_inventory(pol, virtual=True, nvml=lambda: two_h100).source == "virtual"


def test_a_failing_driver_is_reported_not_raised() -> None:
    def broken() -> tuple[GpuDevice, ...]:
        raise RuntimeError("nvidia-smi exited with 9: Driver/library version mismatch")

    inventory = discover_inventory(policy(H100), nvml=no_pynvml, nvidia_smi=broken)
    assert inventory.source == "virtual"
    assert (
        "nvidia-smi: RuntimeError: nvidia-smi exited with 9: Driver/library version mismatch"
        in inventory.warnings
    )


def test_gpus_that_match_no_pool_fall_back_to_virtual_and_say_so() -> None:
    only_4090 = parse_nvidia_smi(MIXED_BOX)[3:]
    inventory = discover_inventory(policy(H100), nvml=lambda: only_4090, nvidia_smi=no_gpu)
    assert inventory.source == "virtual"
    assert inventory.warnings[-1] == "no GPU of this machine matches a pool of the policy: using virtual GPUs"


def test_discovery_on_this_machine_always_gives_the_scheduler_gpus() -> None:
    inventory = discover_inventory(policy(H100))
    assert inventory.source in ("nvml", "nvidia-smi", "virtual")
    assert inventory.gpu_count >= 1
