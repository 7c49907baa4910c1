"""Adversarial study files (issue 22's bar applied to dcaccel.Study): each bad value is refused in one line
naming the field, never a Python exception; a value YAML would silently reinterpret is refused."""

import pytest

from dcaccel.architecture.reader import ArchitectureError, read_yaml
from dcaccel.errors import DcaccelError
from dcaccel.exploration.executors import MAX_WORKERS_PER_CORE, check_executor
from dcaccel.exploration.study import Study


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n", "models.0: Input should be a valid string"),
        ("models: {a: 1}\n", "models.0: Input should be a valid string"),
        ("models: [lenet]\nonchip_memory: .inf\n", "onchip_memory must be integers of at least 0, got inf"),
        ("models: [lenet]\narch: 5\n", "arch.0"),
        ("models: [lenet]\narch:\n", "arch.0"),
        ("models: [lenet]\nsymbols: {batch: true}\n", "symbols: batch=True: a size is an integer, not a boolean"),
        ("models: [lenet]\ncost_model: {pe_area: .nan}\n", "cost_model.pe_area must be a finite number"),
        ("models: [lenet]\ncost_model: {stream_energy: -1}\n", "cost_model.stream_energy must be a finite number"),
        ("models: [lenet]\ncost_model: {pe_static_energy: .inf}\n", "cost_model.pe_static_energy must be a finite"),
        ("models: [lenet]\npes: [" + "9" * 5000 + "]\n", "line 2: not valid YAML (an integer of 5000 characters"),
        ("models: [lenet]\npes: [1000000000000]\n", "pes 1000000000000: at most 1048576"),  # as --pes
        ("models: [lenet]\nimplementations: {Conv: []}\n", "implementations: Conv has no implementation to try"),
        ("models: [lenet]\nonchip_memory: [" + "1" + "0" * 30 + "]\n", "at most 9223372036854775807"),  # the store's
    ],
)
def test_bad_study_is_one_line(text, message):
    with pytest.raises(DcaccelError) as caught:
        Study.from_yaml(text, "t.yaml")
    assert str(caught.value).startswith("study t.yaml: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("models: lenet\narch: eyeriss\n", "arch", ("eyeriss",)),
        ("models: lenet\narch: {name: x}\n", "arch", ({"name": "x"},)),
        ("models: lenet\npes: 16\n", "pes", (16,)),
        ("models: lenet\npes: [16, 16, 32]\nscheduler: [list, list]\n", "pes", (16, 32)),
        ("models: lenet\nscheduler: [list, list]\n", "scheduler", ("list",)),
        ("models: [lenet]\ncost_model: {pe_area: 2}\n", "cost_model", None),
    ],
)
def test_one_value_is_still_accepted(text, field, value):
    study = Study.from_yaml(text, "t.yaml")
    if value is not None:
        assert getattr(study, field) == value
    else:
        assert study.cost_model.pe_area == 2


def test_study_of_takes_any_sequence():
    assert Study.of(models="lenet", pes=range(1, 4)).pes == (1, 2, 3)


def test_long_integer_in_an_architecture_file_is_one_line():
    with pytest.raises(ArchitectureError, match=r"^architecture a.yaml: line 1: not valid YAML \(an integer of"):
        read_yaml("count: " + "1" * 4400 + "\n", "a.yaml")


def test_a_pool_far_larger_than_the_machine_is_refused():
    """workers: 10^9 spawned processes for two minutes (no progress) before it was bounded."""
    with pytest.raises(DcaccelError, match=rf"^workers 1000000000: at most \d+ here \({MAX_WORKERS_PER_CORE} per core"):
        check_executor("process", workers=10**9)
    check_executor("process", workers=2)
