"""The documented ranges are safe: any description whose numbers lie in them, at their edges included, is
costed (list, streaming and heft schedules) to finite, non-negative figures, never an OverflowError,
ZeroDivisionError, inf or NaN."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcaccel.architecture import Architecture
from dcaccel.architecture.ranges import (
    MAX_AREA_MM2,
    MAX_BANDWIDTH,
    MAX_CLOCK_MHZ,
    MAX_ELEMENT_BYTES,
    MAX_ENERGY_PJ,
    MAX_LATENCY_CYCLES,
    MAX_RATE,
    MAX_UNITS,
    MIN_BANDWIDTH,
    MIN_CLOCK_MHZ,
    MIN_RATE,
)
from dcaccel.cost.schedule import cost_schedule
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import schedule
from tests.scheduler.conftest import load_vector

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def edges(low, high):
    """The bounds themselves, values just inside them and anything between."""
    between = st.floats(low, high, allow_nan=False, allow_infinity=False)
    return st.one_of(st.sampled_from([low, high, low * 1.5 if low else 1e-300]), between)


@st.composite
def descriptions(draw) -> dict:
    rate, bandwidth, energy = edges(MIN_RATE, MAX_RATE), edges(MIN_BANDWIDTH, MAX_BANDWIDTH), edges(0.0, MAX_ENERGY_PJ)
    clock = draw(edges(MIN_CLOCK_MHZ, MAX_CLOCK_MHZ))
    return {
        "name": "edge",
        "element_bytes": draw(st.sampled_from([1, 3, MAX_ELEMENT_BYTES])),
        "clock_mhz": clock,
        "units": {
            "pe": {
                "count": draw(st.sampled_from([16, 1000, MAX_UNITS])),
                "elements_per_cycle": draw(rate),
                "macs_per_cycle": draw(st.none() | rate),
                "frequency_mhz": draw(st.none() | st.just(clock)),
                "area_mm2": draw(edges(0.0, MAX_AREA_MM2)),
                "energy_per_mac_pj": draw(energy),
            }
        },
        "memories": {
            "glb": {
                "level": "onchip",
                "capacity_bytes": draw(st.sampled_from([1, 4096, 2**50])),
                "bandwidth_bytes_per_cycle": draw(st.none() | bandwidth),
                "read_energy_pj": draw(energy),
                "write_energy_pj": draw(energy),
            },
            "dram": {
                "level": "offchip",
                "bandwidth_bytes_per_cycle": draw(st.none() | bandwidth),
                "read_energy_pj": draw(energy),
                "write_energy_pj": draw(energy),
            },
        },
        "links": [
            {
                "between": ["pe", "pe"],
                "bandwidth_bytes_per_cycle": draw(st.none() | bandwidth),
                "latency_cycles": draw(st.sampled_from([0, 1, MAX_LATENCY_CYCLES])),
                "energy_per_element_pj": draw(energy),
            }
        ],
    }


@pytest.mark.slow
@SETTINGS
@given(data=descriptions(), scheduler=st.sampled_from(["list", "streaming", "heft"]))
def test_every_description_in_range_costs_finite_figures(data, scheduler):
    try:
        arch = Architecture.from_dict(data)
    except DcaccelError:
        return  # the cross check of rates at the reference clock; the fields alone are in range
    _, dag = load_vector("fft_rand_8_buf")
    costs = cost_schedule(schedule(dag, 4, scheduler, arch=arch if scheduler == "heft" else None), arch)
    figures = [costs.makespan_seconds, costs.energy_total_pj, costs.area_mm2, costs.average_power_w]
    figures += list(costs.energy_by_level.values()) + list(costs.utilisation.values())
    assert all(math.isfinite(value) and value >= 0 for value in figures), figures
    assert 0 < costs.makespan_cycles < 2**63
