"""A step's place in its program: the bytes the whole program moves."""

import pytest

from dcaccel.costmodel.features import program_context


@pytest.mark.parametrize(
    ("moved", "program_bytes"),
    [([(4.0, 8.0), (8.0, 16.0), (20.0, 2.0)], 58.0), ([(0.0, 4.0)], 4.0), ([], 0.0)],
)
def test_the_program_bytes_are_every_steps(moved, program_bytes):
    features = [{"bytes_in": bytes_in, "bytes_out": bytes_out, "kind": "map"} for bytes_in, bytes_out in moved]
    assert program_context(features) == {"program_bytes": program_bytes}
