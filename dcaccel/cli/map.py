"""``dcaccel map MODEL --arch X``: the best mapping of every layer, searched off-chip first, then on-chip
(``--search decoupled``/``exhaustive``, ``docs/mapping.md``), or as a loop nest on the design's array and
operand-aware memories (``--search loopnest``, ``docs/validation.md``)."""

import json
import sys

from dcaccel.cli.arguments import add_concept, bounded_int, study_default
from dcaccel.cli.models import add_fold_argument, add_symbols_argument, resolve_model
from dcaccel.cli.table import format_table
from dcaccel.errors import DcaccelError

#: ``--search loopnest``: the loop-nest model of :mod:`dcaccel.cost`.
LOOPNEST = "loopnest"


def register(subparsers) -> None:
    from dcaccel.mapping.onchip import OBJECTIVES
    from dcaccel.mapping.search import SEARCHES

    parser = subparsers.add_parser(
        "map", help="search the mapping of every Conv/Gemm/MatMul layer, place the other nodes (docs/mapping.md)"
    )
    parser.add_argument("model", help="a built-in workload name, an ONNX file or a Python model spec")
    add_symbols_argument(parser)
    add_fold_argument(parser)
    add_concept(parser, "arch", one=True)
    add_concept(parser, "objective", choices=OBJECTIVES)
    parser.add_argument(
        "--search",
        choices=[*SEARCHES, LOOPNEST],
        default="decoupled",
        help="decoupled/exhaustive: schedule realised programs on --pes PEs; loopnest: the loop-nest model "
        "with data reuse on every unit of the design (its memories give the capacities)",
    )
    parser.add_argument("--top-k", type=bounded_int(1), default=4, help="off-chip choices the on-chip stage schedules")
    add_concept(parser, "pes", default="the design's units when --arch fixes its unit counts, else 1,2,4,…,128")
    add_concept(parser, "onchip_memory", one=True, old="--capacity")
    parser.add_argument(
        "--whole-network",
        action="store_true",
        help="loopnest: also the whole network, every operator, activations kept on chip between layers and "
        "overlap (lowers the program for the design)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.set_defaults(run=run)


def run(args) -> int:
    from dcaccel.architecture import load as load_architecture
    from dcaccel.mapping import map_workload

    arch = args.arch or study_default("arch")[0]
    architecture = load_architecture(arch)
    objective = args.objective or study_default("objective")
    if args.search == LOOPNEST:
        return _loopnest(args, architecture, objective)
    if args.whole_network:
        raise DcaccelError("--whole-network applies to --search loopnest only")
    workload = resolve_model(args.model, args.symbols, args.fold)
    _check_supported(workload, architecture, args.search)
    if not args.onchip_memory and architecture.onchip_capacity_elements < 1:
        raise DcaccelError(
            f"--arch {arch}: architecture {architecture.name} has no on-chip capacity; give --onchip ELEMENTS"
        )
    result = map_workload(
        workload,
        architecture,
        objective,
        search=args.search,
        top_k=args.top_k,
        pes=None if args.pes is None else tuple(args.pes),
        capacity=args.onchip_memory or None,
    )
    if args.json:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
        return 0
    sys.stdout.write(format_table(result.layers) + "\n")
    sys.stdout.write(
        f"{result.workload} on {result.architecture}, {result.search} search: {result.objective_name} "
        f"{result.objective:.6g} over {len(result.layers)} nodes, space {result.space_size}, "
        f"{result.evaluations} mappings scheduled, {result.seconds:.1f} s\n"
    )
    for node, reason in result.uncounted.items():
        sys.stdout.write(f"not counted: {node}: {reason}\n")
    return 0


def _check_supported(workload, architecture, search: str) -> None:
    """The schedule-based searches place every node on the design's PEs: refuse a node the support rules
    of its units do not run there (``--search loopnest`` places it on the unit the rules choose)."""
    from dcaccel.architecture.support import annotate
    from dcaccel.transforms.offload import op_instances

    instances = op_instances(workload)
    placement = annotate(architecture.units, instances)
    for instance in instances:
        where = placement[instance.name]
        if not where.offloaded:
            raise DcaccelError(
                f"--search {search}: {instance.op} node '{instance.name}' would be placed on the PEs of "
                f"{architecture.name}, whose support rules refuse it ({where.reason}); --search loopnest runs it "
                f"on {where.target or 'no unit'}"
            )


def _loopnest(args, architecture, objective: str) -> int:
    from tqdm import tqdm

    from dcaccel.cost.network import network_cost

    for flag, value in (("--pes", args.pes), ("--onchip", args.onchip_memory)):
        if value is not None:
            raise DcaccelError(
                f"{flag} does not apply to --search loopnest: every unit and memory of the design is used"
            )
    workload = resolve_model(args.model, args.symbols, args.fold)
    with tqdm(desc=f"map {args.model}", unit="node", delay=1.0) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        result = network_cost(workload, architecture, objective, progress=progress, whole=args.whole_network)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
        return 0
    sys.stdout.write(format_table(result.rows()) + "\n")
    sys.stdout.write(
        f"{result.workload} on {result.architecture}, loop-nest search by {result.objective}: "
        f"{result.total('cycles'):,.0f} cycles, {result.total('energy_pj') / 1e6:.4g} µJ, "
        f"{result.total('offchip_bytes'):,.0f} off-chip bytes over {len(result.costs)} layers, {result.seconds:.1f} s\n"
    )
    if result.whole is not None:
        totals = result.whole.totals()
        sys.stdout.write(
            f"whole network ({len(result.whole.rows)} operators, activations kept in {result.whole.buffer}, "
            f"overlap): {totals['cycles']:,.0f} cycles, {totals['energy_pj'] / 1e6:.4g} µJ, "
            f"{totals['offchip_bytes']:,.0f} off-chip bytes\n"
        )
    for node, reason in result.uncounted:
        if not reason.endswith("is not a multiply-accumulate layer"):
            sys.stdout.write(f"not counted: {node}: {reason}\n")
    return 0
