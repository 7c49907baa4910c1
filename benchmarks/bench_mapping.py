"""Mapping search: the decoupled search against the exhaustive search of the same bounded space.

Layers: the seed conv, LeNet's two convolutions, a 1×1 conv, a depthwise 3×3 conv and a GEMM, on
the ``eyeriss`` description, objective EDP, 16 PEs, both schedulers, fusion on and off. Prints one
row per layer (space size, mappings scheduled, seconds and objective of both searches, the ratio of
the objectives and of the evaluations), then the whole-network decoupled search of ResNet-18 (its
products searched, every other node placed canonically and counted) with its wall time
(``--skip-resnet`` leaves it out). Run on demand: ``python benchmarks/bench_mapping.py``.
"""

import argparse
import time
import warnings
from dataclasses import asdict, dataclass

import pandas as pd
import torch

import dcaccel
from dcaccel.mapping import map_workload
from dcaccel.mapping.layers import MAPPED_OPS, mapped_layers
from dcaccel.workloads import get

ARCH = "eyeriss"
OPTIONS = {"objective": "edp", "pes": (16,), "top_k": 4}


@dataclass
class Row:
    layer: str
    space_size: int
    decoupled_evaluations: int
    exhaustive_evaluations: int
    evaluation_ratio: float
    decoupled_seconds: float
    exhaustive_seconds: float
    decoupled_edp: float
    exhaustive_edp: float
    objective_ratio: float


def _torch_layer(name, module, shape):
    return dcaccel.load(module.eval(), torch.zeros(*shape), name=name)


def layers():
    torch.manual_seed(0)
    lenet = get("lenet").onnx_model
    conv1, conv2 = (layer.model for layer in mapped_layers(lenet)[:2])
    return {
        "conv-seed": "conv-seed",
        "lenet conv1": conv1,
        "lenet conv2": conv2,
        "1x1 conv 64→128, 28×28": _torch_layer("conv1x1", torch.nn.Conv2d(64, 128, 1), (1, 64, 28, 28)),
        "depthwise 3×3, 32 ch, 28×28": _torch_layer(
            "depthwise", torch.nn.Conv2d(32, 32, 3, padding=1, groups=32), (1, 32, 28, 28)
        ),
        "GEMM 64×256 · 256×128": _torch_layer("gemm", torch.nn.Linear(256, 128), (64, 256)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-resnet", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for name, workload in layers().items():
        decoupled = map_workload(workload, ARCH, search="decoupled", **OPTIONS)
        exhaustive = map_workload(workload, ARCH, search="exhaustive", **OPTIONS)
        rows.append(
            Row(
                name,
                exhaustive.space_size,
                decoupled.evaluations,
                exhaustive.evaluations,
                exhaustive.evaluations / decoupled.evaluations,
                decoupled.seconds,
                exhaustive.seconds,
                decoupled.objective,
                exhaustive.objective,
                decoupled.objective / exhaustive.objective,
            )
        )
        print(pd.DataFrame([asdict(rows[-1])]).to_string(index=False, header=len(rows) == 1), flush=True)
    print()
    print(pd.DataFrame([asdict(row) for row in rows]).to_string(index=False))
    if not args.skip_resnet:
        start = time.perf_counter()
        result = map_workload("resnet18", ARCH, search="decoupled", **OPTIONS)
        seconds = time.perf_counter() - start
        print()
        columns = ["layer", "op_type", "evaluations", "seconds", "objective", "mapping", "shared_with"]
        print(result.table()[columns].to_string())
        mapped = sum(row.op_type in MAPPED_OPS for row in result.layers)
        print(
            f"resnet18 on {ARCH}: {len(result.layers)} nodes counted ({mapped} searched products), "
            f"{len(result.uncounted)} uncounted, space {result.space_size}, {result.evaluations} mappings "
            f"scheduled, EDP {result.objective:.4g}, {seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
