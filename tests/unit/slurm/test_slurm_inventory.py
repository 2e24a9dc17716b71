"""Slurm nodes sorted into the policy's pools (partition, features, default rule)."""

from __future__ import annotations

from pathlib import Path

from gpucommons.backends.slurm.inventory import build_inventory, node_match
from gpucommons.backends.slurm.nodes import SlurmNode, parse_nodes, parse_state
from gpucommons.domain.model import Pool, SlurmNodeMatch

DATA = Path(__file__).parents[2] / "data" / "slurm"


def pool(name: str, match: SlurmNodeMatch | None = None, gpus_per_node: int = 8) -> Pool:
    return Pool(name=name, gpu_type=name.upper(), nodes=2, gpus_per_node=gpus_per_node, slurm=match)


def node(
    name: str,
    partitions: tuple[str, ...] = ("gpu",),
    features: tuple[str, ...] = (),
    state: str = "IDLE",
    gpus: int = 8,
) -> SlurmNode:
    return SlurmNode(name, parse_state(state), gpus, 0, (), 8, 4000, partitions, features)


def test_pools_take_their_nodes_by_features_and_a_down_node_leaves_the_usable_set() -> None:
    recorded = parse_nodes((DATA / "nodes_down.txt").read_text())
    h100 = pool("h100", SlurmNodeMatch(partition="gpu", features=("h100",)))
    a100 = pool("a100", SlurmNodeMatch(features=("a100",)))
    inventory = build_inventory(recorded, [h100, a100])
    assert [n.name for n in inventory.usable["h100"]] == ["n1", "n2"]
    assert inventory.usable["a100"] == ()
    assert [(u.node.name, u.why, u.lost) for u in inventory.unusable["a100"]] == [("n3", "down", True)]
    assert inventory.unclaimed == ("n4",)
    assert inventory.lost_nodes() == ("n3",)
    assert inventory.gpus("h100") == 16
    assert inventory.pool_of("n3") == "a100" and inventory.pool_of("n4") is None


def test_a_draining_node_is_unusable_but_not_lost() -> None:
    recorded = parse_nodes((DATA / "nodes_mixed_drain.txt").read_text())
    inventory = build_inventory(recorded, [pool("all")])
    assert [n.name for n in inventory.usable["all"]] == ["n1", "n2", "n3"]
    assert [(u.node.name, u.why, u.lost) for u in inventory.unusable["all"]] == [("n4", "drained", False)]
    assert inventory.lost_nodes() == ()


def test_a_single_pool_without_a_slurm_key_takes_every_node() -> None:
    only = pool("h100")
    assert node_match(only, [only]) == SlurmNodeMatch()
    inventory = build_inventory([node("a", ("debug",)), node("b", ("gpu",))], [only])
    assert [n.name for n in inventory.usable["h100"]] == ["a", "b"]


def test_without_a_slurm_key_among_several_pools_a_pool_takes_the_partition_of_its_name() -> None:
    h100, a100 = pool("h100"), pool("a100")
    inventory = build_inventory(
        [node("a", ("h100",)), node("b", ("a100",)), node("c", ("cpu",))], [h100, a100]
    )
    assert [n.name for n in inventory.usable["h100"]] == ["a"]
    assert [n.name for n in inventory.usable["a100"]] == ["b"]
    assert inventory.unclaimed == ("c",)


def test_a_node_claimed_by_two_pools_belongs_to_neither_and_is_reported() -> None:
    ib = pool("ib", SlurmNodeMatch(features=("ib",)))
    fast = pool("fast", SlurmNodeMatch(features=("h100",)))
    inventory = build_inventory(
        [node("a", features=("ib", "h100")), node("b", features=("h100",))], [ib, fast]
    )
    assert inventory.contested == {"a": ("ib", "fast")}
    assert [n.name for n in inventory.usable["fast"]] == ["b"]
    assert inventory.usable["ib"] == ()
    assert any("node a is claimed by pools ib, fast" in note for note in inventory.notes)
    assert any("pool ib has no Slurm node (features ib)" in note for note in inventory.notes)


def test_the_partition_option_ignores_nodes_elsewhere() -> None:
    inventory = build_inventory([node("a", ("gpu",)), node("b", ("debug",))], [pool("only")], partition="gpu")
    assert [n.name for n in inventory.usable["only"]] == ["a"]
    assert inventory.unclaimed == ()


def test_a_node_whose_gpu_count_differs_from_its_pool_is_noted_and_counted_as_it_is() -> None:
    inventory = build_inventory([node("a", gpus=4)], [pool("h100", gpus_per_node=8)])
    assert inventory.gpus("h100") == 4
    assert inventory.notes == (
        "node a has 4 GPUs; pool h100 declares 8 per node (the node's own count is used)",
    )
