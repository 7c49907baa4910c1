"""Fixtures shared by the whole test suite.

- Every test session compiles SDFGs into its own DaCe build folder (under pytest's temporary
  directory), so that concurrent sessions never collide. DaCe is configured without being imported
  here: tests that need no DaCe do not pay for it. DaCe records no source line per node (the stack
  inspection for it costs 6-17 % of building a small model).
- ``rng``: a seeded numpy generator.
- ``two_task_chain``: source → A → B, 4 elements on each edge, a fresh task DAG per test.
- ``conv_seed``, ``lenet``, ``mmm``: built-in workloads, one per session, so that each is compiled
  at most once (compiled programs are cached by SDFG content).
- ``builtin_workload``, ``lowered_workload``: built-in workloads at given sizes, loaded once per session
  and lowered once per choice of implementations (lowering ResNet-18 takes about ten seconds, and
  several test modules lower the same networks).
"""

import os
import sys

import numpy as np
import pytest


@pytest.fixture(scope="session", autouse=True)
def dace_build_folder(tmp_path_factory):
    """A DaCe build folder of this test session (also passed to subprocesses through the environment)."""
    folder = str(tmp_path_factory.mktemp("dacecache"))
    previous = os.environ.get("DACE_default_build_folder")
    os.environ["DACE_default_build_folder"] = folder
    if "dace" in sys.modules:
        sys.modules["dace"].config.Config.set("default_build_folder", value=folder)
    yield folder
    if previous is None:
        os.environ.pop("DACE_default_build_folder", None)
    else:
        os.environ["DACE_default_build_folder"] = previous


@pytest.fixture(scope="session", autouse=True)
def dace_without_line_info():
    """DaCe records no source line per node it adds (``compiler.lineinfo: none``, also for subprocesses): its
    default inspects the Python stack for every node it adds: 6 % of the CPU time of loading and lowering LeNet,
    17 % for a two-node model. Only debug information changes, never a program or a number."""
    previous = os.environ.get("DACE_compiler_lineinfo")
    os.environ["DACE_compiler_lineinfo"] = "none"
    if "dace" in sys.modules:
        sys.modules["dace"].config.Config.set("compiler", "lineinfo", value="none")
    yield
    if previous is None:
        os.environ.pop("DACE_compiler_lineinfo", None)
    else:
        os.environ["DACE_compiler_lineinfo"] = previous


@pytest.fixture
def rng() -> np.random.Generator:
    """A numpy generator with a fixed seed."""
    return np.random.default_rng(0)


@pytest.fixture
def two_task_chain():
    """source → A → B, 4 elements on each edge: on 2 PEs the edge A → B streams (A 0..4, B 1..5)."""
    from dcaccel.dag.taskdag import NodeKind, TaskDAG

    dag = TaskDAG("chain")
    source = dag.add_node(NodeKind.SOURCE, "source")
    a = dag.add_node(NodeKind.TASK, "A")
    b = dag.add_node(NodeKind.TASK, "B")
    dag.add_edge(source, a, 4)
    dag.add_edge(a, b, 4)
    return dag


@pytest.fixture(scope="session")
def conv_seed():
    """The ``conv-seed`` workload (one per session)."""
    from dcaccel import workloads

    return workloads.get("conv-seed")


@pytest.fixture(scope="session")
def lenet():
    """The ``lenet`` workload (one per session)."""
    from dcaccel import workloads

    return workloads.get("lenet")


@pytest.fixture(scope="session")
def mmm():
    """The ``mmm`` workload (one per session)."""
    from dcaccel import workloads

    return workloads.get("mmm")


@pytest.fixture(scope="session")
def builtin_workload():
    """``builtin_workload(name, **sizes)``: the built-in workload ``name`` at ``sizes``, loaded once per session."""
    from dcaccel import workloads

    loaded = {}

    def get(name: str, **sizes):
        key = (name, tuple(sorted(sizes.items())))
        if key not in loaded:
            loaded[key] = workloads.get(name, **sizes)
        return loaded[key]

    return get


@pytest.fixture(scope="session")
def lowered_workload(builtin_workload):
    """``lowered_workload(name, choices=None, **sizes)``: the built-in workload ``name`` at ``sizes`` lowered
    under ``choices``, once per session. Tests read what it returns, never modify it."""
    lowered = {}

    def get(name: str, choices=None, **sizes):
        key = (name, tuple(sorted(sizes.items())), tuple(sorted((choices or {}).items())))
        if key not in lowered:
            lowered[key] = builtin_workload(name, **sizes).lower(choices)
        return lowered[key]

    return get
