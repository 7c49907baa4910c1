"""A schedule is built once: its common core and the detail of the scheduler that made it."""

from __future__ import annotations

import dataclasses

import pytest

from dcaccel.scheduler import HeftDetail, ListDetail, ScheduleError, StreamingDetail, schedule
from dcaccel.scheduler.schedule import Schedule
from tests.scheduler.conftest import load_vector


@pytest.mark.parametrize(
    ("scheduler", "detail", "keys"),
    [
        ("streaming", StreamingDetail, {"partitioning", "refinement_iterations", "buffer_space_deadlock"}),
        ("list", ListDetail, {"insertion", "transfer_bandwidth"}),
        ("heft", HeftDetail, {"unit_counts"}),
    ],
)
def test_each_scheduler_its_detail(scheduler, detail, keys):
    result = schedule(load_vector("seedconv_mv")[1], 4, scheduler, arch="eyeriss" if scheduler == "heft" else None)
    assert type(result.detail) is detail
    assert keys <= set(result.summary())
    assert "architecture" not in result.summary()
    assert result.is_streaming == (scheduler == "streaming")
    assert bool(result.blocks) == (scheduler == "streaming")
    assert any(result.streaming) == (scheduler == "streaming")  # seedconv_mv streams on 4 PEs


def test_a_schedule_is_never_changed():
    result = schedule(load_vector("seedconv_mv")[1], 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.onchip = 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.costs = None


def test_streaming_flags_are_one_per_edge():
    result = schedule(load_vector("seedconv_mv")[1], 4)
    with pytest.raises(ScheduleError, match="3 streaming flags for the 1743 edges of seedconv_mv"):
        Schedule(result.graph, 4, "list", result.timing, result.placement_order, result.detail, streaming=b"\1\0\1")
