"""The builder's propagated nests: a nest built from the memo carries the memlets DaCe's propagation gives."""

import dace
import pytest

from dcaccel.expansions.builder import ExpansionBuilder, PropagatedNests


def _edges(state: dace.SDFGState) -> list[str]:
    """Every edge of ``state`` with its memlet, subset, volume and WCR, in a stable order."""
    return sorted(
        f"{edge.src}:{edge.src_conn}->{edge.dst}:{edge.dst_conn} {edge.data} {edge.data.volume} {edge.data.wcr}"
        for edge in state.edges()
    )


def _im2col(builder: ExpansionBuilder, stride: int, kernel: int) -> None:
    """A strided im2col-like task map (reads X twice, as a convolution's patches overlap) and a reduction."""
    size = 9
    out = (size - kernel) // stride + 1
    builder.argument("X", dace.data.Array(dace.float32, (3, size, size)))
    cols = builder.transient("cols", (out * out, 3 * kernel * kernel), dace.float32)
    builder.task_map(
        "im2col",
        {"p": f"0:{out * out}"},
        "patch",
        {"c": "0:3", "kh": f"0:{kernel}", "kw": f"0:{kernel}"},
        {
            "x": dace.Memlet(f"X[c, (p // {out}) * {stride} + kh, (p % {out}) * {stride} + kw]"),
            "y": dace.Memlet(f"X[c, (p // {out}) * {stride}, (p % {out}) * {stride}]"),
        },
        "z = x + y",
        {"z": dace.Memlet(f"{cols}[p, c * {kernel * kernel} + kh * {kernel} + kw]")},
    )
    total = builder.transient("total", (1,), dace.float32)
    builder.flat_map(
        "sum",
        {"i": f"0:{out * out}", "j": f"0:{3 * kernel * kernel}"},
        {"v": dace.Memlet(f"{cols}[i, j]")},
        "s = v",
        {"s": dace.Memlet(f"{total}[0]", wcr="lambda a, b: a + b")},
    )


@pytest.mark.parametrize(("stride", "kernel"), [(1, 3), (2, 3), (2, 1), (1, 9)])
def test_memo_gives_dace_propagation(monkeypatch, stride, kernel):
    """The second build of a nest (from the memo) has exactly the edges of the first (DaCe's propagation),
    including the propagated subsets, volumes and WCR of the outer memlets."""
    nests = PropagatedNests()
    monkeypatch.setattr("dcaccel.expansions.builder.PROPAGATED", nests)
    first = ExpansionBuilder("first")
    _im2col(first, stride, kernel)
    assert len(nests) == 2
    hits = []
    monkeypatch.setattr(nests, "get", lambda key: hits.append(key) or PropagatedNests.get(nests, key))
    second = ExpansionBuilder("second")
    _im2col(second, stride, kernel)
    assert len(hits) == 2
    assert _edges(second.state) == _edges(first.state)
    second.sdfg.validate()


def test_memo_key_separates_shapes(monkeypatch):
    """A nest over a container of another shape is propagated anew (the shape bounds the propagation)."""
    nests = PropagatedNests()
    monkeypatch.setattr("dcaccel.expansions.builder.PROPAGATED", nests)
    _im2col(ExpansionBuilder("a"), 1, 3)
    _im2col(ExpansionBuilder("b"), 2, 3)
    assert len(nests) == 4


@pytest.mark.parametrize("capacity", [1, 2, 3])
def test_memo_capacity(capacity):
    """At most ``capacity`` nests are kept, the oldest forgotten first."""
    nests = PropagatedNests(capacity)
    for key in range(4):
        nests.put((key,), [[dace.Memlet(f"A[{key}]")]])
    kept = [key for key in range(4) if nests.get((key,)) is not None]
    assert kept == list(range(4 - capacity, 4))
    assert str(nests.get((3,))[0][0].subset) == "3"
