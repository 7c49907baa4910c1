"""Small rows of known times for the tests of the models and metrics (no measuring)."""

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
