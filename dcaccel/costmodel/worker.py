"""A fresh process that times compiled programs: ``python -m dcaccel.costmodel.worker MANIFEST.json``.

A program's time on this machine moves with the process it runs in: two processes measuring the same
programs disagreed by factors of 0.6 to 1.8 on all the steps of a program at once, while measurements
repeated in one process agreed within 5 to 10% (docs/costmodel.md, "Noise floor"). Timing every program in
several fresh processes and pooling their samples (:func:`dcaccel.costmodel.measure.run_timed_in_processes`)
measures across that instead of drawing one process's luck.

The manifest (JSON, written by the measuring process) holds ``calls``, the calls per program, ``heap``,
the heap the measuring process times with (:mod:`dcaccel.costmodel.heap`; a worker that cannot keep the same
stops), and ``programs``: per program its build folder (compiled with the nanosecond timer and one report per run), the
``.npz`` file of its array arguments and its scalar arguments (symbols). The worker loads each program
(DaCe's ``load_precompiled_sdfg``), calls it ``calls`` times, finalises it (DaCe writes the timer report
into the build folder's ``perf``) and goes to the next; the measuring process reads the reports.
"""

import json
import sys
import warnings

import numpy as np
from dace.codegen.compiler import load_precompiled_sdfg

from dcaccel.costmodel.heap import STEADY, keep_freed_memory
from dcaccel.errors import DcaccelError
from dcaccel.frontend.half_scalars import install_half_scalar_arguments


def time_programs(manifest: dict) -> None:
    """Call every program of ``manifest`` its ``calls`` times, in order, finalising each (see the module); float16
    scalar arguments are passed as the measuring process passes them (:mod:`dcaccel.frontend.half_scalars`)."""
    install_half_scalar_arguments()
    if manifest["heap"] == STEADY and keep_freed_memory() != STEADY:
        raise DcaccelError("measure worker: this process cannot keep a steady heap as the measuring one does")
    for entry in manifest["programs"]:
        program = load_precompiled_sdfg(entry["folder"])
        with np.load(entry["arrays"]) as arrays:
            arguments = {name: np.array(arrays[name]) for name in arrays.files}  # owning its data, as DaCe asks
        arguments.update(entry["scalars"])
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Return value .* is passed as a regular argument")
            warnings.filterwarnings("ignore", message="Casting scalar argument")
            for _ in range(manifest["calls"]):
                program(**arguments)
        program.finalize()


def main(argv: list[str]) -> int:
    (path,) = argv
    with open(path, encoding="utf-8") as stream:
        time_programs(json.load(stream))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
