"""Every built-in workload, under every implementation choice of its matrix multiplies, lowers to maps
only: no ONNX or other library node, no opaque tasklet standing for a whole op (nothing compiled). The
lowered workloads are shared with the other test modules (``lowered_workload`` in ``tests/conftest.py``)."""

import pytest

from dcaccel.transforms.checks import assert_fully_lowered

SHAPES = ("mv", "op", "lmv")
#: (workload, shape) lowerings of seconds each, besides ResNet-18: the full suite only. LeNet and the MobileNetV2
#: block lower under mv in the fast subset (tests/dag/test_extract.py shares these lowerings).
SLOW = {
    ("transformer-encoder", "op"),
    ("transformer-encoder", "lmv"),
    *((name, shape) for name in ("lenet", "mobilenetv2-block") for shape in ("op", "lmv", "direct")),
    ("pusch-mimo", "op"),
    ("pusch-mimo", "lmv"),
}
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
        marks=[pytest.mark.slow] if name == "resnet18" or (name, shape) in SLOW else [],
    )
    for (name, sizes), ops in CHOICES.items()
    for shape in (*SHAPES, "direct") if shape != "direct" or "Conv" in ops
]  # fmt: skip


@pytest.mark.parametrize(("name", "sizes", "choices"), CASES)
def test_lowered_workload_is_maps_only(name, sizes, choices, lowered_workload):
    lowered = lowered_workload(name, choices, **sizes)
    assert_fully_lowered(lowered.sdfg)
    assert set(lowered.implementations.values()) <= {*choices.values(), "canonical"}
