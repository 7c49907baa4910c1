"""The power/area proxy."""

import pytest

from dcaccel.cost.proxy import CostModel


def test_area_grows_with_pes_and_memory():
    model = CostModel(pe_area=2.0, memory_area_per_element=0.5)
    assert model.area(pes=4, onchip_memory=10) == pytest.approx(13.0)


def test_power_is_energy_over_makespan():
    model = CostModel(offchip_energy=10, onchip_energy=2, stream_energy=1, pe_static_energy=0.5)
    energy = 10 * 100 + 2 * 50 + 1 * 20 + 0.5 * 4 * 200
    assert model.energy(4, 200, 100, 50, 20) == pytest.approx(energy)
    assert model.power(4, 200, 100, 50, 20) == pytest.approx(energy / 200)


def test_power_of_an_empty_schedule_is_zero():
    assert CostModel().power(8, 0, 0, 0, 0) == 0.0
