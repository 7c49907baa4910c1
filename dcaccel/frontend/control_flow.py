"""ONNX control flow (``If``, ``Loop``, ``Scan``) replaced by the straight-line graph it denotes, before import.

DaCe's ONNX importer has no node for the control-flow ops, and dcaccel's model is a static task DAG of a
fixed-shape program: a control-flow node whose trip count and branch are known at import denotes a
straight-line graph of its bodies' ops, which then lower canonically like any other.
:func:`straight_line` writes that graph:

- ``Scan`` (opset 9 on; opset 8's batched form with no ``sequence_lens``): its body repeated once per element
  of the scanned axes (their length is static), step ``t`` reading element ``t`` of each scan input (the last
  first for a reverse ``scan_input_directions``) with a ``Gather`` and the state the previous step wrote;
  the last step's states are the final ones, and each scan output is the ``Concat`` of the steps' outputs
  (``Unsqueeze``\\ d at its ``scan_output_axes``, in reverse step order for a reverse direction). Opset 8's
  batch is unrolled first: each batch row is a scan of its own, the rows' results concatenated along axis 0.
- ``Loop``: its trip count ``M`` must be a constant and its condition a constant (absent, an initializer, or
  computed from constants and static shapes only, as is the body's ``cond`` output at each step once the step's
  iteration number is bound); the body is repeated until ``M`` steps ran or a step's condition is false, the
  loop-carried values threaded from step to step and each scan output the ``Concat`` of the steps' outputs
  along a new axis 0. A loop whose count or condition is not a constant is refused.
- ``If``: with a constant condition, the chosen branch's nodes replace it. Otherwise both branches are
  computed and each output is a ``Where`` of the condition, the ``then`` value and the ``else`` value, which
  needs the two branches' outputs to have the same shape and element type (else the node is refused).

A body's values and nodes are renamed per step (``<node>_step<k>_<name>``; an ``If``'s ``<node>_then_<name>``
and ``<node>_else_<name>``; a body node whose name starts with ``<node>_``, as those of an inlined function body
do, does not repeat it), so that every unrolled node says which control-flow node and step it came from;
the values the body reads from outer scopes keep their names. The nodes built to slice and gather
(``<node>_...``) are named after the control-flow node too. A control-flow node in a body is unrolled in turn,
once its enclosing step has bound the values it reads. Refusals are :class:`~dcaccel.errors.UnsupportedOpError`
of one line naming op, node and reason; every unrolled node is an info record of the ``dcaccel`` logger.
"""

import logging

import numpy as np
import onnx
import onnx.reference
from onnx import helper, numpy_helper

from dcaccel.errors import UnsupportedOpError

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})
"""The default-domain ops :func:`straight_line` replaces."""

MAX_STEPS = 4096
"""The most steps a ``Loop`` or ``Scan`` is unrolled to: beyond, the node is refused (a ``Loop`` written as a
``while`` with a huge trip count, as PyTorch exports one, whose condition is still true after that many)."""

#: Ops whose value differs from one run to the next: never computed at import.
_RANDOM_OPS = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)

#: Ops whose value is computed from their input's shape alone (a constant when that shape is static).
_SHAPE_OPS = frozenset({"Shape", "Size"})

INITIALIZERS_NOT_INPUTS_IR = 4
"""The IR version from which initializers need not be graph inputs (the constants of the unrolled graph are not;
``Constant`` nodes would not do: before opset 9 they hold no integers)."""

#: The opset from which ``Unsqueeze`` takes its axes as an input (before: an attribute).
_UNSQUEEZE_AXES_INPUT = 13

#: The opset from which ``Scan`` has no batch axis and takes the axes and directions of its inputs and outputs.
_SCAN_AXES = 9

logger = logging.getLogger(__name__)


def straight_line(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with every default-domain ``If``, ``Loop`` and ``Scan`` of its graph (and of their bodies)
    replaced by the straight-line graph it denotes (a copy; ``proto`` itself when it has none).

    Raises :class:`~dcaccel.errors.UnsupportedOpError` for a node that denotes no static graph (a trip count
    or condition that is not a constant, branches of different shapes under a computed condition, a scan over
    an axis of unknown length).
    """
    if not any(_is_control_flow(node) for node in proto.graph.node):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    unroller = _Unroller(model, source)
    for node in proto.graph.node:
        unroller.add(node)
    del model.graph.node[:]
    model.graph.node.extend(unroller.nodes)
    model.graph.initializer.extend(unroller.initializers)
    model.ir_version = max(model.ir_version, INITIALIZERS_NOT_INPUTS_IR)
    return model


def _is_control_flow(node: onnx.NodeProto) -> bool:
    return node.op_type in CONTROL_FLOW_OPS and node.domain in ("", "ai.onnx")


def _attributes(node: onnx.NodeProto) -> dict:
    return {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}


def _graph_names(graph: onnx.GraphProto) -> set[str]:
    """Every value and node name of ``graph`` and of its nodes' subgraphs."""
    names = {value.name for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer)}
    for node in graph.node:
        names.update((*node.input, *node.output, node.name))
        for attribute in node.attribute:
            for subgraph in (*attribute.graphs, *([attribute.g] if attribute.HasField("g") else [])):
                names |= _graph_names(subgraph)
    return names


def _renamed_graph(graph: onnx.GraphProto, names: dict[str, str]) -> None:
    """Rename, in place, the values of ``graph`` (and of its nodes' subgraphs) that ``names`` maps."""
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        value.name = names.get(value.name, value.name)
    for node in graph.node:
        _renamed_node(node, names)


def _renamed_node(node: onnx.NodeProto, names: dict[str, str]) -> None:
    """Rename, in place, the inputs and outputs of ``node`` (and the values of its subgraphs) that ``names`` maps."""
    node.input[:] = [names.get(name, name) for name in node.input]
    node.output[:] = [names.get(name, name) for name in node.output]
    for attribute in node.attribute:
        for subgraph in (*attribute.graphs, *([attribute.g] if attribute.HasField("g") else [])):
            _renamed_graph(subgraph, names)


class _Unroller:
    """The nodes (``nodes``) and new initializers (``initializers``) of a graph whose control flow is unrolled,
    built node by node in graph order (:meth:`add`)."""

    def __init__(self, model: onnx.ModelProto, source: str):
        self.model = model
        self.source = source
        self.opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 1)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.taken = _graph_names(model.graph)
        self.constants = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
        self.producers: dict[str, onnx.NodeProto] = {}

    # -- names, constants and types -----------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        """``base``, or ``base`` with the first numeric suffix that no value or node of the model has yet."""
        name, suffix = base, 1
        while name in self.taken:
            name, suffix = f"{base}_{suffix}", suffix + 1
        self.taken.add(name)
        return name

    def constant(self, value: np.ndarray, base: str) -> str:
        """The name of a new initializer holding ``value``."""
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        self.constants[name] = np.asarray(value)
        return name

    def value(self, name: str) -> np.ndarray | None:
        """The value of tensor ``name`` if it is computed from initializers, constants and static shapes only,
        else None."""
        if name in self.constants:
            return self.constants[name]
        node = self.producers.get(name)
        if node is None or node.op_type in _RANDOM_OPS or node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type in _SHAPE_OPS:  # reads its input's shape only: any data of that shape will do
            shape = self.static_shape(node.input[0])
            inputs = [None if shape is None else np.zeros(shape, np.float32)]
        else:
            inputs = [self.value(operand) if operand else None for operand in node.input]
        if any(operand and value is None for operand, value in zip(node.input, inputs, strict=True)):
            return None
        feed = {operand: value for operand, value in zip(node.input, inputs, strict=True) if operand}
        try:
            results = onnx.reference.ReferenceEvaluator(self._single_node_model(node)).run(None, feed)
        except Exception:  # noqa: BLE001 - an op ONNX's reference cannot compute here: the value stays unknown
            return None
        for output, result in zip(node.output, results, strict=False):
            self.constants[output] = np.asarray(result)
        return self.constants.get(name)

    def _single_node_model(self, node: onnx.NodeProto) -> onnx.ModelProto:
        """A model of ``node`` alone (inputs and outputs untyped), at the model's opsets."""
        graph = helper.make_graph(
            [node],
            "constant",
            [onnx.ValueInfoProto(name=name) for name in dict.fromkeys(node.input) if name],
            [onnx.ValueInfoProto(name=name) for name in node.output if name],
        )
        return helper.make_model(graph, opset_imports=self.model.opset_import, ir_version=self.model.ir_version)

    def types(self, names: list[str]) -> list[onnx.TypeProto | None]:
        """The types of tensors ``names`` by ONNX's shape inference on the nodes added so far (None: unknown)."""
        graph = self.model.graph
        partial = helper.make_graph(
            self.nodes,
            graph.name,
            graph.input,
            [],
            [*graph.initializer, *self.initializers],
            value_info=graph.value_info,
        )
        model = helper.make_model(
            partial,
            opset_imports=self.model.opset_import,
            ir_version=max(self.model.ir_version, INITIALIZERS_NOT_INPUTS_IR),
            functions=self.model.functions,
        )
        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
        except Exception:  # noqa: BLE001 - onnx's C++ inference raises assorted types; a type stays unknown
            inferred = graph
        known = {value.name: value.type for value in (*inferred.input, *inferred.value_info)}
        for init in [*graph.initializer, *self.initializers]:
            known[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
        return [known.get(name) for name in names]

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        """The shape of tensor ``name`` if every dimension is known, else None."""
        (value_type,) = self.types([name])
        if value_type is None or not value_type.tensor_type.HasField("shape"):
            return None
        dims = value_type.tensor_type.shape.dim
        return tuple(dim.dim_value for dim in dims) if all(dim.HasField("dim_value") for dim in dims) else None

    # -- building -----------------------------------------------------------------------------------------

    def add(self, node: onnx.NodeProto) -> None:
        """Add ``node`` to the graph: itself, or the straight-line graph it denotes if it is control flow."""
        if not _is_control_flow(node):
            self.nodes.append(node)
            self.producers.update(dict.fromkeys(node.output, node))
            return
        name = node.name or self.fresh(node.op_type)
        start = len(self.nodes)
        if node.op_type == "If":
            results = self._if(node, name)
        elif node.op_type == "Loop":
            results = self._loop(node, name)
        elif self.opset < _SCAN_AXES:
            results = self._batched_scan(node, name)
        else:
            results = self._scan(node, name, list(node.input), _attributes(node))
        self._bind_outputs(node, results, start)
        logger.info(
            "%s: %s '%s' replaced by %d straight-line node(s)", self.source, node.op_type, name, len(self.nodes) - start
        )

    def emit(self, op_type: str, inputs: list[str], base: str, **attributes) -> str:
        """Add a node of ``op_type`` named ``base`` (made unique) writing one new tensor; the tensor's name."""
        output = self.fresh(base)
        self.add(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    def _bind_outputs(self, node: onnx.NodeProto, results: list[str], start: int) -> None:
        """Make ``results`` (tensors the nodes added since ``start`` wrote) the outputs of ``node``: renamed when
        one of those nodes wrote it once, else through an ``Identity``."""
        written = {output: added for added in self.nodes[start:] for output in added.output}
        renames, copies = {}, []
        for output, result in zip(node.output, results, strict=True):
            if not output:
                continue
            if result in written and result not in renames:
                renames[result] = output
            else:
                copies.append((renames.get(result, result), output))
        for added in self.nodes[start:]:
            _renamed_node(added, renames)
        for result, output in renames.items():
            self.producers[output] = written[result]
            if result in self.constants:
                self.constants[output] = self.constants[result]
        for result, output in copies:
            self.add(helper.make_node("Identity", [result], [output], name=self.fresh(f"{node.name}_{output}")))

    def inline(self, graph: onnx.GraphProto, owner: str, part: str, bound: dict[str, str]) -> list[str]:
        """Add the nodes of ``graph`` (a body of the control-flow node ``owner``) with its values and nodes renamed
        ``<owner>_<part>_<name>`` (a node name that starts with ``<owner>_`` already does not repeat it) and its
        inputs bound to the tensors ``bound`` names; the names of its outputs, renamed."""
        prefix = f"{owner}_{part}_"
        body = onnx.GraphProto()
        body.CopyFrom(graph)
        defined = [init.name for init in body.initializer] + [out for node in body.node for out in node.output if out]
        names = {name: self.fresh(f"{prefix}{name}") for name in dict.fromkeys(defined)}
        names.update(bound)
        _renamed_graph(body, names)
        for init in body.initializer:
            self.initializers.append(init)
            self.constants[init.name] = numpy_helper.to_array(init)
        for node in body.node:
            node.name = self.fresh(prefix + (node.name or node.op_type).removeprefix(f"{owner}_"))
            self.add(node)
        return [value.name for value in body.output]

    def unsqueezed(self, name: str, axis: int, base: str) -> str:
        """``name`` with a new dimension of size 1 at ``axis`` (``Unsqueeze`` as the opset writes it)."""
        if self.opset < _UNSQUEEZE_AXES_INPUT:
            return self.emit("Unsqueeze", [name], base, axes=[axis])
        return self.emit("Unsqueeze", [name, self.constant(np.array([axis], np.int64), f"{base}_axes")], base)

    def stacked(self, steps: list[str], axis: int, base: str) -> str:
        """The tensors ``steps`` (of equal shape) stacked along a new axis ``axis``."""
        slices = [self.unsqueezed(step, axis, f"{base}_{k}") for k, step in enumerate(steps)]
        return slices[0] if len(slices) == 1 else self.emit("Concat", slices, base, axis=axis)

    # -- If -----------------------------------------------------------------------------------------------

    def _if(self, node: onnx.NodeProto, name: str) -> list[str]:
        """The outputs of ``If`` ``node``: its chosen branch's if its condition is a constant, else ``Where``\\ s of
        both branches' outputs."""
        branches = _attributes(node)
        condition = self.value(node.input[0])
        if condition is not None:
            chosen = "then" if bool(np.asarray(condition).reshape(-1)[0]) else "else"
            return self.inline(branches[f"{chosen}_branch"], name, chosen, {})
        then_outputs = self.inline(branches["then_branch"], name, "then", {})
        else_outputs = self.inline(branches["else_branch"], name, "else", {})
        then_types = self.types(then_outputs)
        else_types = self.types(else_outputs)
        for index, (then_type, else_type) in enumerate(zip(then_types, else_types, strict=True)):
            if then_type is None or then_type != else_type or not _static(then_type):
                raise UnsupportedOpError(
                    "If",
                    name,
                    f"the condition is not a constant and the branches' output {index} differ in shape or type "
                    f"(or have no static shape): {_type_text(then_type)} and {_type_text(else_type)}",
                )
        condition_shape = self.static_shape(node.input[0])
        if condition_shape is None or len(condition_shape) > min(_rank(t) for t in then_types):
            raise UnsupportedOpError("If", name, "the condition is not a constant and has a rank its outputs lack")
        return [
            self.emit("Where", [node.input[0], then_value, else_value], f"{name}_where_{index}")
            for index, (then_value, else_value) in enumerate(zip(then_outputs, else_outputs, strict=True))
        ]

    # -- Loop ---------------------------------------------------------------------------------------------

    def _loop(self, node: onnx.NodeProto, name: str) -> list[str]:
        """The outputs of ``Loop`` ``node`` unrolled (its final loop-carried values, then its scan outputs)."""
        body = _attributes(node)["body"]
        trips = self.value(node.input[0]) if node.input[0] else None
        if trips is None:
            raise UnsupportedOpError("Loop", name, "trip count is not a constant")
        trips = int(np.asarray(trips).reshape(-1)[0])
        condition = node.input[1] if len(node.input) > 1 and node.input[1] else None
        running = True if condition is None else self.value(condition)
        if running is None:
            raise UnsupportedOpError("Loop", name, "condition is not a constant")
        carried = list(node.input[2:])
        scans = [[] for _ in body.output[1 + len(carried) :]]
        condition = condition or self.constant(np.array(True), f"{name}_condition")
        step = 0
        while step < trips and bool(np.asarray(running).reshape(-1)[0]):
            if step == MAX_STEPS:
                raise UnsupportedOpError("Loop", name, f"still running after the {MAX_STEPS} steps unrolled")
            iteration = self.constant(np.array(step, np.int64), f"{name}_iteration{step}")
            inputs = [value.name for value in body.input]
            bound = dict(zip(inputs, [iteration, condition, *carried], strict=True))
            outputs = self.inline(body, name, f"step{step}", bound)
            condition, carried = outputs[0], outputs[1 : 1 + len(carried)]
            for collected, output in zip(scans, outputs[1 + len(carried) :], strict=True):
                collected.append(output)
            running = self.value(condition)
            if running is None:
                raise UnsupportedOpError("Loop", name, f"condition is not a constant (computed at step {step})")
            step += 1
        if scans and not step:
            raise UnsupportedOpError("Loop", name, "it runs no step, so its scan outputs are empty")
        return carried + [self.stacked(steps, 0, f"{name}_scan{k}") for k, steps in enumerate(scans)]

    # -- Scan ---------------------------------------------------------------------------------------------

    def _scan(self, node: onnx.NodeProto, name: str, inputs: list[str], attributes: dict) -> list[str]:
        """The outputs of a ``Scan`` (opset 9 on) of ``inputs`` with ``attributes`` unrolled (its final states, then
        its scan outputs)."""
        body = attributes["body"]
        count = attributes["num_scan_inputs"]
        states, scanned = inputs[: len(inputs) - count], inputs[len(inputs) - count :]
        input_axes = attributes.get("scan_input_axes", [0] * count)
        input_directions = attributes.get("scan_input_directions", [0] * count)
        outputs = len(body.output) - len(states)
        output_axes = attributes.get("scan_output_axes", [0] * outputs)
        output_directions = attributes.get("scan_output_directions", [0] * outputs)
        lengths = set()
        for value, axis in zip(scanned, input_axes, strict=True):
            shape = self.static_shape(value)
            if shape is None:
                raise UnsupportedOpError("Scan", name, f"the shape of scan input '{value}' is not static")
            lengths.add(shape[axis])
        if len(lengths) != 1:
            raise UnsupportedOpError("Scan", name, f"its scan inputs differ in length along their axes: {lengths}")
        (length,) = lengths
        if not 0 < length <= MAX_STEPS:
            raise UnsupportedOpError("Scan", name, f"scan length {length} is not between 1 and {MAX_STEPS}")
        collected = [[] for _ in range(outputs)]
        for step in range(length):
            slices = []
            for k, (value, axis, reverse) in enumerate(zip(scanned, input_axes, input_directions, strict=True)):
                index = self.constant(np.array(length - 1 - step if reverse else step, np.int64), f"{name}_index")
                slices.append(self.emit("Gather", [value, index], f"{name}_step{step}_input{k}", axis=axis))
            inputs = [value.name for value in body.input]
            results = self.inline(body, name, f"step{step}", dict(zip(inputs, [*states, *slices], strict=True)))
            states = results[: len(states)]
            for steps, output in zip(collected, results[len(states) :], strict=True):
                steps.append(output)
        scan_outputs = []
        for k, (steps, axis, reverse) in enumerate(zip(collected, output_axes, output_directions, strict=True)):
            rank = _rank(self.types(steps[:1])[0]) if axis < 0 else 0
            ordered = steps[::-1] if reverse else steps
            scan_outputs.append(self.stacked(ordered, axis + rank + 1 if axis < 0 else axis, f"{name}_output{k}"))
        return states + scan_outputs

    def _batched_scan(self, node: onnx.NodeProto, name: str) -> list[str]:
        """The outputs of an opset-8 ``Scan`` (axis 0 of every input the batch, axis 1 the scanned one): one
        :meth:`_scan` per batch row, the rows' outputs concatenated along axis 0."""
        attributes = _attributes(node)
        if node.input[0]:
            raise UnsupportedOpError("Scan", name, "sequence_lens is given (opset 8): only full-length scans unroll")
        inputs = list(node.input[1:])
        shape = self.static_shape(inputs[0])
        if shape is None or not shape:
            raise UnsupportedOpError("Scan", name, f"the batch size of '{inputs[0]}' is not static")
        count = attributes["num_scan_inputs"]
        row_attributes = {
            "body": attributes["body"],
            "num_scan_inputs": count,
            "scan_input_directions": attributes.get("directions", [0] * count),
        }
        rows = []
        for row in range(shape[0]):
            index = self.constant(np.array(row, np.int64), f"{name}_batch")
            row_inputs = [self.emit("Gather", [value, index], f"{name}_batch{row}_in", axis=0) for value in inputs]
            rows.append(self._scan(node, f"{name}_batch{row}", row_inputs, row_attributes))
        return [
            self.stacked(list(outputs), 0, f"{name}_batched{k}") for k, outputs in enumerate(zip(*rows, strict=True))
        ]


def _static(value_type: onnx.TypeProto) -> bool:
    """Whether ``value_type`` is a tensor type whose every dimension is known."""
    tensor_type = value_type.tensor_type
    return tensor_type.HasField("shape") and all(dim.HasField("dim_value") for dim in tensor_type.shape.dim)


def _rank(value_type: onnx.TypeProto | None) -> int:
    return len(value_type.tensor_type.shape.dim) if value_type is not None else 0


def _type_text(value_type: onnx.TypeProto | None) -> str:
    """``float[2,3]``, or ``unknown``."""
    if value_type is None or not value_type.HasField("tensor_type"):
        return "unknown"
    tensor_type = value_type.tensor_type
    element = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name if tensor_type.elem_type else "?"
    dims = ",".join(str(dim.dim_value) if dim.HasField("dim_value") else "?" for dim in tensor_type.shape.dim)
    return f"{element}[{dims}]"
