"""The serving process's garbage-collector settings (server/runtime.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gpucommons.server.runtime import tune_gc
from gpucommons.server.settings import Settings


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_gc_freezes_start_up_objects_and_spaces_out_young_collections(restored_gc: None) -> None:
    _, gen1, gen2 = gc.get_threshold()
    tune_gc(12_345)
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (12_345, gen1, gen2)


def test_objects_made_after_tuning_are_still_collected_when_in_a_cycle(restored_gc: None) -> None:
    tune_gc(12_345)

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 2


def test_the_gc_threshold_setting_defaults_to_tuned_and_zero_means_untouched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().gc_threshold == 50_000
    monkeypatch.setenv("COMMONS_GC_THRESHOLD", "0")
    assert Settings().gc_threshold == 0
