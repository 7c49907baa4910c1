"""The learned cost model as a cost source: predicted times of the steps of a lowered program, unmeasured.

:func:`predict_steps` reads the program as :func:`~dcaccel.costmodel.measure.measure` does (the same
features and tokens, nothing compiled) and returns one predicted time per top-level map and copy. A
scheduler spreading a task map's time over its iteration tasks does so in proportion to their work.
"""

from __future__ import annotations

import copy as copying

import pandas as pd

from dcaccel.costmodel.measure import PROVENANCE_UNMEASURED, Row, Timing, read_steps, step_places
from dcaccel.costmodel.models import CostModel
from dcaccel.dag.scopes import Copy


def predict_steps(lowered, model: CostModel, kind: str = "boosted") -> pd.DataFrame:
    """Per top-level map and copy of ``lowered`` (its workload's sizes given), in program order: ``label``,
    ``state``, ``node`` (the model node a map lowers; None for a copy), ``kind`` (map, copy), ``op``,
    ``implementation``, ``analytic`` (its work) and ``predicted_ns`` by the model ``kind``."""
    workload = lowered.workload
    sdfg = copying.deepcopy(lowered.sdfg)
    symbols = dict(workload.symbols)
    program = read_steps(lowered, sdfg, symbols)
    rows, nodes = [], []
    for step, (_, features, tokens) in zip(program.steps, step_places(sdfg, program, symbols), strict=True):
        if features is None:
            continue
        label = f"{step.src.data}->{step.dst.data}" if isinstance(step, Copy) else step.label
        nodes.append(None if isinstance(step, Copy) else step.info.node)
        rows.append(
            Row(
                program=workload.name,
                family="",
                assignment=dict(lowered.implementations),
                sizes=symbols,
                step=step.state,
                label=label,
                features=features,
                tokens=tokens,
                timing=Timing(0.0, 0.0, 0.0, 0.0, 0),
                provenance=PROVENANCE_UNMEASURED,
                analytic=float(features["work"]),
            )
        )
    predicted = model.predict(rows, kind) if rows else []
    return pd.DataFrame(
        {
            "label": [row.label for row in rows],
            "state": [row.step for row in rows],
            "node": nodes,
            "kind": [row.features["kind"] for row in rows],
            "op": [row.features["op"] for row in rows],
            "implementation": [row.features["implementation"] for row in rows],
            "analytic": [row.analytic for row in rows],
            "predicted_ns": list(predicted),
        }
    )
