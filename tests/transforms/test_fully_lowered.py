"""Every built-in workload, under every implementation choice of its matrix multiplies, lowers to maps
only: no ONNX or other library node, no opaque tasklet standing for a whole op (nothing compiled)."""

import pytest

from dcaccel import workloads
from dcaccel.transforms.checks import assert_fully_lowered

SHAPES = ("mv", "op", "lmv")
#: workload (with small sizes where the default is large) → the op types whose implementation is chosen
CHOICES = {
    ("conv-seed", ()): ("Conv",),
    ("lenet", ()): ("Conv", "Gemm"),
    ("mobilenetv2-block", (("channels", 8), ("image", 7))): ("Conv",),
    ("transformer-encoder", ()): ("MatMul",),
    ("mmm", ()): ("MatMul",),
    ("pusch-mimo", ()): ("MatMul",),
    ("resnet18", (("image", 64),)): ("Conv", "Gemm"),
}
CASES = [
    pytest.param(
        name,
        dict(sizes),
        {op: shape if shape != "direct" or op == "Conv" else "mv" for op in ops},
        id=f"{name}-{shape}",
        marks=[pytest.mark.slow] if name == "resnet18" else [],
    )
    for (name, sizes), ops in CHOICES.items()
    for shape in (*SHAPES, "direct") if shape != "direct" or "Conv" in ops
]  # fmt: skip


@pytest.fixture(scope="module")
def built():
    cache = {}

    def get(name, sizes):
        key = (name, tuple(sorted(sizes.items())))
        if key not in cache:
            cache[key] = workloads.get(name, **sizes)
        return cache[key]

    return get


@pytest.mark.parametrize(("name", "sizes", "choices"), CASES)
def test_lowered_workload_is_maps_only(name, sizes, choices, built):
    lowered = built(name, sizes).lower(choices)
    assert_fully_lowered(lowered.sdfg)
    assert set(lowered.implementations.values()) <= {*choices.values(), "canonical"}
