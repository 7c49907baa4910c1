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

Attributes: ``direction``, ``activations`` with ``activation_alpha`` / ``activation_beta`` (the activations the
element-wise ops implement: Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid, Softplus; alpha and beta consumed in
order by the activations that take them, as onnxruntime does), ``clip`` (of every gate's pre-activation),
``input_forget`` (LSTM: f = 1 - i), ``linear_before_reset`` (GRU), the optional ``B``, ``initial_h``,
``initial_c``, ``P`` (LSTM peepholes) and outputs ``Y``, ``Y_h``, ``Y_c``. Refused in one line naming the
node and attribute: ``layout`` 1 (batch first), ``sequence_lens`` unless a constant equal to the sequence
length for every batch element, another activation, a non-floating type.
"""

import types
from dataclasses import dataclass

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import FLOAT_TYPES, ExpansionBuilder, literal, whole
from dcaccel.expansions.elementwise import ELEMENTWISE_OPS
from dcaccel.expansions.gemm import add_mmm, add_transpose
from dcaccel.expansions.mmm import MMM, Order, buffer_reason_between
from dcaccel.expansions.node import CanonicalForward, constant_ints, input_edge, input_shape, node_builder, unsupported
from dcaccel.expansions.registry import Implementation


@dataclass(frozen=True)
class Cell:
    """A recurrent op: its gates (in the order of W's rows) and its default activations of one direction."""

    op: str
    gates: tuple[str, ...]
    activations: tuple[str, ...]


CELLS = {
    "LSTM": Cell("LSTM", ("i", "o", "f", "c"), ("Sigmoid", "Tanh", "Tanh")),
    "GRU": Cell("GRU", ("z", "r", "h"), ("Sigmoid", "Tanh")),
    "RNN": Cell("RNN", ("h",), ("Tanh",)),
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
    if getattr(node, "layout", 0):
        raise unsupported(node, "layout=1 (batch first)")
    if node.direction not in DIRECTIONS:
        raise unsupported(node, f"direction='{node.direction}'")
    dtypes = {sdfg.arrays[e.data.data].dtype for e in state.in_edges(node) if e.dst_conn != "sequence_lens"}
    if len(dtypes) != 1 or not dtypes <= set(FLOAT_TYPES):
        raise unsupported(node, f"element types {', '.join(sorted(map(str, dtypes)))} (one floating-point type)")
    steps, batch, inputs = input_shape(node, state, sdfg, "X")
    hidden = input_shape(node, state, sdfg, "R")[-1]
    if steps == 0:
        raise unsupported(node, "an empty sequence")
    if input_edge(node, state, "sequence_lens") is not None:
        lengths = constant_ints(node, state, sdfg, "sequence_lens")
        if lengths is None or set(lengths) != {steps}:
            raise unsupported(node, f"sequence_lens other than a constant {steps} (the sequence length)")
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
    )


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


@dataclass
class Terms:
    """The memlets a gate task reads (tasklet operand -> memlet), the terms summed into each gate's
    pre-activation and, of a gate whose recurrent part is scaled (GRU's h with ``linear_before_reset``),
    the terms of that part."""

    memlets: dict
    sums: dict
    recurrent: dict

    def add(self, gate: str, operand: str, memlet: Memlet, recurrent: bool = False) -> None:
        self.memlets[operand] = memlet
        (self.recurrent if recurrent else self.sums).setdefault(gate, []).append(operand)


class RecurrentBuilder:
    """The nested SDFG of one recurrent node, built direction by direction and step by step."""

    def __init__(self, steps: ExpansionBuilder, spec: Recurrence, implementation: str):
        self.steps = steps
        self.spec = spec
        self.implementation = implementation
        self.shape = MMM.implementations[implementation]
        self.T = f"dace.{spec.dtype.to_string()}"
        self.present = set(steps.sdfg.arrays)

    # -- the pieces of a step
    def product(self, label: str, a: Memlet, b: Memlet, shape: tuple, reason: BufferReason | None = None) -> str:
        """A new transient of ``shape`` = ``a`` · ``b``, one MMM node of the chosen shape labelled ``label``; marked
        for ``reason``, else from the order the shape produces it in (the gate task reads it row by row)."""
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

    def new_state(self, name: str, reason: BufferReason | None) -> State:
        """A new batch × H state transient marked ``reason`` (written row by row by a gate task)."""
        spec = self.spec
        return State(
            self.steps.transient(name, (spec.batch, spec.hidden), spec.dtype, reason), "", spec.batch, spec.hidden
        )

    @property
    def product_operand(self) -> BufferReason | None:
        """The mark of a state read by the next hidden product alone: from the order the shape consumes its A."""
        return buffer_reason_between(Order.ROW, self.shape.consumes_a)

    def gate_terms(self, d: int, t: int, xw: str, products: dict[str, tuple[str, int]], gates) -> Terms:
        """The terms of ``gates``: the input product at step ``t``, the hidden products (gate -> container and the
        column its gate starts at) and both biases; the recurrent part of GRU's h kept apart with
        ``linear_before_reset``."""
        H, cell = self.spec.hidden, self.spec.cell
        terms = Terms({}, {}, {})
        for gate in gates:
            g = cell.gates.index(gate)
            apart = cell.op == "GRU" and gate == "h" and self.spec.linear_before_reset
            terms.add(gate, f"x_{gate}", Memlet(f"{xw}[{t}, __b, {g * H} + __j]"))
            if gate in products:
                container, start = products[gate]
                terms.add(gate, f"hr_{gate}", Memlet(f"{container}[__b, {start} + __j]"), apart)
            if "B" in self.present:
                terms.add(gate, f"wb_{gate}", Memlet(f"B[{d}, {g * H} + __j]"))
                terms.add(gate, f"rb_{gate}", Memlet(f"B[{d}, {(len(cell.gates) + g) * H} + __j]"), apart)
        return terms

    def preactivation(self, terms: Terms, gate: str, extra: str = "") -> str:
        """Code assigning gate ``gate``'s pre-activation (its terms and ``extra``, clipped) to ``p_<gate>``."""
        parts = terms.sums.get(gate, []) + ([extra] if extra else [])
        code = f"p_{gate} = {' + '.join(parts) if parts else literal(0, self.spec.dtype)}\n"
        if self.spec.clip is not None:
            high, low = literal(self.spec.clip, self.spec.dtype), literal(-self.spec.clip, self.spec.dtype)
            code += f"p_{gate} = {high} if p_{gate} > {high} else ({low} if p_{gate} < {low} else p_{gate})\n"
        return code

    def gate_task(self, d: int, t: int, terms: Terms, code: str, outputs: dict[str, tuple[str, Memlet]]) -> None:
        """The gate task of step ``t``: ``code``, then every output (connector -> value, memlet)."""
        code += "".join(f"{key} = {value}\n" for key, (value, _) in outputs.items())
        self.steps.flat_map(
            f"cell_d{d}_t{t}",
            {"__b": f"0:{self.spec.batch}", "__j": f"0:{self.spec.hidden}"},
            terms.memlets,
            code,
            {key: memlet for key, (_, memlet) in outputs.items()},
        )

    def program_outputs(self, d: int, t: int, last: bool, hidden: str, cell: str | None = None) -> dict:
        """The outputs of a gate task to ``Y[t]`` and, at the last step, to ``Y_h`` / ``Y_c`` (connected ones)."""
        outputs = {}
        if "Y" in self.present:
            outputs["y"] = (hidden, Memlet(f"Y[{t}, {d}, __b, __j]"))
        if last and "Y_h" in self.present:
            outputs["last_h"] = (hidden, Memlet(f"Y_h[{d}, __b, __j]"))
        if last and cell is not None and "Y_c" in self.present:
            outputs["last_c"] = (cell, Memlet(f"Y_c[{d}, __b, __j]"))
        return outputs

    # -- a direction
    def direction(self, d: int, w_t: str, r_t: str | None) -> None:
        """Every step of direction ``d``: the input product, then per step the hidden product(s) and gates."""
        spec, B, H = self.spec, self.spec.batch, self.spec.hidden
        xw = self.product(
            f"input_d{d}",
            Memlet(f"X[0:{spec.steps}, 0:{B}, 0:{spec.inputs}]"),
            Memlet(f"{w_t}[{d}, 0:{spec.inputs}, 0:{spec.width}]"),
            (spec.steps, B, spec.width),
            BufferReason.LAYER_OUTPUT if spec.steps > 1 else None,
        )
        hidden = State("initial_h", f"{d}, ", B, H) if "initial_h" in self.present else None
        cell = State("initial_c", f"{d}, ", B, H) if "initial_c" in self.present else None
        step = {"LSTM": self.lstm_step, "GRU": self.gru_step, "RNN": self.rnn_step}[spec.cell.op]
        order = range(spec.steps - 1, -1, -1) if spec.reversed[d] else range(spec.steps)
        for s, t in enumerate(order):
            hidden, cell = step(d, t, xw, r_t, hidden, cell, s == spec.steps - 1)

    def lstm_step(self, d, t, xw, r_t, hidden: State | None, cell: State | None, last: bool):
        spec, T = self.spec, self.T
        act_f, act_g, act_h = spec.activations[d]
        products = {}
        if hidden is not None:
            hr = self.hidden_product(d, t, hidden, r_t, 0, spec.width, "hidden")
            products = {g: (hr, k * spec.hidden) for k, g in enumerate(spec.cell.gates)}
        terms = self.gate_terms(d, t, xw, products, spec.cell.gates)
        peepholes = {}
        if "P" in self.present:
            used = ("i", "f", "o") if cell is not None else ("o",)
            for k, gate in enumerate(("i", "o", "f")):
                if gate in used:
                    terms.memlets[f"p_{gate}_peep"] = Memlet(f"P[{d}, {k * spec.hidden} + __j]")
                    peepholes[gate] = f"p_{gate}_peep * " + ("c_new" if gate == "o" else "c_prev")
        if cell is not None:
            terms.memlets["c_prev"] = Memlet(cell.element)
        code = self.preactivation(terms, "i", peepholes.get("i", "")) + f"g_i = {act_f.expression('p_i', T)}\n"
        if spec.input_forget:
            code += f"g_f = {T}(1) - g_i\n"
        else:
            code += self.preactivation(terms, "f", peepholes.get("f", "")) + f"g_f = {act_f.expression('p_f', T)}\n"
        code += self.preactivation(terms, "c") + f"g_c = {act_g.expression('p_c', T)}\n"
        code += "c_new = g_f * c_prev + g_i * g_c\n" if cell is not None else "c_new = g_i * g_c\n"
        code += self.preactivation(terms, "o", peepholes.get("o", "")) + f"g_o = {act_f.expression('p_o', T)}\n"
        code += f"h_new = g_o * {act_h.expression('c_new', T)}\n"
        outputs = self.program_outputs(d, t, last, "h_new", "c_new")
        if not last:
            hidden = self.new_state(f"h_d{d}_t{t}", self.product_operand)
            cell = self.new_state(f"c_d{d}_t{t}", None)
            outputs |= {"h_out": ("h_new", Memlet(hidden.element)), "c_out": ("c_new", Memlet(cell.element))}
        self.gate_task(d, t, terms, code, outputs)
        return hidden, cell

    def gru_step(self, d, t, xw, r_t, hidden: State | None, cell, last: bool):
        spec, T, H = self.spec, self.T, self.spec.hidden
        act_f, act_g = spec.activations[d]
        products = {}
        if hidden is not None and spec.linear_before_reset:
            hr = self.hidden_product(d, t, hidden, r_t, 0, spec.width, "hidden")
            products = {g: (hr, k * H) for k, g in enumerate(spec.cell.gates)}
        elif hidden is not None:
            hr = self.hidden_product(d, t, hidden, r_t, 0, 2 * H, "hidden_zr")
            products = {"z": (hr, 0), "r": (hr, H)}
            reset_terms = self.gate_terms(d, t, xw, products, ("r",))
            reset_terms.memlets["h_prev"] = Memlet(hidden.element)
            reset = self.new_state(f"reset_d{d}_t{t}", self.product_operand)
            self.steps.flat_map(
                f"reset_d{d}_t{t}",
                {"__b": f"0:{spec.batch}", "__j": f"0:{H}"},
                reset_terms.memlets,
                self.preactivation(reset_terms, "r") + f"rh = {act_f.expression('p_r', T)} * h_prev",
                {"rh": Memlet(reset.element)},
            )
            products["h"] = (self.hidden_product(d, t, reset, r_t, 2 * H, H, "hidden_h"), 0)
        terms = self.gate_terms(d, t, xw, products, spec.cell.gates)
        if hidden is not None:
            terms.memlets["h_prev"] = Memlet(hidden.element)
        code = self.preactivation(terms, "z") + f"g_z = {act_f.expression('p_z', T)}\n"
        scaled = ""
        if terms.recurrent.get("h"):
            code += self.preactivation(terms, "r") + f"g_r = {act_f.expression('p_r', T)}\n"
            scaled = f"g_r * ({' + '.join(terms.recurrent['h'])})"
        code += self.preactivation(terms, "h", scaled) + f"g_h = {act_g.expression('p_h', T)}\n"
        code += f"h_new = ({T}(1) - g_z) * g_h" + (" + g_z * h_prev\n" if hidden is not None else "\n")
        outputs = self.program_outputs(d, t, last, "h_new")
        if not last:  # read by the next hidden product(s), the next gate task (and reset task)
            hidden = self.new_state(f"h_d{d}_t{t}", BufferReason.REUSE)
            outputs["h_out"] = ("h_new", Memlet(hidden.element))
        self.gate_task(d, t, terms, code, outputs)
        return hidden, None

    def rnn_step(self, d, t, xw, r_t, hidden: State | None, cell, last: bool):
        spec, T = self.spec, self.T
        products = {}
        if hidden is not None:
            products = {"h": (self.hidden_product(d, t, hidden, r_t, 0, spec.width, "hidden"), 0)}
        terms = self.gate_terms(d, t, xw, products, ("h",))
        code = self.preactivation(terms, "h") + f"h_new = {spec.activations[d][0].expression('p_h', T)}\n"
        outputs = self.program_outputs(d, t, last, "h_new")
        if not last:
            hidden = self.new_state(f"h_d{d}_t{t}", self.product_operand)
            outputs["h_out"] = ("h_new", Memlet(hidden.element))
        self.gate_task(d, t, terms, code, outputs)
        return hidden, None


def build_recurrent_sdfg(steps: ExpansionBuilder, spec: Recurrence, implementation: str) -> SDFG:
    """The nested SDFG of a recurrent node in ``steps`` (its arguments added): see the module docstring."""
    builder = RecurrentBuilder(steps, spec, implementation)
    directions = len(spec.reversed)
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


class _Recurrent(CanonicalForward):
    """A recurrent cell through MMM (see the module docstring); subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        recurrence(node, state, sdfg)

    @classmethod
    def forward(cls, node, state, sdfg):
        spec = recurrence(node, state, sdfg)
        drop = ["sequence_lens"] if input_edge(node, state, "sequence_lens") is not None else []
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
