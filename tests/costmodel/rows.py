"""Small rows of known times for the tests of the models and metrics (no measuring)."""

import numpy as np

from dcaccel.costmodel.features import CACHE
from dcaccel.costmodel.measure import Provenance, Row, Timing

PROVENANCE = Provenance("0.1.0", "2.0.0b1", "0" * 16, "test", 1)


def row(family: str, program: str, assignment: str, step: str, work: float, ns: float, op: str = "Conv") -> Row:
    """A map step of ``work`` elements measured at ``ns`` nanoseconds."""
    features = {
        "kind": "map",
        "op": op,
        "implementation": assignment,
        **dict.fromkeys(
            ("iterations", "depth", "volume_in", "volume_out", "elements_in", "elements_out", "bytes_in"), work
        ),
        **dict.fromkeys(("bytes_out", "reads", "writes", "macs", "ops", "work", "buffers_in", "buffers_out"), work),
        **dict.fromkeys(("accumulate", "itemsize", "unit_stride", "tasklets", "stride_bytes", "stride_twos"), 1.0),
        "inner_iterations": work,
        "same_shape": 0.0,
        "vector_loop": 0.0,
        "atomic_writes": 0.0,
        **dict.fromkeys(CACHE, 1 / 16),
        "program_bytes": 2 * work,
    }
    return Row(
        program=program,
        family=family,
        assignment={"n": assignment},
        sizes={},
        step=step,
        label=step,
        features=features,
        tokens=["MAP", f"R{int(work).bit_length()}", "TASKLET", "OUT", "=", "IN"],
        timing=Timing(ns, ns, ns, ns, 5),
        provenance=PROVENANCE,
        analytic=work,
    )


#: The prices (ns) of a miss of each level that :func:`missing` measures its steps at.
PRICES = {"l1_misses": 0.3, "l2_misses": 1.0, "dtlb_misses": 2.0, "stlb_misses": 5.0}


#: The constant each kind of step is measured at by :func:`missing` (ns a unit).
CONSTANTS = {"map_ns": 0.1, "vector_ns": 0.02, "copy_ns": 0.05}

#: The price (ns) of an atomic write that :func:`missing` measures its steps at.
ATOMIC_NS = 4.0


def missing(work: float, rates: dict[str, float], copy: bool = False, vector: bool = False, atomic: float = 0.0):
    """A step of ``work`` units at ``rates`` misses per access and ``atomic`` atomic writes per unit, measured at
    its kind's constant (:data:`CONSTANTS`: a map, a map whose loop is vectorised, a copy) plus :data:`PRICES`
    per miss, 2 accesses a unit (its volumes in and out are its work), plus :data:`ATOMIC_NS` per atomic write."""
    kind = "copy_ns" if copy else "vector_ns" if vector else "map_ns"
    ns = work * (CONSTANTS[kind] + 2 * sum(PRICES[level] * rates[level] for level in CACHE) + ATOMIC_NS * atomic)
    step = row("f", "w", "a", f"t{len(rates)}", work, ns)
    step.features.update(rates, vector_loop=float(vector), atomic_writes=atomic * work)
    if copy:
        step.features.update(kind="copy", bytes_out=work)
    return step


#: 24 sets of miss rates, 0 to 0.5 per access at each level.
RATES = [dict(zip(CACHE, values, strict=True)) for values in np.random.default_rng(0).uniform(0, 0.5, (24, 4))]
