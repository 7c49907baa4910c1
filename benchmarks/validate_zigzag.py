"""ZigZag as the peer: its numbers for LeNet and ResNet-18 on its shipped ``tpu_like`` and ``eyeriss_like``
designs, and dcaccel's beside them (``docs/validation.md`` explains how ZigZag counts).

Two sides in one file. The ZigZag side runs in ZigZag's own environment (``--zigzag-python``, a venv
with ``zigzag-dse==3.9.1 six``; this file's top level imports the standard library only, so that
interpreter can run it): it evaluates every Conv/Gemm layer of an ONNX model with ZigZag's stages
(ONNX parser, accelerator parser, layer iterator, spatial-mapping search, LOMA temporal mappings,
cost model; best latency per layer, as ``zigzag.api.get_hardware_performance_zigzag`` with its
defaults, minus its result files and plots) and writes per layer the cycles, energy (total, MAC,
per memory level and operand), the accesses and bytes moved at every level (DRAM included), the
MACs, the chosen mappings and ZigZag's wall time. The dcaccel side exports the built-in workload
to ONNX at batch 1 (dcaccel's own export, node names as dcaccel names them), runs the ZigZag side,
stores its numbers in ``benchmarks/data/zigzag_<design>_<model>.json`` with the command and the
versions, imports the design (``dcaccel arch import zigzag``, kept as
``benchmarks/data/zigzag_<design>.arch.yaml``), runs ``dcaccel map MODEL --arch THAT --search loopnest
--objective makespan --json`` (the loop-nest model with data reuse, best cycles per layer as ZigZag's
search) and prints one table per pair with dcaccel's cycles, energy and DRAM bytes beside ZigZag's.

    python benchmarks/validate_zigzag.py --zigzag-python /work/venvs/zigzag/bin/python   # ZigZag and dcaccel
    python benchmarks/validate_zigzag.py --from-data        # ZigZag's committed numbers, dcaccel run again
    python benchmarks/validate_zigzag.py --from-data --skip-dcaccel   # the committed table only
    python benchmarks/validate_zigzag.py --zigzag-python ... --time-one-evaluation --models resnet18 --designs tpu_like

Beside each table: the worst layer's factor, the whole network (``--whole-network``: every operator,
activations kept on chip, overlap) against the layer sums, and ZigZag's own mappings costed by dcaccel
(the two models without their searches). ``--time-one-evaluation`` times ZigZag's API with the design's
shipped mapping file and ``dcaccel map MODEL --search loopnest --json`` one after the other, wall and CPU.

ZigZag on ResNet-18 takes 5 to 26 minutes per design here (its wall time per layer is in the files);
``dcaccel map resnet18 --search loopnest`` well under a minute.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ZIGZAG_VERSION = "3.9.1"
MODELS = ("lenet", "resnet18")
DESIGNS = ("tpu_like", "eyeriss_like")
OPERANDS = ("W", "I", "O")
DATA = Path(__file__).resolve().parent / "data"
#: The ``dcaccel`` command, run by this interpreter.
DCACCEL = [sys.executable, "-W", "ignore", "-c", "import sys; from dcaccel.cli import main; sys.exit(main())"]

#: ZigZag's mapping input: only the default entry with the operand links of its shipped designs
#: (activations I → memory operand I1, weights W → I2, outputs O → O) and no ``spatial_mapping``,
#: so that ZigZag searches the spatial mapping of every layer (SpatialMappingGeneratorStage).
MAPPING_YAML = "- name: default\n  memory_operand_links:\n    O: O\n    W: I2\n    I: I1\n"

#: The settings of ``get_hardware_performance_zigzag`` (ZigZag 3.9.1 defaults) the ZigZag side uses.
ZIGZAG_OPTIONS = {
    "opt": "latency",
    "temporal_mapping_search_engine": "loma",
    "temporal_mapping_type": "uneven",
    "lpf_limit": 6,
    "nb_spatial_mappings_generated": 3,
    "enable_mix_spatial_mapping": False,
    "exploit_data_locality": False,
    "access_same_data_considered_as_no_access": True,
}


# ---------------------------------------------------------------------------------------------
# ZigZag side (runs under --zigzag-python; imports zigzag, never dcaccel)


def zigzag_side(onnx_path: str, design: str, out_path: str) -> None:
    """Evaluate every Conv/Gemm layer of ``onnx_path`` on ZigZag's shipped ``design``; write the JSON."""
    import importlib.metadata
    import logging

    import zigzag
    from zigzag.mapping.temporal_mapping import TemporalMappingType
    from zigzag.stages.evaluation.cost_model_evaluation import CostModelStage
    from zigzag.stages.main import MainStage
    from zigzag.stages.mapping.spatial_mapping_generation import SpatialMappingGeneratorStage
    from zigzag.stages.mapping.temporal_mapping_generator_stage import TemporalMappingGeneratorStage
    from zigzag.stages.parser.accelerator_parser import AcceleratorParserStage
    from zigzag.stages.parser.onnx_model_parser import ONNXModelParserStage
    from zigzag.stages.results.reduce_stages import MinimalLatencyStage
    from zigzag.stages.stage import Stage
    from zigzag.stages.workload_iterator import WorkloadStage

    logging.basicConfig(level=logging.WARNING)
    hardware = Path(zigzag.__file__).parent / "inputs" / "hardware" / f"{design}.yaml"
    seconds: list[float] = []

    class TimedLayerStage(Stage):
        """Passes each layer's best evaluation on and records the wall time its search took."""

        def run(self):
            start = time.perf_counter()
            for cme, extra_info in self.list_of_callables[0](self.list_of_callables[1:], **self.kwargs).run():
                seconds.append(time.perf_counter() - start)
                yield cme, extra_info
                start = time.perf_counter()

    with tempfile.TemporaryDirectory() as folder:
        mapping = Path(folder) / "mapping.yaml"
        mapping.write_text(MAPPING_YAML, encoding="utf-8")
        stages = [
            ONNXModelParserStage,
            AcceleratorParserStage,
            WorkloadStage,
            TimedLayerStage,
            MinimalLatencyStage,
            SpatialMappingGeneratorStage,
            MinimalLatencyStage,
            TemporalMappingGeneratorStage,
            CostModelStage,
        ]
        start = time.perf_counter()
        answers = MainStage(
            stages,
            accelerator=str(hardware),
            workload=onnx_path,
            mapping=str(mapping),
            loma_lpf_limit=ZIGZAG_OPTIONS["lpf_limit"],
            loma_show_progress_bar=False,
            nb_mappings_generated=ZIGZAG_OPTIONS["nb_spatial_mappings_generated"],
            enable_mix_spatial_mapping_generation=ZIGZAG_OPTIONS["enable_mix_spatial_mapping"],
            access_same_data_considered_as_no_access=ZIGZAG_OPTIONS["access_same_data_considered_as_no_access"],
            temporal_mapping_type=TemporalMappingType(ZIGZAG_OPTIONS["temporal_mapping_type"]),
        ).run()
        total_seconds = time.perf_counter() - start
    layers = [_layer_record(cme, wall) for (cme, _), wall in zip(answers, seconds, strict=True)]
    versions = {name: importlib.metadata.version(name) for name in ("zigzag-dse", "numpy", "onnx", "sympy")}
    result = {
        "peer": "zigzag",
        "design": design,
        "hardware_file": f"zigzag/inputs/hardware/{design}.yaml",
        "hardware_sha256": hashlib.sha256(hardware.read_bytes()).hexdigest(),
        "mapping_yaml": MAPPING_YAML,
        "options": ZIGZAG_OPTIONS,
        "versions": {**versions, "python": platform.python_version()},
        "wall_seconds": total_seconds,
        "layers": layers,
    }
    Path(out_path).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def _layer_record(cme, wall_seconds: float) -> dict:
    """One layer's numbers from ZigZag's CostModelEvaluation (its own attributes, nothing recomputed
    except the bits moved, which are its data-movement pattern without the rounding to words)."""
    from zigzag.mapping.data_movement import DataMoveAttr

    layer = cme.layer
    hierarchy = cme.accelerator.memory_hierarchy
    operands = {}
    for layer_op in layer.layer_operands:
        mem_op = cme.memory_operand_links.layer_to_mem_op(layer_op)
        memories = hierarchy.get_memory_levels(mem_op)
        levels = []
        for index, accesses in enumerate(cme.memory_word_access[layer_op]):
            memory = memories[index]
            pattern = cme.mapping.unit_mem_data_movement[layer_op][index]
            amount = pattern.get_attribute(DataMoveAttr.DATA_TRANS_AMOUNT_PER_PERIOD)
            precision = pattern.get_attribute(DataMoveAttr.DATA_PRECISION)
            periods = pattern.get_attribute(DataMoveAttr.DATA_TRANS_PERIOD_COUNT)
            units = cme.mapping.spatial_mapping.unit_count[layer_op][index + 1]
            levels.append(
                {
                    "memory": memory.name,
                    "instances": units,
                    "word_accesses": {str(d): accesses.get(d) for d in accesses.data},
                    "bits": {str(d): amount.get(d) * precision.get(d) * periods.get(d) * units for d in amount.data},
                    "energy_pj": cme.mem_energy_breakdown[layer_op][index],
                    "energy_by_direction_pj": {
                        str(d): v for d, v in cme.mem_energy_breakdown_further[layer_op][index].data.items()
                    },
                }
            )
        operands[str(layer_op)] = {"memory_operand": str(mem_op), "levels": levels}
    return {
        "layer": layer.name,
        "op_type": layer.type,
        "loop_sizes": {str(dim): size for dim, size in layer.layer_dim_sizes.items()},
        "precision_bits": {str(op): bits for op, bits in layer.operand_precision.data.items()},
        "macs": layer.total_mac_count,
        "cycles": cme.latency_total2,
        "ideal_cycles": cme.ideal_cycle,
        "ideal_temporal_cycles": cme.ideal_temporal_cycle,
        "stall_slack_cycles": cme.stall_slack_comb,
        "onloading_cycles": cme.data_onloading_cycle,
        "offloading_cycles": cme.data_offloading_cycle,
        "systolic_drain_cycles": cme.systolic_drain_cycle,
        "spatial_utilization": cme.mac_spatial_utilization,
        "utilization": cme.mac_utilization2,
        "energy_pj": cme.energy_total,
        "mac_energy_pj": cme.mac_energy,
        "memory_energy_pj": cme.mem_energy,
        "operands": operands,
        "spatial_mapping": str(cme.layer.spatial_mapping),
        "temporal_mapping": str(cme.temporal_mapping),
        "wall_seconds": wall_seconds,
    }


def zigzag_api_side(onnx_path: str, design: str, out_path: str) -> None:
    """One evaluation of ``onnx_path`` on ZigZag's shipped ``design`` with its shipped mapping file (the
    spatial mapping fixed, LOMA's temporal search), as ``zigzag.api.get_hardware_performance_zigzag`` runs it
    with its defaults; write its cycles, energy and wall time."""
    import zigzag
    from zigzag.api import get_hardware_performance_zigzag

    inputs = Path(zigzag.__file__).parent / "inputs"
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        energy, latency, _ = get_hardware_performance_zigzag(
            onnx_path,
            str(inputs / "hardware" / f"{design}.yaml"),
            str(inputs / "mapping" / f"{design}.yaml"),
            dump_folder=folder,
            loma_show_progress_bar=False,
        )
        seconds = time.perf_counter() - start
    result = {"cycles": latency, "energy_pj": energy, "seconds": seconds, "mapping_file": f"{design}.yaml"}
    Path(out_path).write_text(json.dumps(result) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# dcaccel side


def export_onnx(model: str, path: Path) -> None:
    """The built-in workload ``model`` at batch 1 as dcaccel exports it, nodes named as dcaccel names
    them (``conv1``, ``layer1_0_conv1``, ``fc``), shapes inferred (ZigZag reads them from value_info)."""
    import onnx

    from dcaccel.frontend.onnx_import import readable_node_names
    from dcaccel.workloads import get

    proto = readable_node_names(get(model).onnx_model)
    onnx.save(onnx.shape_inference.infer_shapes(proto, strict_mode=True), path)


def run_zigzag(zigzag_python: str, model: str, design: str, command: str) -> dict:
    """ZigZag's numbers for ``model`` on ``design`` (the ZigZag side, a subprocess), kept in ``benchmarks/data``."""
    with tempfile.TemporaryDirectory() as folder:
        onnx_path = Path(folder) / f"{model}.onnx"
        out_path = Path(folder) / "zigzag.json"
        export_onnx(model, onnx_path)
        subprocess.run(
            [zigzag_python, __file__, "--zigzag-side", str(onnx_path), design, str(out_path)],
            check=True,
        )
        result = json.loads(out_path.read_text(encoding="utf-8"))
    if result["versions"]["zigzag-dse"] != ZIGZAG_VERSION:
        raise SystemExit(f"{zigzag_python} runs zigzag-dse {result['versions']['zigzag-dse']}, not {ZIGZAG_VERSION}")
    result = {"model": model, "batch": 1, "command": command, "dcaccel_commit": _commit(), **result}
    _data_file(design, model).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def run_dcaccel(model: str, arch_file: Path, objective: str | None = "makespan", whole: bool = False) -> dict:
    """``dcaccel map MODEL --arch ARCH_FILE --search loopnest --objective OBJECTIVE [--whole-network] --json``
    (a subprocess: as a user runs it; ``objective`` None: map's default)."""
    command = [*DCACCEL, "map", model, "--arch", str(arch_file), "--search", "loopnest"]
    if objective is not None:
        command += ["--objective", objective]
    if whole:
        command.append("--whole-network")
    out = subprocess.run([*command, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def time_one_evaluation(zigzag_python: str, model: str, design: str) -> str:
    """ZigZag's API on ``model`` with the design's shipped mapping file, then ``dcaccel map MODEL --arch
    <imported design> --search loopnest --json``, one after the other on this machine: both wall times."""
    with tempfile.TemporaryDirectory() as folder:
        onnx_path = Path(folder) / f"{model}.onnx"
        out_path = Path(folder) / "zigzag.json"
        export_onnx(model, onnx_path)
        wall, cpu = _timed(
            lambda: subprocess.run(
                [zigzag_python, __file__, "--zigzag-api", str(onnx_path), design, str(out_path)], check=True
            )
        )
        zigzag = json.loads(out_path.read_text(encoding="utf-8"))
    arch_file = DATA / f"zigzag_{design}.arch.yaml"
    mine = {}
    my_wall, my_cpu = _timed(lambda: mine.update(run_dcaccel(model, arch_file, objective=None)))
    return (
        f"{model} on {design}, one evaluation: ZigZag {ZIGZAG_VERSION} API with {zigzag['mapping_file']} "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU ({zigzag['cycles']:,.0f} cycles, {zigzag['energy_pj'] / 1e6:.2f} µJ); "
        f"dcaccel map --search loopnest --json {my_wall:.1f} s wall, {my_cpu:.1f} s CPU "
        f"({mine['totals']['cycles']:,.0f} cycles, {mine['totals']['energy_pj'] / 1e6:.2f} µJ): "
        f"{my_wall / wall:.2f} of ZigZag's wall time, {my_cpu / cpu:.2f} of its CPU time"
    )


def _timed(run) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the child processes) of ``run()``."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    run()
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - start
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_design(zigzag_python: str | None, design: str) -> Path:
    """``benchmarks/data/zigzag_<design>.arch.yaml``: ZigZag's shipped design imported by ``dcaccel arch
    import zigzag`` (imported again when ZigZag's interpreter is given, else the committed file)."""
    arch_file = DATA / f"zigzag_{design}.arch.yaml"
    if zigzag_python:
        locate = "import zigzag, pathlib; print(pathlib.Path(zigzag.__file__).parent.parent)"
        packages = subprocess.run([zigzag_python, "-c", locate], check=True, capture_output=True, text=True)
        subprocess.run(
            [*DCACCEL, "arch", "import", "zigzag", f"zigzag/inputs/hardware/{design}.yaml", "-o", str(arch_file)],
            check=True,
            cwd=packages.stdout.strip(),  # the file is named as in ZigZag's package in the comments
        )
    return arch_file


def summary(zigzag: dict, dcaccel: dict | None = None) -> list[dict]:
    """One row of numbers per ZigZag layer (MACs, cycles, energy, DRAM bytes per operand, ZigZag's
    seconds; dcaccel's cycles and energy of the same layer when given) and a last row of totals."""
    mine = {row["layer"]: row for row in dcaccel["layers"]} if dcaccel else {}
    rows = []
    for layer in zigzag["layers"]:
        dram = dram_bytes(layer)
        row = {
            "layer": layer["layer"],
            "macs": layer["macs"],
            "cycles": layer["cycles"],
            "energy_pj": layer["energy_pj"],
            **{f"dram_{operand}": dram[operand] for operand in OPERANDS},
            "seconds": layer["wall_seconds"],
        }
        if dcaccel:
            if layer["layer"] not in mine:
                raise SystemExit(f"dcaccel map {dcaccel['workload']} has no layer {layer['layer']}")
            row["dc_cycles"] = mine[layer["layer"]]["cycles"]
            row["dc_energy_pj"] = mine[layer["layer"]]["energy_pj"]
            row["dc_dram"] = mine[layer["layer"]]["offchip_bytes"]
        rows.append(row)
    total = {key: sum(row[key] for row in rows) for key in rows[0] if key != "layer"}
    return [*rows, {"layer": "total", **total}]


def table(zigzag: dict, dcaccel: dict | None = None) -> str:
    """:func:`summary` as text, with dcaccel's ratios to ZigZag (``x``) when dcaccel is given."""
    header = ["layer", "MACs", "zz cycles", "zz energy pJ", "zz DRAM B (W/I/O)", "zz s"]
    if dcaccel:
        header += ["dc cycles", "x", "dc energy pJ", "x", "dc DRAM B", "x"]
    lines = [header]
    for row in summary(zigzag, dcaccel):
        cells = [
            row["layer"],
            f"{row['macs']:,}",
            f"{row['cycles']:,.0f}",
            f"{row['energy_pj']:.4g}",
            "/".join(f"{row[f'dram_{operand}']:,}" for operand in OPERANDS),
            f"{row['seconds']:.1f}",
        ]
        if dcaccel:
            cells += [
                f"{row['dc_cycles']:,}",
                f"{row['dc_cycles'] / row['cycles']:.2f}",
                f"{row['dc_energy_pj']:.4g}",
                f"{row['dc_energy_pj'] / row['energy_pj']:.2f}",
                f"{row['dc_dram']:,.0f}",
                f"{row['dc_dram'] / sum(row[f'dram_{operand}'] for operand in OPERANDS):.2f}",
            ]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)) for line in lines)


#: ZigZag's array dimensions as ``dcaccel arch import zigzag`` names them on a 2-D mesh.
MESH = {"D1": "rows", "D2": "cols"}


def zigzag_mapping(layer: dict) -> tuple[tuple, tuple, dict[str, tuple[int, ...]]]:
    """ZigZag's chosen mapping of one layer as dcaccel's ``LayerMapping`` fields: the spatial unrolling
    ``(dimension, loop, factor)``, the temporal loops innermost first, and per operand the number of temporal
    loops inside each of its levels (read from the text ZigZag prints, ``{O: [[(FY, 3), ...], [], ...], ...}``)."""
    spatial = tuple(
        (MESH[dim], loop, int(factor))
        for dim, unrolled in re.findall(r"(D\d): \{([^{}]*)\}", layer["spatial_mapping"])
        for loop, factor in re.findall(r"(\w+): (\d+)", unrolled)
    )
    text = layer["temporal_mapping"]
    starts = list(re.finditer(r"(\w+): \[", text))
    levels = {}
    for start, end in zip(starts, [*starts[1:], None], strict=True):
        body = text[start.end() : end.start() if end else len(text)]
        levels[start.group(1)] = [
            [(loop, math.ceil(float(factor))) for loop, factor in re.findall(r"\((\w+), ([\d.]+)\)", level)]
            for level in re.findall(r"\[([^\[\]]*)\]", body)
        ]
    temporal = tuple(loop for level in levels["O"] for loop in level)
    boundaries = {operand: tuple(itertools.accumulate(len(level) for level in levels[operand])) for operand in OPERANDS}
    return spatial, temporal, boundaries


def same_mappings(zigzag: dict, arch_file: Path) -> list[dict]:
    """Per layer, dcaccel's cost of ZigZag's own mapping on the imported design beside ZigZag's (the two
    models compared without their searches)."""
    import onnx

    from dcaccel.architecture import load
    from dcaccel.cost.architecture import hierarchy
    from dcaccel.cost.evaluate import LayerMapping, evaluate
    from dcaccel.cost.nest import layer_nest
    from dcaccel.frontend.onnx_import import readable_node_names
    from dcaccel.mapping.layers import node_attributes, static_shapes
    from dcaccel.workloads import get

    model = readable_node_names(onnx.shape_inference.infer_shapes(get(zigzag["model"]).onnx_model))
    shapes = static_shapes(model)
    nodes = {node.name: node for node in model.graph.node}
    target = hierarchy(load(str(arch_file)), "pe")
    rows = []
    for layer in zigzag["layers"]:
        node = nodes[layer["layer"]]
        cost = evaluate(layer_nest(node, shapes, node_attributes(node)), target, LayerMapping(*zigzag_mapping(layer)))
        rows.append(
            {
                "layer": layer["layer"],
                "cycles": cost.cycles / layer["cycles"],
                "energy": cost.energy_total_pj / layer["energy_pj"],
            }
        )
    return rows


def worst_layer(zigzag: dict, dcaccel: dict) -> tuple[float, float]:
    """The largest factor between the two tools over the layers, either direction: of cycles or energy, and
    of DRAM bytes."""
    rows = summary(zigzag, dcaccel)[:-1]

    def factor(mine: float, theirs: float) -> float:
        return max(mine / theirs, theirs / mine)

    work = max(factor(row[f"dc_{key}"], row[key]) for row in rows for key in ("cycles", "energy_pj"))
    dram = max(factor(row["dc_dram"], sum(row[f"dram_{operand}"] for operand in OPERANDS)) for row in rows)
    return work, dram


def dram_bytes(layer: dict) -> dict[str, int]:
    """Bytes one layer moves between DRAM (every operand's top level) and the level below, per operand:
    reads down for W and I, writes up plus reads back down (partial sums) for O."""
    result = {}
    for operand, entry in layer["operands"].items():
        bits = entry["levels"][-1]["bits"]
        result[operand] = (bits["rd_out_to_low"] + bits["wr_in_by_low"]) // 8
    return result


def _data_file(design: str, model: str) -> Path:
    return DATA / f"zigzag_{design}_{model}.json"


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=DATA, capture_output=True, text=True)
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--zigzag-side"]:
        zigzag_side(*argv[1:])
        return 0
    if argv[:1] == ["--zigzag-api"]:
        zigzag_api_side(*argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--zigzag-python", help="the interpreter of a venv with zigzag-dse==3.9.1 and six")
    source.add_argument("--from-data", action="store_true", help="ZigZag's numbers from benchmarks/data")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--designs", default=",".join(DESIGNS), help=f"comma-separated, of {', '.join(DESIGNS)}")
    parser.add_argument("--skip-dcaccel", action="store_true", help="ZigZag's numbers only")
    parser.add_argument(
        "--time-one-evaluation",
        action="store_true",
        help="with --zigzag-python: time ZigZag's API (the design's shipped mapping) and dcaccel map, nothing else",
    )
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    designs = [d for d in args.designs.split(",") if d]
    unknown = sorted(set(models) - set(MODELS)) + sorted(set(designs) - set(DESIGNS))
    if unknown:
        parser.error(f"unknown model or design: {', '.join(unknown)}")
    if args.time_one_evaluation:
        if not args.zigzag_python:
            parser.error("--time-one-evaluation needs --zigzag-python")
        for design in designs:
            for model in models:
                sys.stdout.write(time_one_evaluation(args.zigzag_python, model, design) + "\n")
        return 0
    command = shlex.join(["python", "benchmarks/validate_zigzag.py", *argv])
    DATA.mkdir(exist_ok=True)
    for design in designs:
        arch_file = None if args.skip_dcaccel else import_design(args.zigzag_python, design)
        for model in models:
            if args.from_data:
                zigzag = json.loads(_data_file(design, model).read_text(encoding="utf-8"))
            else:
                zigzag = run_zigzag(args.zigzag_python, model, design, command)
            dcaccel = None if arch_file is None else run_dcaccel(model, arch_file, whole=True)
            mine = "" if dcaccel is None else f", dcaccel map --search loopnest ({dcaccel['seconds']:.0f} s)"
            peer = f"ZigZag {zigzag['versions']['zigzag-dse']} ({zigzag['wall_seconds']:.0f} s)"
            sys.stdout.write(f"\n{model} on {design}: {peer}{mine}\n")
            sys.stdout.write(table(zigzag, dcaccel) + "\n")
            if dcaccel is not None:
                work, dram = worst_layer(zigzag, dcaccel)
                sys.stdout.write(f"worst layer x: cycles or energy {work:.2f}, DRAM bytes {dram:.2f}\n")
                whole, layers = dcaccel["whole_network"]["totals"], dcaccel["totals"]
                sys.stdout.write(
                    f"whole network, every operator, activations kept in "
                    f"{dcaccel['whole_network']['activation_buffer']}, overlap: "
                    + ", ".join(
                        f"{label} {whole[key]:,.0f} (layer sums {layers[key]:,.0f})"
                        for label, key in (
                            ("cycles", "cycles"),
                            ("energy pJ", "energy_pj"),
                            ("DRAM B", "offchip_bytes"),
                        )
                    )
                    + "\n"
                )
                same = same_mappings(zigzag, arch_file)
                sys.stdout.write(
                    "ZigZag's own mappings costed by dcaccel, x per layer: "
                    + ", ".join(
                        f"{key} {min(row[key] for row in same):.3f}-{max(row[key] for row in same):.3f}"
                        for key in ("cycles", "energy")
                    )
                    + "\n"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
