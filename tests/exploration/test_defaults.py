"""One default per concept whatever the front door: P is the designs' units when every design fixes its unit
counts, else 1…128 (``dcaccel.architecture.design_pes``, resolved by ``Study.pe_counts`` when a study runs),
for ``dcaccel.explore``, ``dcaccel explore`` and ``dcaccel run``; ``dcaccel.map`` and ``dcaccel map`` search
the same P by the same objective (makespan)."""

import pytest

import dcaccel
import dcaccel.mapping.search
from dcaccel.architecture import DEFAULT_PES, design_pes
from dcaccel.architecture import load as load_architecture
from dcaccel.cli import main
from dcaccel.exploration import run
from dcaccel.exploration.grid import architectures
from dcaccel.exploration.study import Study

#: --arch values, and the P each front door takes for them when none is given.
DESIGNS = [
    ([], DEFAULT_PES),
    (["abstract"], DEFAULT_PES),
    (["eyeriss"], (168,)),
    (["eyeriss", "cgra"], (64, 168)),
    (["abstract", "eyeriss"], DEFAULT_PES),
]


class Captured(Exception):
    """Raised by a stand-in with what it was given."""


@pytest.mark.parametrize(("arch", "pes"), DESIGNS)
def test_the_rule(arch, pes):
    assert design_pes(architectures(arch or ["abstract"])) == pes
    study = Study.of(models="conv-seed", **({"arch": arch} if arch else {}))
    assert study.pes is None
    assert study.pe_counts(architectures(study.arch)) == pes
    assert study.replace(pes=[4]).pe_counts(architectures(study.arch)) == (4,)


@pytest.fixture
def swept(monkeypatch, tmp_path):
    """The P of the grid a front door runs, by its name: the Python API, the explore command, a study file."""

    def check_units(grid, archs):
        raise Captured(grid.pes)

    monkeypatch.setattr(run, "check_units", check_units)

    def sweep(door: str, arch: list[str]):
        with pytest.raises(Captured) as caught:
            if door == "dcaccel.explore":
                dcaccel.explore("conv-seed", progress=False, **({"arch": arch} if arch else {}))
            elif door == "dcaccel explore":
                main(["explore", "conv-seed", *[part for name in arch for part in ("--arch", name)]])
            else:
                study = tmp_path / "study.yaml"
                study.write_text("models: [conv-seed]\n" + (f"arch: [{', '.join(arch)}]\n" if arch else ""))
                main(["run", str(study)])
        return caught.value.args[0]

    return sweep


@pytest.mark.parametrize(("arch", "pes"), DESIGNS)
@pytest.mark.parametrize("door", ["dcaccel.explore", "dcaccel explore", "dcaccel run"])
def test_every_front_door_of_a_sweep_takes_the_same_p(swept, door, arch, pes):
    assert swept(door, arch) == pes


@pytest.fixture
def searched(monkeypatch):
    """The P and objective the mapping search of a layer is given, by front door."""

    def search_layer(layer, architecture, capacity, options):
        raise Captured((options.pes, options.objective))

    monkeypatch.setattr(dcaccel.mapping.search, "search_layer", search_layer)

    def search(door: str, arch: str):
        with pytest.raises(Captured) as caught:
            if door == "dcaccel.map":
                dcaccel.map("conv-seed", arch, capacity=4096, progress=False)
            else:
                main(["map", "conv-seed", "--arch", arch, "--onchip", "4096"])
        return caught.value.args[0]

    return search


@pytest.mark.parametrize("arch", ["eyeriss", "tpu", "abstract"])
def test_map_and_its_command_search_the_same_p_by_the_same_objective(searched, arch):
    expected = (design_pes([load_architecture(arch)]), "makespan")
    assert searched("dcaccel.map", arch) == searched("dcaccel map", arch) == expected
