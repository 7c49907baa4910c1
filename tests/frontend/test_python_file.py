"""Models named ``path/to/file.py:attribute`` (no compilation)."""

import textwrap

import pytest

import dcaccel
from dcaccel.errors import DcaccelError
from dcaccel.frontend import Origin
from dcaccel.frontend.python_file import is_python_spec

TORCH_MODELS = textwrap.dedent(
    """
    import torch

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    double = Double()
    make_double = Double

    def example_inputs():
        return (torch.zeros(2, 5),)

    not_a_model = 42
    """
)

DACE_MODELS = textwrap.dedent(
    """
    import dace

    N = dace.symbol("N")

    @dace.program
    def negate(A: dace.float32[N]):
        return -A

    symbols = {"N": 7}
    """
)


@pytest.fixture
def models_file(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(TORCH_MODELS)
    return path


@pytest.fixture
def programs_file(tmp_path):
    path = tmp_path / "programs.py"
    path.write_text(DACE_MODELS)
    return path


@pytest.mark.parametrize("attribute", ["double", "make_double"])
def test_torch_module_or_factory(models_file, attribute):
    workload = dcaccel.load(f"{models_file}:{attribute}")
    assert workload.origin is Origin.TORCH
    assert workload.name == attribute
    assert [(s.name, s.shape) for s in workload.inputs] == [("x", (2, 5))]


def test_dace_program_with_file_symbols(programs_file):
    workload = dcaccel.load(f"{programs_file}:negate")
    assert workload.origin is Origin.DACE_PROGRAM
    assert workload.symbols == {"N": 7}


def test_arguments_override_the_file(programs_file):
    workload = dcaccel.load(f"{programs_file}:negate", symbols={"N": 3}, name="neg")
    assert (workload.symbols, workload.name) == ({"N": 3}, "neg")


def test_missing_attribute(models_file):
    with pytest.raises(DcaccelError, match=r"^'.*models\.py' has no attribute 'lenet'$"):
        dcaccel.load(f"{models_file}:lenet")


def test_missing_file(tmp_path):
    with pytest.raises(DcaccelError, match=r"^file '.*nowhere\.py' not found$"):
        dcaccel.load(f"{tmp_path}/nowhere.py:model")


def test_attribute_that_is_not_a_model(models_file):
    with pytest.raises(DcaccelError, match=r"^cannot load a int"):
        dcaccel.load(f"{models_file}:not_a_model")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("m.py:net", True), ("dir/m.py:make_net", True), ("m.onnx", False), ("m.py", False), ("m.py:1x", False)],
)
def test_is_python_spec(spec, expected):
    assert is_python_spec(spec) is expected


@pytest.mark.parametrize(
    ("source", "spec", "message"),
    [
        ("def f(:\n", "f", "'{path}' line 1: SyntaxError: invalid syntax"),
        ("raise ValueError('boom')\n", "f", "'{path}' failed when imported: ValueError: boom"),
        ("import no_such_module_of_dcaccel\n", "f", "'{path}' failed when imported: ModuleNotFoundError: No module"),
        ("def f():\n    raise RuntimeError\n", "f", "'{path}': f() raised RuntimeError"),
        (
            "import torch\nm = torch.nn.Linear(2, 2)\ndef example_inputs():\n    return 1 / 0\n",
            "m",
            "'{path}': example_inputs() raised ZeroDivisionError: division by zero",
        ),
    ],
)
def test_file_that_fails(tmp_path, source, spec, message):
    path = tmp_path / "broken.py"
    path.write_text(source)
    with pytest.raises(DcaccelError) as error:
        dcaccel.load(f"{path}:{spec}")
    assert str(error.value).startswith(message.format(path=path))
    assert "\n" not in str(error.value)
