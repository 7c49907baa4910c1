"""What :func:`dcaccel.cost.schedule.cost_schedule` adds to the re-timing (``tests/scheduler/test_arch_*``
check the costs themselves): the host / accelerator / link split of the energy follows the description,
never the components' names, and a cost cache changes no figure."""

from __future__ import annotations

import pytest

from dcaccel.architecture import Architecture
from dcaccel.cost.schedule import CostCache, cost_schedule
from dcaccel.scheduler import CanonicalGraph, schedule
from tests.scheduler.conftest import load_vector
from tests.scheduler.test_arch_costs import copy_dag


def _design(pe_ops: list[str]) -> Architecture:
    """A PE kind and a host kind; an on-chip memory whose name starts with the host's (1 pJ per element), DRAM
    (10 / 20 pJ per element read / written); a host↔DRAM link of 0.5 pJ per element; 3 pJ per MAC on the
    PEs, 7 on the host."""
    return Architecture.from_dict(
        {
            "name": "split",
            "units": {
                "pe": {"ops": pe_ops, "energy_per_mac_pj": 3},
                "host": {"count": 1, "role": "host", "ops": ["*"], "energy_per_mac_pj": 7},
            },
            "memories": {
                "host-glb": {"level": "onchip", "read_energy_pj": 1, "write_energy_pj": 1},
                "dram": {"level": "offchip", "read_energy_pj": 10, "write_energy_pj": 20},
            },
            "links": [{"between": ["host", "dram"], "energy_per_element_pj": 0.5}],
        }
    )


def test_a_memory_named_after_the_host_is_the_accelerators():
    """The copy task on the PEs, its input on chip (8 elements loaded, 8 read): the 16 pJ of ``host-glb``
    are the accelerator's, as every other figure (name matching counted them as the host's)."""
    costs = cost_schedule(schedule(copy_dag(), 1, "list", onchip=8), _design(["*"]))
    assert costs.energy_pj["host-glb"] == 16
    assert costs.energy_split() == {"host": 0.0, "accelerator": costs.energy_total_pj, "link": 0.0}


def test_the_host_has_its_compute_and_its_links():
    """The copy task on the host (the one kind that runs it), nothing on chip: its 8 operations at 7 pJ and the
    16 elements it moves over its DRAM link at 0.5 pJ are the host's; the memories' energy the accelerator's;
    a partition's link units (``links``) are the transfers'."""
    arch = _design(["Conv"])
    costs = cost_schedule(schedule(copy_dag(), 1, "heft", arch=arch), arch, 0)
    assert costs.unit_of[2] == "host"
    host = 8 * 7 + 16 * 0.5
    assert costs.energy_split() == {"host": host, "accelerator": costs.energy_total_pj - host, "link": 0.0}
    assert costs.energy_split({"host": ("host", "pe")})["link"] == 8 * 7


@pytest.mark.parametrize("arch", ["abstract", "eyeriss", "tpu"])
def test_a_cache_changes_no_figure(arch):
    """Every P and scheduler of one graph costed with one cache, twice over (the second round from the
    cache), equals each costed alone."""
    graph = CanonicalGraph.from_dag(load_vector("seedconv_op_noxcolbuf")[1])
    cache = CostCache(graph)
    schedules = [schedule(graph, pes, scheduler) for pes in (1, 4, 16) for scheduler in ("streaming", "list")]
    alone = [cost_schedule(result, arch) for result in schedules]
    for _ in range(2):
        assert [cost_schedule(result, arch, cache=cache) for result in schedules] == alone
