"""The learned cost model's dataset and its held-out folds (docs/costmodel.md).

``python benchmarks/costmodel_folds.py measure OUT.jsonl [--families ...] [--repeat N]`` measures the
programs of the catalogue below (every family of the held-out protocol) on this machine and appends
their rows to OUT.jsonl; the shipped set ``dcaccel/costmodel/data/rows.jsonl`` was made so, with
``OMP_NUM_THREADS=1`` (so timed by the thread CPU clock; ``--clock`` chooses another) and ``--processes 3``.

``python benchmarks/costmodel_folds.py folds ROWS.jsonl [--again A.jsonl ...]`` prints the fold table: for
each family held out (:data:`dcaccel.costmodel.evaluate.FAMILIES`), the models trained on the others and
tested on it, and the means over the folds (it runs ``dcaccel costmodel eval ROWS.jsonl [--again ...]``).

``python benchmarks/costmodel_folds.py refeature ROWS.jsonl OUT.jsonl`` reads the features and tokens of
every row again from its program, lowered anew (nothing compiled or run): the dataset follows a change of
``dcaccel/costmodel/features.py`` without measuring again (the shipped set was so renewed).

``python benchmarks/costmodel_folds.py combine OUT.jsonl A.jsonl B.jsonl`` makes one set of passes measured one
after another (the second with ``--reverse``, so that no family is measured only early or only late): each
step's median the median of the passes' (:func:`dcaccel.costmodel.measure.combine_passes`).

``python benchmarks/costmodel_folds.py leaf ROWS.jsonl`` chooses the boosted model's rows a leaf by a nested
selection: for each fold, the size of :data:`LEAF_CHOICES` with the least task MAPE + program MAPE over an
inner leave-one-family-out on the fold's training families alone; it prints each fold's choice, the held-out
scores of the sizes so chosen and of every size, and the size the same rule chooses on every family
(``dcaccel.costmodel.models.LEAF_ROWS``).

``python benchmarks/costmodel_folds.py noise A.jsonl B.jsonl`` compares two measurements of the same
programs (taken in two processes): the noise floor of the task times.

``python benchmarks/costmodel_folds.py machine ROWS.jsonl HERE.jsonl [--probe FAMILY]`` scores the models of
ROWS (measured on another machine) on the rows HERE.jsonl measured on this one, family by family held out:
for each family of HERE but the probe, the models trained on ROWS without it, scored on HERE's rows of it
as trained and calibrated on HERE's rows of the probe family (``dcaccel costmodel calibrate``).
"""

import argparse
import itertools
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

import dcaccel
from dcaccel.costmodel.measure import (
    WARMUP,
    combine_passes,
    measure_programs,
    read_rows,
    refeature,
    run_key,
    write_rows,
)
from dcaccel.costmodel.timer import CLOCKS
from dcaccel.transforms.lower import lower
from dcaccel.workloads import conv_seed, lenet, mmm, mobilenetv2_block, resnet18, transformer_encoder

SHAPES = ("mv", "op", "lmv")

#: Synthetic matrix products (N, K, M).
PRODUCTS = ((16, 16, 16), (32, 24, 16), (64, 32, 48), (48, 64, 32), (96, 48, 64), (128, 64, 32), (24, 96, 128))
#: Synthetic convolutions: in channels, out channels, kernel, image, stride, padding, groups.
CONVS = (
    (3, 8, 3, 32, 1, 1, 1),
    (8, 16, 3, 16, 2, 1, 1),
    (16, 16, 3, 16, 1, 1, 16),
    (4, 12, 5, 24, 1, 2, 1),
    (16, 32, 1, 16, 1, 0, 1),
    (8, 8, 3, 32, 1, 0, 1),
)
#: Synthetic convolutions at the scale of the layers of ImageNet networks (same fields as :data:`CONVS`),
#: 26 to 173 M elements of work: shapes of VGG/ResNet-like stages (a stem, 3x3 layers, a strided 3x3, a
#: 1x1), chosen before looking at any result and none of ResNet-18's layers (its family is held out).
LARGE_CONVS = (
    (3, 64, 7, 160, 2, 3, 1),
    (64, 64, 3, 48, 1, 1, 1),
    (64, 128, 3, 64, 2, 1, 1),
    (96, 128, 3, 28, 1, 1, 1),
    (192, 192, 3, 16, 1, 1, 1),
    (512, 512, 1, 7, 1, 0, 1),
)

#: Synthetic grouped convolutions (same fields as :data:`CONVS`): depthwise 3x3 and 5x5 layers, strided and
#: not, and two grouped 3x3 layers (ResNeXt-like), at sizes of MobileNet-like stages; chosen before looking
#: at any result, none of them a layer of the MobileNetV2 block or of the corpus' MobileNetV2 (held out).
GROUPED_CONVS = (
    (32, 32, 3, 56, 1, 1, 32),
    (96, 96, 3, 28, 2, 1, 96),
    (144, 144, 3, 14, 1, 1, 144),
    (64, 64, 5, 28, 1, 2, 64),
    (64, 128, 3, 28, 1, 1, 4),
    (256, 256, 3, 7, 1, 1, 32),
)


def _conv(cin, cout, kernel, image, stride, pad, groups):
    torch.manual_seed(0)
    module = torch.nn.Conv2d(cin, cout, kernel, stride=stride, padding=pad, groups=groups).eval()
    name = f"conv{cin}x{cout}k{kernel}i{image}s{stride}p{pad}g{groups}"
    return dcaccel.load(module, (torch.randn(1, cin, image, image),), name=name)


def _corpus(name: str):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.models import corpus

    return corpus.load(name)


def _conv_family(family: str, shapes, implementations):
    """The catalogue entries of a family of synthetic convolutions: each shape under each implementation."""
    return ((family, lambda c=c: _conv(*c), [{"Conv": x} for x in implementations]) for c in shapes)


def catalogue():
    """(family, workload builder, list of implementation choices) of every program measured."""
    yield from (
        ("products", lambda s=s: mmm.workload(N=s[0], K=s[1], M=s[2]), [{"MatMul": x} for x in SHAPES])
        for s in PRODUCTS
    )
    yield from _conv_family("convs", CONVS, (*SHAPES, "direct"))
    yield from _conv_family("large-convs", LARGE_CONVS, ("mv", "lmv", "op", "direct"))
    yield from _conv_family("grouped-convs", GROUPED_CONVS, ("mv", "lmv", "op", "direct"))
    yield "conv-seed", conv_seed.workload, [{"Conv": x} for x in (*SHAPES, "direct")]
    yield "lenet", lenet.workload, [{"Conv": c, "Gemm": g} for c, g in itertools.product(SHAPES, SHAPES)]
    yield "mobilenetv2-block", mobilenetv2_block.workload, [{"Conv": x} for x in SHAPES]
    yield "transformer-encoder", transformer_encoder.workload, [{"MatMul": x, "Gemm": x} for x in SHAPES]
    yield "resnet18", resnet18.workload, [{"Conv": x, "Gemm": x} for x in ("lmv", "mv")]
    yield "corpus-resnet", lambda: _corpus("resnet"), [{"Conv": x, "Gemm": x} for x in SHAPES]
    # one assignment: each of op and lmv repeats its ~540 rows of a 100-node program (docs/costmodel.md)
    yield "corpus-mobilenet-v2", lambda: _corpus("mobilenet-v2"), [{"Conv": "mv", "Gemm": "mv"}]


def run_measure(args) -> None:
    entries = [entry for entry in catalogue() if not args.families or entry[0] in args.families]
    for family, build, assignments in reversed(entries) if args.reverse else entries:
        workload = build()
        start = time.perf_counter()
        lowereds = [lower(workload, choices) for choices in assignments]
        calls = len(lowereds) * (WARMUP + args.repeat) * args.processes
        with tqdm(total=calls, desc=f"{family} {workload.name}", unit="call", file=sys.stderr) as bar:
            measured = measure_programs(
                lowereds,
                family=family,
                repeat=args.repeat,
                processes=args.processes,
                clock=args.clock,
                progress=bar.update,
            )
        for rows in measured:
            write_rows(rows, args.out)
        tqdm.write(f"{workload.name}: {sum(map(len, measured))} rows, {time.perf_counter() - start:.1f} s", sys.stderr)


#: The rows a leaf the nested selection of ``leaf`` chooses among.
LEAF_CHOICES = (5, 10, 20, 40)


def run_leaf(args) -> None:
    from dcaccel.cli.costmodel import scores_text
    from dcaccel.costmodel.evaluate import families_of, fold_means, scores
    from dcaccel.costmodel.models import BoostedModel

    rows = read_rows(args.rows)
    families = families_of(rows)

    def score(train, test, leaf_rows):
        return scores(test, BoostedModel(leaf_rows=leaf_rows).fit(train).predict(test))

    def select(among: list[str]) -> tuple[int, dict[int, float]]:
        """The size of least mean task MAPE + program MAPE over leave-one-family-out on ``among``."""
        inner = {}
        for size in LEAF_CHOICES:
            held = [
                score(
                    [r for r in rows if r.family in among and r.family != other],
                    [r for r in rows if r.family == other],
                    size,
                )
                for other in among
            ]
            inner[size] = float(np.mean([s.task_mape + s.program_mape for s in held]))
        return min(inner, key=inner.get), inner

    chosen, held_out = [], {size: [] for size in LEAF_CHOICES}
    for family in tqdm(families, desc="outer folds", file=sys.stderr):
        train = [row for row in rows if row.family != family]
        test = [row for row in rows if row.family == family]
        best, inner = select([other for other in families if other != family])
        outer = {size: score(train, test, size) for size in LEAF_CHOICES}
        chosen.append(outer[best])
        for size in LEAF_CHOICES:
            held_out[size].append(outer[size])
        tqdm.write(f"{family}: {best} rows a leaf (inner {', '.join(f'{k}: {v:.4f}' for k, v in inner.items())})")
    table = pd.DataFrame(
        [
            {"model": f"{name} rows a leaf", **asdict(s)}
            for name, scored in [("nested", chosen), *held_out.items()]
            for s in scored
        ]
    )
    print(scores_text(fold_means(table), reproduced=False))
    best, inner = select(families)
    print(f"chosen on every family: {best} rows a leaf ({', '.join(f'{k}: {v:.4f}' for k, v in inner.items())})")


def run_machine(args) -> None:
    from dcaccel.cli.costmodel import folds_text
    from dcaccel.costmodel.evaluate import families_of, scores
    from dcaccel.costmodel.models import MODELS, CostModel

    rows, here = read_rows(args.rows), read_rows(args.here)
    probe = [row for row in here if row.family == args.probe]
    if not probe:
        sys.exit(f"costmodel machine: {args.here} has no rows of the probe family {args.probe}")
    table = []
    for family in tqdm([f for f in families_of(here) if f != args.probe], desc="folds", file=sys.stderr):
        trained = CostModel.train([row for row in rows if row.family != family])
        test = [row for row in here if row.family == family]
        for name, model in (("as trained", trained), (f"calibrated on {args.probe}", trained.calibrated(probe))):
            for kind in MODELS:
                scored = asdict(scores(test, model.predict(test, kind)))
                table.append({"held out": family, "model": f"{kind}, {name}", "scale": model.scales[kind], **scored})
    print(folds_text(pd.DataFrame(table), reproduced=False))


def _key(family: str, program: str, sizes: dict, assignment: dict) -> tuple[str, ...]:
    """A measured program of a family (:func:`~dcaccel.costmodel.measure.run_key`)."""
    return family, *run_key(program, sizes, assignment)


def run_refeature(args) -> None:
    rows = read_rows(args.rows)
    groups: dict[tuple, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(_key(row.family, row.program, row.sizes, row.assignment), []).append(index)
    renewed = list(rows)
    for family, build, assignments in catalogue():
        if not any(key[0] == family for key in groups):
            continue
        workload = build()
        sizes = workload.bind_symbols(workload.random_inputs(0))
        for choices in tqdm(assignments, desc=f"{family} {workload.name}", file=sys.stderr):
            if not any(key[:3] == _key(family, workload.name, sizes, {})[:3] for key in groups):
                break  # every measured assignment of the workload renewed
            lowered = lower(workload, choices)
            indices = groups.pop(_key(family, workload.name, sizes, lowered.implementations), [])
            for index, row in zip(indices, refeature(lowered, [rows[i] for i in indices]), strict=True):
                renewed[index] = row
    if groups:
        family, program, sizes, assignment = next(iter(groups))
        sys.exit(f"costmodel refeature: rows of {family} {program} {sizes} {assignment} are of no program measured")
    write_rows(renewed, args.out, append=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out")
    m.add_argument("--families", nargs="*", default=[])
    m.add_argument("--repeat", type=int, default=20, help="timed calls per program and process")
    m.add_argument("--processes", type=int, default=1, help="fresh processes timing each program, samples pooled")
    m.add_argument("--reverse", action="store_true", help="the families in the catalogue's reverse order")
    m.add_argument(
        "--clock", choices=sorted(CLOCKS), default=None, help="default: thread-cpu on one OpenMP thread, else wall"
    )
    f = sub.add_parser("folds")
    f.add_argument("rows")
    f.add_argument("--again", nargs="+", default=[], help="re-measurements: pair order over the pairs they reproduce")
    r = sub.add_parser("refeature")
    r.add_argument("rows")
    r.add_argument("out")
    c = sub.add_parser("combine")
    c.add_argument("out")
    c.add_argument("passes", nargs="+")
    leaf = sub.add_parser("leaf")
    leaf.add_argument("rows")
    n = sub.add_parser("noise")
    n.add_argument("first")
    n.add_argument("second")
    machine = sub.add_parser("machine")
    machine.add_argument("rows")
    machine.add_argument("here")
    machine.add_argument("--probe", default="conv-seed", help="the family HERE's rows calibrate the models on")
    args = parser.parse_args()
    if args.command in ("measure", "refeature"):
        (run_measure if args.command == "measure" else run_refeature)(args)
        return
    if args.command == "leaf":
        run_leaf(args)
        return
    if args.command == "machine":
        run_machine(args)
        return
    if args.command == "combine":
        write_rows(combine_passes([read_rows(path) for path in args.passes]), args.out, append=False)
        return
    if args.command == "folds":
        from dcaccel.cli import main as dcaccel_main

        sys.exit(dcaccel_main(["costmodel", "eval", args.rows, *(["--again", *args.again] if args.again else [])]))
    else:
        from dcaccel.cli.costmodel import scores_text
        from dcaccel.costmodel.evaluate import noise_floor

        floor = noise_floor(read_rows(args.first), read_rows(args.second))
        print(scores_text(pd.DataFrame([asdict(floor)]), reproduced=False))


if __name__ == "__main__":
    main()
