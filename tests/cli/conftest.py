"""Fixtures shared by the CLI tests.

- ``npu_chain``: a Conv, Relu, Resize, Conv, Relu chain as an ONNX file and a design whose NPU runs the
  Conv+Relu pairs (paths, written once per session).
"""

import pytest


@pytest.fixture(scope="session")
def npu_chain(tmp_path_factory) -> tuple[str, str]:
    """The ONNX file of a Conv, Relu, Resize, Conv, Relu chain and the YAML design of an NPU that runs the
    Conv+Relu pairs, as paths."""
    import onnx
    import yaml

    from tests.transforms.offload_models import NPU, conv_chain

    folder = tmp_path_factory.mktemp("npu-chain")
    model, design = folder / "chain.onnx", folder / "npu.yaml"
    onnx.save(conv_chain("Resize"), model)
    design.write_text(yaml.safe_dump(NPU))
    return str(model), str(design)
