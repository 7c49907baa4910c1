"""The recurrent cells ``LSTM``, ``GRU`` and ``RNN`` as gate products through MMM and element-wise gates,
unrolled over time for the sequence length of the input (a fixed number of steps).

Per direction ``d`` (forward, reverse, or both of ``bidirectional``), with G gates of H hidden units
(LSTM: i, o, f, c; GRU: z, r, h; RNN: one) and ``t`` running over the steps in the direction's order:

1. ``TransW`` / ``TransR`` (one task each, for every direction at once): Wᵀ and Rᵀ, row by row;
2. the **input product** of every step at once, one batched MMM over the sequence:
   ``XW_d[t] = X[t] · W_dᵀ`` (seq × batch × G·H);
3. per step, the **hidden product** ``HR_t = H_{t-1} · R_dᵀ`` (batch × G·H; an MMM node, absent at the first
   step when there is no ``initial_h``: H is then zero), and one **gate task** over batch × H computing every
   gate of the cell from ``XW_d[t]``, ``HR_t``, the biases ``B`` and the previous state, writing the new
   hidden (and cell) state row by row, and ``Y[t]``, ``Y_h``, ``Y_c`` where connected.

A GRU with ``linear_before_reset`` 0 resets H before its product with R_h: its step is the product of H with
the z and r columns of Rᵀ, a ``reset`` task writing r ⊙ H_{t-1}, the product of that with the h columns, then
the gate task. The MMM nodes take the chosen shape (``mv``, ``op``, ``lmv``): a recurrent layer has one
implementation per shape, like Gemm. The transients between the tasks are marked from the orders the shape
declares (:func:`~dcaccel.expansions.mmm.buffer_reason_between`); Rᵀ and a state read by more than one task
are REUSE buffers, the input product read piecewise by the steps is a LAYER_OUTPUT buffer.

With ``layout`` 1 (batch first: X is batch × seq × inputs, ``initial_h``, ``initial_c``, ``Y_h``, ``Y_c`` are
batch × directions × H, Y is batch × seq × directions × H), ``TransX`` / ``Transinitial_h`` / ``Transinitial_c``
tasks first write X and the initial states time-major (their first two dimensions swapped), the steps are the
same, and the tasks writing Y, ``Y_h``, ``Y_c`` write them at their batch-first positions.

Attributes: ``direction``, ``layout``, ``activations`` with ``activation_alpha`` / ``activation_beta`` (the
activations the element-wise ops implement: Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid, Softplus; alpha and
beta consumed in order by the activations that take them, as onnxruntime does), ``clip`` (of every gate's
pre-activation), ``input_forget`` (LSTM: f = 1 - i), ``linear_before_reset`` (GRU), the optional ``B``,
``sequence_lens`` (data or constant: a batch element's steps past its length keep its state and write zeros in
Y, see :meth:`RecurrentBuilder.write`; a constant equal to the sequence length everywhere is folded away),
``initial_h``, ``initial_c``, ``P`` (LSTM peepholes) and outputs ``Y``, ``Y_h``, ``Y_c``. Refused in one line
naming the node and attribute: another direction or activation, an empty sequence, a non-floating type.
"""

import types
from dataclasses import dataclass

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import FLOAT_TYPES, ExpansionBuilder, literal, whole
from dcaccel.expansions.elementwise import ELEMENTWISE_OPS
from dcaccel.expansions.gemm import add_mmm, add_transpose
from dcaccel.expansions.implementation import Implementation
from dcaccel.expansions.mmm import MMM, Order, buffer_reason_between
from dcaccel.expansions.node import CanonicalForward, constant_ints, input_edge, input_shape, node_builder, unsupported


@dataclass(frozen=True)
class Cell:
    """A recurrent op: its gates (in the order of W's rows), its default activations of one direction and, per
    gate, which of them it applies."""

    op: str
    gates: tuple[str, ...]
    activations: tuple[str, ...]
    applies: tuple[int, ...]


CELLS = {
    "LSTM": Cell("LSTM", ("i", "o", "f", "c"), ("Sigmoid", "Tanh", "Tanh"), (0, 0, 0, 1)),
    "GRU": Cell("GRU", ("z", "r", "h"), ("Sigmoid", "Tanh"), (0, 0, 1)),
    "RNN": Cell("RNN", ("h",), ("Tanh",), (0,)),
}

ACTIVATION_PARAMETERS = {"LeakyRelu": ((0.01,), ()), "HardSigmoid": ((0.2,), (0.5,))}
"""Per activation taking parameters, the defaults of its alpha and of its beta (onnxruntime's)."""

ACTIVATIONS = {spec.op: spec for spec in ELEMENTWISE_OPS if spec.op in {"Sigmoid", "Tanh", "Relu", "Softplus"}} | {
    spec.op: spec for spec in ELEMENTWISE_OPS if spec.op in ACTIVATION_PARAMETERS
}
"""The activations a cell may use: the element-wise ops of the same name (one formula each)."""

DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


@dataclass(frozen=True)
class Activation:
    """An activation function of a cell, with its alpha and beta (None when it takes none)."""

    name: str
    alpha: float | None = None
    beta: float | None = None

    def expression(self, value: str, T: str) -> str:
        """The tasklet expression of the activation of ``value`` in type ``T``."""
        parameters = types.SimpleNamespace(alpha=self.alpha, beta=self.beta)
        return ACTIVATIONS[self.name].formula({"X": value, "input": value}, T, parameters)


@dataclass(frozen=True)
class Recurrence:
    """What a recurrent node computes: its cell, sizes, directions (reversed or not) and attributes."""

    cell: Cell
    steps: int
    batch: int
    inputs: int
    hidden: int
    reversed: tuple[bool, ...]
    activations: tuple[tuple[Activation, ...], ...]  # per direction, the cell's activations in order
    clip: float | None
    input_forget: bool
    linear_before_reset: bool
    dtype: dace.typeclass
    batch_first: bool = False
    lengths: bool = False  # sequence_lens read: some batch element's sequence may be shorter than ``steps``

    @property
    def width(self) -> int:
        """G·H: the columns of the gate products."""
        return len(self.cell.gates) * self.hidden


def _activations(node, cell: Cell, directions: int) -> tuple[tuple[Activation, ...], ...]:
    """The activations of every direction: ``activations`` (for every direction, or once for all), with alpha and
    beta taken in order from ``activation_alpha`` / ``activation_beta`` by the activations that use them."""
    per = len(cell.activations)
    names = list(node.activations) if node.activations else list(cell.activations) * directions
    if len(names) == per and directions == 2:
        names *= 2
    if len(names) < per * directions:
        raise unsupported(node, f"activations {names}: {per * directions} needed")
    alphas, betas = list(node.activation_alpha or []), list(node.activation_beta or [])
    found = []
    for name in names[: per * directions]:
        if name not in ACTIVATIONS:
            raise unsupported(node, f"activations: '{name}' (one of {', '.join(sorted(ACTIVATIONS))})")
        default_alpha, default_beta = ACTIVATION_PARAMETERS.get(name, ((), ()))
        alpha = (alphas.pop(0) if alphas else default_alpha[0]) if default_alpha else None
        beta = (betas.pop(0) if betas else default_beta[0]) if default_beta else None
        found.append(Activation(name, alpha, beta))
    return tuple(tuple(found[d * per : (d + 1) * per]) for d in range(directions))


def recurrence(node, state: SDFGState, sdfg: SDFG) -> Recurrence:
    """What ``node`` computes; :class:`UnsupportedOpError` naming the attribute, input or type it cannot lower."""
    cell = CELLS[node.schema.name]
    batch_first = bool(getattr(node, "layout", 0))
    if node.direction not in DIRECTIONS:
        raise unsupported(node, f"direction='{node.direction}'")
    dtypes = {sdfg.arrays[e.data.data].dtype for e in state.in_edges(node) if e.dst_conn != "sequence_lens"}
    if len(dtypes) != 1 or not dtypes <= set(FLOAT_TYPES):
        raise unsupported(node, f"element types {', '.join(sorted(map(str, dtypes)))} (one floating-point type)")
    steps, batch, inputs = input_shape(node, state, sdfg, "X")
    if batch_first:
        steps, batch = batch, steps
    hidden = input_shape(node, state, sdfg, "R")[-1]
    if steps == 0:
        raise unsupported(node, "an empty sequence")
    reverse = DIRECTIONS[node.direction]
    return Recurrence(
        cell,
        steps,
        batch,
        inputs,
        hidden,
        reverse,
        _activations(node, cell, len(reverse)),
        None if node.clip is None else float(node.clip),
        bool(getattr(node, "input_forget", 0)),
        bool(getattr(node, "linear_before_reset", 0)),
        dtypes.pop(),
        batch_first,
        _reads_lengths(node, state, sdfg, steps),
    )


def _reads_lengths(node, state: SDFGState, sdfg: SDFG, steps: int) -> bool:
    """Whether ``node``'s ``sequence_lens`` is connected and not a constant equal to ``steps`` for every element
    (then it is folded away)."""
    if input_edge(node, state, "sequence_lens") is None:
        return False
    return set(constant_ints(node, state, sdfg, "sequence_lens") or ()) != {steps}


@dataclass(frozen=True)
class State:
    """A batch × H state matrix: a container and the index of its matrix in it (``initial_h[d]``, ``h_d0_t1``)."""

    container: str
    lead: str
    batch: int
    hidden: int

    @property
    def whole(self) -> str:
        return f"{self.container}[{self.lead}0:{self.batch}, 0:{self.hidden}]"

    @property
    def element(self) -> str:
        return f"{self.container}[{self.lead}__b, __j]"


class RecurrentBuilder:
    """The nested SDFG of one recurrent node, built direction by direction and step by step.

    Every task of a step is a flat map over batch × H that reads each of its inputs once per iteration (the
    contract's equal in-volumes): one task per gate, then the state updates.
    """

    def __init__(self, steps: ExpansionBuilder, spec: Recurrence, implementation: str):
        self.steps = steps
        self.spec = spec
        self.implementation = implementation
        self.shape = MMM.implementations[implementation]
        self.T = f"dace.{spec.dtype.to_string()}"
        self.present = set(steps.sdfg.arrays)
        self.bias: dict[str, tuple[str, int]] = {}  # per gate, the container of its biases and where they start
        self.time_major = {name: name for name in ("X", "initial_h", "initial_c")}  # batch first: their transposes

    # -- the pieces of a step
    def product(self, label: str, a: Memlet, b: Memlet, shape: tuple, reason: BufferReason | None = None) -> str:
        """A new transient of ``shape`` = ``a`` · ``b``, one MMM node of the chosen shape labelled ``label``; marked
        for ``reason``, else from the order the shape produces it in (the gate tasks read it row by row)."""
        reason = reason or buffer_reason_between(self.shape.produces, Order.ROW)
        product = self.steps.transient(label, shape, self.spec.dtype, reason)
        mmm = add_mmm(self.steps, self.implementation, a, b, Memlet(data=product, subset=whole(shape)))
        mmm.task_label = self.steps.label(label).removesuffix("_map")
        return product

    def hidden_product(self, d: int, t: int, hidden: State, r_t: str, start: int, columns: int, label: str) -> str:
        """``hidden`` times the columns ``start:start + columns`` of R_dᵀ (batch × columns)."""
        return self.product(
            f"{label}_d{d}_t{t}",
            Memlet(hidden.whole),
            Memlet(f"{r_t}[{d}, 0:{self.spec.hidden}, {start}:{start + columns}]"),
            (self.spec.batch, columns),
        )

    def new_state(self, name: str, reason: BufferReason | None = None) -> State:
        """A new batch × H transient marked ``reason`` (written row by row by a task of a step)."""
        spec = self.spec
        container = self.steps.transient(name, (spec.batch, spec.hidden), spec.dtype, reason)
        return State(container, "", spec.batch, spec.hidden)

    @property
    def product_operand(self) -> BufferReason | None:
        """The mark of a state read by the next hidden product alone: from the order the shape consumes its A."""
        return buffer_reason_between(Order.ROW, self.shape.consumes_a)

    def task(self, label: str, inputs: dict[str, Memlet], code: str, outputs: dict[str, Memlet]) -> None:
        """A flat map over batch × H around ``code``."""
        ranges = {"__b": f"0:{self.spec.batch}", "__j": f"0:{self.spec.hidden}"}
        self.steps.flat_map(label, ranges, inputs, code, outputs)

    def clipped(self, terms: list[str]) -> str:
        """Code assigning the sum of ``terms``, clipped to [-clip, clip] with a ``clip``, to ``p``."""
        code = f"p = {' + '.join(terms)}\n"
        if self.spec.clip is not None:
            high, low = literal(self.spec.clip, self.spec.dtype), literal(-self.spec.clip, self.spec.dtype)
            code += f"p = {high} if p > {high} else ({low} if p < {low} else p)\n"
        return code

    def gate(
        self,
        d: int,
        t: int,
        gate: str,
        xw: str,
        products: dict[str, tuple[str, int]],
        extra: dict[str, Memlet] | None = None,
        extra_term: str = "",
    ) -> State:
        """The task of gate ``gate`` at step ``t``: its activation of the clipped sum of the input product, the
        hidden product (``products``: gate -> container and the column the gate starts at), the biases and
        ``extra_term`` (over the inputs ``extra``), into a new transient."""
        H, cell = self.spec.hidden, self.spec.cell
        g = cell.gates.index(gate)
        inputs = {"x": Memlet(f"{xw}[{t}, __b, {g * H} + __j]")}
        if gate in products:
            container, start = products[gate]
            inputs["hr"] = Memlet(f"{container}[__b, {start} + __j]")
        if gate in self.bias:
            container, start = self.bias[gate]
            inputs["bias"] = Memlet(f"{container}[{start} + __j]")
        terms = list(inputs) + ([extra_term] if extra_term else [])
        activation = self.spec.activations[d][cell.applies[g]]
        code = self.clipped(terms) + f"out = {activation.expression('p', self.T)}"
        result = self.new_state(f"{gate}_d{d}_t{t}")
        self.task(f"gate_{gate}_d{d}_t{t}", inputs | (extra or {}), code, {"out": Memlet(result.element)})
        return result

    def program_outputs(self, d: int, t: int, last: bool, *outputs: str) -> dict[str, Memlet]:
        """The memlets writing ``Y[t]`` (``"Y"``) and, at the last step, ``Y_h`` / ``Y_c``, of those connected."""
        batch_first = self.spec.batch_first
        memlets = {}
        if "Y" in outputs and "Y" in self.present:
            memlets["y"] = Memlet(f"Y[__b, {t}, {d}, __j]" if batch_first else f"Y[{t}, {d}, __b, __j]")
        for name in ("Y_h", "Y_c"):
            if last and name in outputs and name in self.present:
                memlets[name.lower()] = Memlet(f"{name}[__b, {d}, __j]" if batch_first else f"{name}[{d}, __b, __j]")
        return memlets

    def write(
        self, label: str, t: int, previous: State | None, inputs: dict[str, Memlet], value: str, outputs: dict
    ) -> None:
        """A task computing the state ``value`` (code assigning ``v``) of step ``t`` into every one of ``outputs``.

        With ``sequence_lens`` (:attr:`Recurrence.lengths`), a batch element whose sequence is shorter than ``t + 1``
        keeps its ``previous`` state (zero if none) and gets zeros in Y (``y``): its steps past the end change
        nothing, and a reverse direction starts from its last element; one of length 0 gets zeros in ``Y_h`` and
        ``Y_c`` (``y_h``, ``y_c``), not its initial state (onnxruntime's rule)."""
        code = value
        written = {key: "v" for key in outputs}
        if self.spec.lengths:
            inputs = dict(inputs)
            inputs["length"] = Memlet("sequence_lens[__b]")
            zero = literal(0, self.spec.dtype)
            kept = zero
            if previous is not None:
                kept = next((k for k, m in inputs.items() if str(m) == str(Memlet(previous.element))), "previous")
                inputs.setdefault(kept, Memlet(previous.element))
            code += f"\nv = v if {t} < length else {kept}"
            written |= {key: f"v if {t} < length else {zero}" for key in ("y",) if key in outputs}
            written |= {key: f"v if length > 0 else {zero}" for key in ("y_h", "y_c") if key in outputs}
        code += "".join(f"\n{key} = {expression}" for key, expression in written.items())
        self.task(label, inputs, code, outputs)

    # -- a direction
    def biases(self, d: int) -> None:
        """The summed biases Wb + Rb of direction ``d``, one task; GRU's h gate with ``linear_before_reset``
        takes Wb alone (its Rb is added before the reset gate scales it), copied by a task of its own into a
        container of its own (one writer per container, each gate task reading one element of each input)."""
        self.bias = {}
        if "B" not in self.present:
            return
        spec, width, H = self.spec, self.spec.width, self.spec.hidden
        apart = spec.cell.op == "GRU" and spec.linear_before_reset
        summed = self.steps.transient(f"bias_d{d}", (width - H * apart,), spec.dtype, BufferReason.REUSE)
        self.steps.flat_map(
            f"bias_d{d}",
            {"__c": f"0:{width - H * apart}"},
            {"wb": Memlet(f"B[{d}, __c]"), "rb": Memlet(f"B[{d}, {width} + __c]")},
            "out = wb + rb",
            {"out": Memlet(f"{summed}[__c]")},
        )
        self.bias = {gate: (summed, k * H) for k, gate in enumerate(spec.cell.gates)}
        if apart:
            alone = self.steps.transient(f"bias_h_d{d}", (H,), spec.dtype, BufferReason.REUSE)
            self.steps.flat_map(
                f"bias_h_d{d}",
                {"__c": f"0:{H}"},
                {"wb": Memlet(f"B[{d}, {2 * H} + __c]")},
                "out = wb",
                {"out": Memlet(f"{alone}[__c]")},
            )
            self.bias["h"] = (alone, 0)

    def direction(self, d: int, w_t: str, r_t: str | None) -> None:
        """Every step of direction ``d``: the biases, the input product, then per step the hidden product(s),
        the gates and the state updates."""
        spec, B, H = self.spec, self.spec.batch, self.spec.hidden
        self.biases(d)
        xw = self.product(
            f"input_d{d}",
            Memlet(f"{self.time_major['X']}[0:{spec.steps}, 0:{B}, 0:{spec.inputs}]"),
            Memlet(f"{w_t}[{d}, 0:{spec.inputs}, 0:{spec.width}]"),
            (spec.steps, B, spec.width),
            BufferReason.LAYER_OUTPUT if spec.steps > 1 else None,
        )
        hidden = State(self.time_major["initial_h"], f"{d}, ", B, H) if "initial_h" in self.present else None
        cell = State(self.time_major["initial_c"], f"{d}, ", B, H) if "initial_c" in self.present else None
        step = {"LSTM": self.lstm_step, "GRU": self.gru_step, "RNN": self.rnn_step}[spec.cell.op]
        order = range(spec.steps - 1, -1, -1) if spec.reversed[d] else range(spec.steps)
        for s, t in enumerate(order):
            hidden, cell = step(d, t, xw, r_t, hidden, cell, s == spec.steps - 1)

    def lstm_step(self, d, t, xw, r_t, hidden: State | None, cell: State | None, last: bool):
        """i, f (1 - i with ``input_forget``), c gates; the cell state C = f ⊙ C' + i ⊙ c; the o gate; then
        H = o ⊙ h(C). A peephole adds P ⊙ C' to i and f, P ⊙ C to o."""
        spec, H = self.spec, self.spec.hidden
        products = {}
        if hidden is not None:
            hr = self.hidden_product(d, t, hidden, r_t, 0, spec.width, "hidden")
            products = {g: (hr, k * H) for k, g in enumerate(spec.cell.gates)}

        def peephole(gate: str, state: State | None) -> dict:
            if "P" not in self.present or state is None:
                return {}
            k = ("i", "o", "f").index(gate)
            return {"peep": Memlet(f"P[{d}, {k * H} + __j]"), "state": Memlet(state.element)}

        def gate(name: str, state: State | None = None) -> State:
            extra = peephole(name, state)
            return self.gate(d, t, name, xw, products, extra, "peep * state" if extra else "")

        i = gate("i", cell)
        f = None  # unused without a previous cell state
        if cell is not None and spec.input_forget:
            f = self.new_state(f"f_d{d}_t{t}")
            self.task(
                f"gate_f_d{d}_t{t}", {"i": Memlet(i.element)}, f"out = {self.T}(1) - i", {"out": Memlet(f.element)}
            )
        elif cell is not None:
            f = gate("f", cell)
        c = gate("c")
        inputs = {"i": Memlet(i.element), "c": Memlet(c.element)}
        value = "v = i * c"
        if cell is not None:
            inputs |= {"f": Memlet(f.element), "state": Memlet(cell.element)}
            value = "v = f * state + i * c"
        new_cell = self.new_state(f"cell_d{d}_t{t}")
        self.write(
            f"cell_d{d}_t{t}",
            t,
            cell,
            inputs,
            value,
            {"out": Memlet(new_cell.element)} | self.program_outputs(d, t, last, "Y_c"),
        )
        outputs, previous = self.program_outputs(d, t, last, "Y", "Y_h"), hidden
        if not last:
            hidden = self.new_state(f"h_d{d}_t{t}", self.product_operand)
            outputs["out"] = Memlet(hidden.element)
        if outputs:
            o = gate("o", new_cell)
            h = spec.activations[d][2].expression("state", self.T)
            self.write(
                f"state_d{d}_t{t}",
                t,
                previous,
                {"o": Memlet(o.element), "state": Memlet(new_cell.element)},
                f"v = o * {h}",
                outputs,
            )
        return hidden, new_cell

    def gru_step(self, d, t, xw, r_t, hidden: State | None, cell, last: bool):
        """z, r gates; the h gate (with ``linear_before_reset`` g(x + Wb + r ⊙ (H'·Rᵀ + Rb)), else of the
        product of r ⊙ H' with R_hᵀ); then H = (1 - z) ⊙ h + z ⊙ H'."""
        spec, T, H = self.spec, self.T, self.spec.hidden
        products, extra, term = {}, {}, ""
        if hidden is not None and spec.linear_before_reset:
            hr = self.hidden_product(d, t, hidden, r_t, 0, spec.width, "hidden")
            products = {"z": (hr, 0), "r": (hr, H)}
            extra = {"hr_h": Memlet(f"{hr}[__b, {2 * H} + __j]")}
        elif hidden is not None:
            hr = self.hidden_product(d, t, hidden, r_t, 0, 2 * H, "hidden_zr")
            products = {"z": (hr, 0), "r": (hr, H)}
            r = self.gate(d, t, "r", xw, products)
            reset = self.new_state(f"reset_d{d}_t{t}", self.product_operand)
            self.task(
                f"reset_d{d}_t{t}",
                {"r": Memlet(r.element), "state": Memlet(hidden.element)},
                "out = r * state",
                {"out": Memlet(reset.element)},
            )
            products["h"] = (self.hidden_product(d, t, reset, r_t, 2 * H, H, "hidden_h"), 0)
        z = self.gate(d, t, "z", xw, products)
        if spec.linear_before_reset and ("B" in self.present or hidden is not None):
            if "B" in self.present:
                extra["rb_h"] = Memlet(f"B[{d}, {5 * H} + __j]")
            extra["r"] = Memlet(self.gate(d, t, "r", xw, products).element)
            term = f"r * ({' + '.join(k for k in extra if k != 'r')})"
        h = self.gate(d, t, "h", xw, products, extra, term)
        inputs = {"z": Memlet(z.element), "h": Memlet(h.element)}
        value = f"v = ({T}(1) - z) * h"
        if hidden is not None:
            inputs["state"] = Memlet(hidden.element)
            value += " + z * state"
        outputs, previous = self.program_outputs(d, t, last, "Y", "Y_h"), hidden
        if not last:  # read by the next hidden product(s) and the next state update (and reset task)
            hidden = self.new_state(f"h_d{d}_t{t}", BufferReason.REUSE)
            outputs["out"] = Memlet(hidden.element)
        self.write(f"state_d{d}_t{t}", t, previous, inputs, value, outputs)
        return hidden, None

    def rnn_step(self, d, t, xw, r_t, hidden: State | None, cell, last: bool):
        """H = f(X·Wᵀ + H'·Rᵀ + Wb + Rb): one gate task writing the state."""
        spec = self.spec
        products = {}
        if hidden is not None:
            products = {"h": (self.hidden_product(d, t, hidden, r_t, 0, spec.width, "hidden"), 0)}
        h = self.gate(d, t, "h", xw, products)
        outputs, previous = self.program_outputs(d, t, last, "Y", "Y_h"), hidden
        if not last:
            hidden = self.new_state(f"h_d{d}_t{t}", self.product_operand)
            outputs["out"] = Memlet(hidden.element)
        self.write(f"state_d{d}_t{t}", t, previous, {"h": Memlet(h.element)}, "v = h", outputs)
        return hidden, None


def build_recurrent_sdfg(steps: ExpansionBuilder, spec: Recurrence, implementation: str) -> SDFG:
    """The nested SDFG of a recurrent node in ``steps`` (its arguments added): see the module docstring."""
    builder = RecurrentBuilder(steps, spec, implementation)
    directions = len(spec.reversed)
    if spec.batch_first:
        x_reason = buffer_reason_between(Order.ROW, builder.shape.consumes_a)
        for name, reason in (("X", x_reason), ("initial_h", BufferReason.REUSE), ("initial_c", BufferReason.REUSE)):
            if name in builder.present:
                builder.time_major[name] = _swap_leading(steps, name, spec.dtype, reason)
    hidden_products = directions * (spec.steps - ("initial_h" not in builder.present))
    w_reason = buffer_reason_between(Order.ROW, builder.shape.consumes_b)
    w_t = add_transpose(steps, "TransW", "W", (directions, spec.inputs, spec.width), spec.dtype, w_reason)
    r_t = None
    if hidden_products:
        r_reason = BufferReason.REUSE if hidden_products > 1 or spec.cell.op == "GRU" else w_reason
        r_t = add_transpose(steps, "TransR", "R", (directions, spec.hidden, spec.width), spec.dtype, r_reason)
    for d in range(directions):
        builder.direction(d, w_t, r_t)
    return steps.sdfg


def _swap_leading(steps: ExpansionBuilder, source: str, dtype: dace.typeclass, reason: BufferReason | None) -> str:
    """A task ``Trans<source>`` writing ``source`` (3-D) with its first two dimensions swapped into a new transient
    marked ``reason``, row by row: batch-first X (batch × seq × inputs) and initial states (batch × directions × H)
    in the time-major layout of the steps."""
    first, second, last = steps.desc(source).shape
    swapped = steps.transient(f"{source}_t", (second, first, last), dtype, reason)
    steps.flat_map(
        f"Trans{source}",
        {"__i": f"0:{second}", "__j": f"0:{first}", "__k": f"0:{last}"},
        {"v": Memlet(f"{source}[__j, __i, __k]")},
        "out = v",
        {"out": Memlet(f"{swapped}[__i, __j, __k]")},
    )
    return swapped


class _Recurrent(CanonicalForward):
    """A recurrent cell through MMM (see the module docstring); subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        recurrence(node, state, sdfg)

    @classmethod
    def forward(cls, node, state, sdfg):
        spec = recurrence(node, state, sdfg)
        drop = ["sequence_lens"] if input_edge(node, state, "sequence_lens") is not None and not spec.lengths else []
        return build_recurrent_sdfg(node_builder(node, state, sdfg, drop=drop), spec, cls.mmm_implementation)


IMPLEMENTATIONS = tuple(
    Implementation(
        op,
        shape,
        type(
            f"{op}{shape.upper()}",
            (_Recurrent,),
            {"mmm_implementation": shape, "__doc__": f"ONNX {op} as ``{shape}``."},
        ),
    )
    for op in CELLS
    for shape in MMM.implementations
)
