"""Nodes out of `scontrol show nodes --oneliner` (recorded on the test cluster) and node states."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucommons.backends.slurm.keyvalue import parse_line
from gpucommons.backends.slurm.nodes import (
    NodeBase,
    NodeParseError,
    SlurmNode,
    parse_gres_used,
    parse_nodes,
    parse_state,
    with_gpus_in_use,
)
from gpucommons.backends.slurm.tres import TresError, gres_gpu_types, gres_gpus, tres_gpus

DATA = Path(__file__).parents[2] / "data" / "slurm"


def nodes(name: str) -> dict[str, SlurmNode]:
    return {n.name: n for n in parse_nodes((DATA / name).read_text())}


def test_recorded_nodes_give_gpus_held_partitions_and_features() -> None:
    found = nodes("nodes_mixed_drain.txt")
    n1, n2, n4 = found["n1"], found["n2"], found["n4"]
    assert (n1.gpus, n1.gpus_allocated, n1.gpus_free) == (8, 4, 4)
    assert n1.features == ("h100", "ib") and n1.partitions == ("gpu",)
    assert n2.gpus_allocated == 8 and n2.state.schedulable
    assert n4.features == () and n4.cpus == 8 and n4.memory_mb == 4000


def test_a_drained_node_takes_no_new_work_but_its_jobs_are_not_lost() -> None:
    n4 = nodes("nodes_mixed_drain.txt")["n4"]
    assert n4.state.text == "IDLE+DRAIN"
    assert not n4.state.schedulable and not n4.state.lost
    assert n4.state.why_not_schedulable == "drained"
    assert n4.reason.startswith("disk failing soon")


def test_a_node_that_stops_answering_loses_its_jobs_then_goes_down() -> None:
    silent = nodes("nodes_not_responding.txt")["n3"]
    assert silent.state.text == "MIXED+NOT_RESPONDING"
    assert silent.state.lost and silent.state.why_not_schedulable == "not responding"
    down = nodes("nodes_down.txt")["n3"]
    assert down.state.base is NodeBase.DOWN and down.state.lost
    assert down.reason.startswith("Not responding")


@pytest.mark.parametrize(
    ("text", "base", "schedulable", "lost", "why"),
    [
        ("IDLE", NodeBase.IDLE, True, False, None),
        ("MIXED", NodeBase.MIXED, True, False, None),
        ("ALLOCATED", NodeBase.ALLOCATED, True, False, None),
        ("MIXED+DRAIN", NodeBase.MIXED, False, False, "draining"),
        ("IDLE+DRAIN", NodeBase.IDLE, False, False, "drained"),
        ("DOWN", NodeBase.DOWN, False, True, "down"),
        ("DOWN*", NodeBase.DOWN, False, True, "down"),
        ("idle*", NodeBase.IDLE, False, True, "not responding"),
        ("drain", NodeBase.IDLE, False, False, "drained"),
        ("mix", NodeBase.MIXED, True, False, None),
        ("IDLE+COMPLETING", NodeBase.IDLE, True, False, None),
        ("IDLE+POWERED_DOWN", NodeBase.IDLE, False, False, "powered down"),
        ("IDLE+MAINTENANCE+RESERVED", NodeBase.IDLE, False, False, "maintenance"),
        ("FUTURE", NodeBase.FUTURE, False, False, "future"),
        ("BRANDNEW", NodeBase.UNKNOWN, False, False, "unknown"),
    ],
)
def test_node_states(text: str, base: NodeBase, schedulable: bool, lost: bool, why: str | None) -> None:
    state = parse_state(text)
    assert (state.base, state.schedulable, state.lost, state.why_not_schedulable) == (
        base,
        schedulable,
        lost,
        why,
    )


def test_values_with_spaces_and_equals_signs_stay_whole() -> None:
    fields = parse_line(
        "NodeName=n3 OS=Linux 6.1.0 #1 SMP Debian Reason=Not responding [slurm@1796140749] "
        "CfgTRES=cpu=8,mem=4000M,gres/gpu=8 CPUs/Task=1"
    )
    assert fields["OS"] == "Linux 6.1.0 #1 SMP Debian"
    assert fields["Reason"] == "Not responding [slurm@1796140749]"
    assert fields["CfgTRES"] == "cpu=8,mem=4000M,gres/gpu=8"
    assert fields["CPUs/Task"] == "1"


@pytest.mark.parametrize(
    ("gres", "gpus", "types"),
    [
        ("gpu:8", 8, ()),
        ("gpu:h100:8(S:0-1)", 8, ("h100",)),
        ("gpu:a100:4,gpu:v100:2", 6, ("a100", "v100")),
        ("gpu:8(S:0,1),shard:16", 8, ()),
        ("gpu:1g.10gb:7", 7, ("1g.10gb",)),
        ("gpu", 1, ()),
        ("(null)", 0, ()),
    ],
)
def test_gpus_of_a_gres_list(gres: str, gpus: int, types: tuple[str, ...]) -> None:
    assert (gres_gpus(gres), gres_gpu_types(gres)) == (gpus, types)


def test_a_tres_list_counts_gpus_once_even_when_typed_too() -> None:
    assert tres_gpus("cpu=2,mem=200M,gres/gpu=16") == 16
    assert tres_gpus("cpu=2,gres/gpu=8,gres/gpu:h100=8") == 8
    assert tres_gpus("gres/gpu:h100=4,gres/gpu:a100=2") == 6
    assert tres_gpus("") == 0


def test_a_broken_gpu_field_names_the_node() -> None:
    with pytest.raises(TresError):
        tres_gpus("gres/gpu=many")
    with pytest.raises(NodeParseError, match="node n9"):
        parse_nodes("NodeName=n9 Gres=gpu:8 AllocTRES=gres/gpu=lots State=IDLE")


def test_gpus_in_use_come_from_sinfo_where_the_tres_do_not_count_them() -> None:
    # sinfo on the test cluster without accounting (n1 holds 3 + 2 GPUs of two jobs), plus a typed
    # variant and a node listed under two partitions.
    used = parse_gres_used(
        "n1|gpu:5|\nn2|gpu:3|\nn3|gpu:0|\nn9|gpu:h100:2(IDX:0-1),gpu:a100:0(IDX:N/A)|\nn9|gpu:h100:2(IDX:0-1)|\n"
    )
    assert used == {"n1": 5, "n2": 3, "n3": 0, "n9": 2}
    nodes = parse_nodes(
        "NodeName=n1 Gres=gpu:8 State=MIXED AllocTRES=cpu=2,mem=200M\nNodeName=n4 Gres=gpu:8 State=IDLE\n"
    )
    assert [(n.name, n.gpus_allocated, n.gpus_free) for n in with_gpus_in_use(nodes, used)] == [
        ("n1", 5, 3),
        ("n4", 0, 8),
    ]
