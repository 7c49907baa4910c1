"""The :class:`Workload`: an imported program (its SDFG) with its named inputs, outputs and weights.

A workload is what every later stage of the pipeline starts from. Its SDFG keeps the operators as
imported (ONNX library nodes for models that came from ONNX or PyTorch); lowering to maps is the job
of :mod:`dcaccel.transforms`. Weights are data (numpy arrays passed to the SDFG as arguments), never
code, so a workload can be perturbed or re-weighted without recompiling.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import dace
import numpy as np
import onnx

from dcaccel.errors import DcaccelError
from dcaccel.frontend.execution import run_sdfg
from dcaccel.frontend.shapes import bind_symbols, concrete_shape

if TYPE_CHECKING:
    from dcaccel.transforms.lower import LoweredWorkload


class Origin(StrEnum):
    """Where a workload was imported from."""

    TORCH = "torch"
    ONNX = "onnx"
    DACE_PROGRAM = "dace-program"
    SDFG = "sdfg"


@dataclass(frozen=True)
class TensorSpec:
    """A named program input or output: its shape (ints, or strings for symbolic sizes) and element type.

    ``name`` is the user-facing name (the ONNX value name, or the Python parameter name); ``container``
    is the data container of the SDFG that holds the tensor (e.g. ``__return`` for a returned value).
    """

    name: str
    shape: tuple[int | str, ...]
    dtype: np.dtype
    container: str = ""

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if not self.container:
            object.__setattr__(self, "container", self.name)

    def concrete_shape(self, symbols: Mapping[str, int]) -> tuple[int, ...]:
        """The shape with every symbolic size replaced by its value in ``symbols``."""
        return concrete_shape(self.name, self.shape, symbols)


#: Draws the inputs of a workload: ``sampler(rng, shapes)`` returns one array per input name, where
#: ``shapes`` maps each input name to its concrete shape.
InputSampler = Callable[[np.random.Generator, Mapping[str, tuple[int, ...]]], dict[str, np.ndarray]]


@dataclass(eq=False)
class Workload:
    """A program to explore: its SDFG, its inputs, outputs and weights, and how to check it.

    ``weights`` maps SDFG container names to arrays passed at every run; ``onnx_model`` is kept for
    onnxruntime references (ONNX and PyTorch workloads), ``reference`` is the plain Python function
    of a ``@dace.program``; ``symbols`` holds default values of symbolic sizes; ``input_sampler``
    optionally draws realistic inputs (e.g. positive-definite covariances) for :meth:`random_inputs`.
    """

    name: str
    origin: Origin
    sdfg: dace.SDFG
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    onnx_model: onnx.ModelProto | None = None
    reference: Callable[..., Any] | None = None
    symbols: dict[str, int] = field(default_factory=dict)
    input_sampler: InputSampler | None = None

    @property
    def parameter_count(self) -> int:
        """Number of scalars in the weight tensors: floating-point weights of rank one or more.

        Batch-norm statistics count; 0-d constants (clip bounds, scale factors) and integer tensors
        (the target shape of a Reshape) are not parameters.
        """
        arrays = [np.asarray(w) for w in self.weights.values()]
        return sum(w.size for w in arrays if w.ndim > 0 and np.issubdtype(w.dtype, np.floating))

    def bind_symbols(self, inputs: Mapping[str, np.ndarray]) -> dict[str, int]:
        """The symbol values for a run on ``inputs``: the defaults, updated by the shapes of ``inputs``.

        Raises :class:`~dcaccel.errors.ShapeError` when an input does not fit its declared shape.
        """
        return bind_symbols(self.inputs, inputs, self.symbols)

    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs at the default symbol values (standard normal for floating types)."""
        rng = np.random.default_rng(seed)
        shapes = {spec.name: spec.concrete_shape(self.symbols) for spec in self.inputs}
        if self.input_sampler is not None:
            drawn = self.input_sampler(rng, shapes)
            return {spec.name: np.array(drawn[spec.name], dtype=spec.dtype) for spec in self.inputs}
        return {spec.name: _random_array(rng, shapes[spec.name], spec.dtype) for spec in self.inputs}

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Compile the SDFG (once per SDFG content) and run it on ``inputs``; returns the outputs by name."""
        return run_sdfg(self.sdfg, self, inputs)

    def lower(self, choices: Mapping[str, str] | None = None) -> "LoweredWorkload":
        """Lower the workload fully to maps with the canonical implementations in ``choices``.

        ``choices`` maps an ONNX op type or a node name to an implementation name; see
        :func:`dcaccel.transforms.lower.lower`.
        """
        from dcaccel.transforms.lower import lower

        return lower(self, choices)


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A random array: standard normal for floats, integers in [0, 10) for ints, fair coins for bools."""
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 10, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    raise DcaccelError(f"cannot draw random inputs of type {dtype}")
