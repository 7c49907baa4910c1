"""The cost models of a step's time on this machine: the analytic baseline and two learned models.

* :class:`AnalyticModel` — the DAG's analytic time of a task, ``max(volume in, volume out)`` (one element
  per cycle and port, docs/dag.md), scaled by one factor fitted on the training rows (the geometric mean
  of measured time over analytic time);
* :class:`BoostedModel` — gradient-boosted trees on the hand features (:func:`feature_matrix`), target the
  time per unit of work over the step's miss cost (:class:`MissCost`); trained by scikit-learn's
  ``HistGradientBoostingRegressor`` (one thread) and kept as its trees (thresholds, leaf values), so that a
  model file is data evaluated by :meth:`predict`;
* :class:`SequenceModel` — a small convolutional encoder over the step's IR tokens (the seed paper's "IR
  as text": token embeddings, one convolution over neighbouring tokens, mean and max over the sequence),
  with the logarithm of the analytic work, into a two-layer head; target the logarithm of the time per
  unit over the miss cost; PyTorch on the CPU, one thread, seconds to train on the shipped set. (A GRU
  took a second per batch of 64 on this shared machine: minutes per fold.)

Both learn the time above a step's floor (:class:`Floors`: the fixed cost of a step, which a step of a few
elements takes whole) and its atomic writes (:meth:`MissCost.atomic`; :func:`above_fixed`) and are trained
for the metric by default: their loss (:data:`LOSSES`) is the relative error of a step's time, what task MAPE
scores.

:class:`CostModel` holds the three trained on one set of rows and reads and writes them as one JSON file
(no pickle: the trees and the network's weights are lists of numbers, checked when read).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from dcaccel.costmodel.features import CACHE, CATEGORICAL, DERIVED, NUMERIC, feature_matrix
from dcaccel.costmodel.measure import Row
from dcaccel.errors import DcaccelError

#: The model file's format name and version (a file of another format or version is refused; 9 added the
#: miss cost's price of an atomic write, 8 the machine's scales of :meth:`CostModel.calibrated`).
FORMAT = "dcaccel-costmodel"
VERSION = 9
#: The learned models a file holds, by name.
KINDS = ("boosted", "sequence")
#: Every model a file holds: the analytic baseline and the learned ones.
MODELS = ("analytic", *KINDS)
#: Largest model file read.
MAX_MODEL_BYTES = 64 * 2**20
#: Widest sequence model read (its network is built before the weights are checked against it).
MAX_WIDTH = 1024
#: The child fields of a tree node of the boosted model.
BRANCHES = ("left", "right")


def _finite(value, name: str, positive: bool = False) -> float:
    """``value`` as a finite float (above 0 with ``positive``), else a one-line error naming the ``name``."""
    number = float(value)
    if not math.isfinite(number) or (positive and number <= 0):
        raise DcaccelError(f"costmodel model: the {name} is {number}, expected a finite number{' > 0' * positive}")
    return number


def relative_scale(predicted: np.ndarray, measured: np.ndarray) -> float:
    """The factor ``c`` of least mean relative error ``|c * predicted - measured| / measured``: the median of
    ``measured / predicted`` weighted by ``predicted / measured`` (the error is that weight times ``|c - ratio|``,
    piecewise linear in ``c``)."""
    ratios, weights = measured / predicted, predicted / measured
    order = np.argsort(ratios)
    cumulative = np.cumsum(weights[order])
    return float(ratios[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def times(rows: Sequence[Row]) -> np.ndarray:
    """The measured median times of ``rows`` in nanoseconds (at least 1: a step the timer read as 0)."""
    return np.maximum(np.array([row.timing.median_ns for row in rows], dtype=np.float64), 1.0)


def _work(rows: Sequence[Row]) -> np.ndarray:
    return np.maximum(np.array([row.analytic for row in rows], dtype=np.float64), 1.0)


def _copies(rows: Sequence[Row]) -> np.ndarray:
    return np.array([row.features["kind"] == "copy" for row in rows], dtype=bool)


def units(rows: Sequence[Row]) -> np.ndarray:
    """What a step's time is predicted per: its work ``max(I, O)`` (elements) for a map, the bytes it writes
    for a copy (at least 1)."""
    moved = np.array([float(row.features.get("bytes_out", 0.0)) for row in rows], dtype=np.float64)
    return np.maximum(np.where(_copies(rows), moved, _work(rows)), 1.0)


#: What a learned model predicts (the logarithm of): the time, the time per unit of work (:func:`units`), or
#: the time over what its misses cost (:class:`MissCost`: the time per unit over the miss cost per unit).
TARGETS = ("time", "per-unit", "over-misses")


def _scale(rows: Sequence[Row], target: str, misses: MissCost) -> np.ndarray:
    """The factor a model's target is multiplied by to give the time."""
    if target == "time":
        return np.ones(len(rows))
    return units(rows) * misses.per_unit(rows) if target == "over-misses" else units(rows)


def _target(data: dict) -> str:
    target = str(data["target"])
    if target not in TARGETS:
        raise DcaccelError(f"costmodel model: the target is '{target}', expected one of {', '.join(TARGETS)}")
    return target


#: What a learned model's training minimises: ``squared`` error of the logarithm of its target (the
#: geometric mean), ``absolute`` error of the logarithm (the median), or ``relative`` error, the absolute
#: error of the target over its value (what task MAPE scores; the boosted model's trees then fit the target
#: itself, the sequence model's network still its logarithm).
LOSSES = ("squared", "absolute", "relative")
#: The loss of the boosted model and of the sequence model when none is chosen.
BOOSTED_LOSS, SEQUENCE_LOSS = "relative", "relative"
#: The fewest training rows in a leaf of the boosted model's trees. 10 and 20 were tried by a nested
#: selection (``benchmarks/costmodel_folds.py leaf``) and are not kept: the selection's criterion ties them
#: with 5 within the trees' noise, and they move ResNet-18's prediction by up to 11 points (docs/costmodel.md,
#: "Tried and not kept").
LEAF_ROWS = 5


#: A learned model's floors (a step's fixed cost, one for the steps that open an OpenMP parallel region and one
#: for those that do not: :func:`serial`) are this quantile of the training rows' times of each kind.
FLOOR_QUANTILE = 0.01
#: The least part of a training step's time left to the learned per-unit cost when its floor and its atomic
#: writes are taken away (:func:`above_fixed`).
LEAST_LEARNED = 0.05


#: The implementations of a copy (DaCe's copy node's, as code generation makes it) that open no parallel region.
SERIAL_COPIES = ("MemcpyCPU", "Tasklet")


def serial(rows: Sequence[Row]) -> np.ndarray:
    """The steps that run without an OpenMP parallel region: a copy code generation makes a ``memcpy`` or one
    tasklet. Every top-level map opens one, and so does a copy made a parallel map (``MappedTasklet``): on
    this machine that, with the timer, is a floor of about 0.45 µs, where a small ``memcpy`` takes 30 ns."""
    return np.array(
        [row.features["kind"] == "copy" and row.features["implementation"] in SERIAL_COPIES for row in rows],
        dtype=bool,
    )


def program_weights(rows: Sequence[Row]) -> np.ndarray:
    """A training row's weight under the relative loss beside its own relative error: 1 + its share of its
    program's time (the sum of the program's measured steps) times the rows per program. A step's relative
    error times that weight is its relative error plus, scaled, its part of its program's relative error, so
    the loss weighs the steps' mean relative error (task MAPE) and the programs' (program MAPE, which it
    bounds) alike; without it the many short steps outweigh the few long ones a program's time is made of. The
    boosted model's relative loss weighs its rows so (on the shipped set's folds: program MAPE 0.342 -> 0.241,
    pair order 0.665 -> 0.882, task MAPE 0.317 -> 0.291); the sequence model's does not (there, its task MAPE
    rose from 0.352 to 0.426)."""
    measured = times(rows)
    runs = [row.run() for row in rows]
    totals = program_times(runs, measured)
    shares = measured / np.array([totals[run] for run in runs])
    return 1.0 + len(rows) / len(totals) * shares


def program_times(runs: Sequence[tuple[str, str, str]], values: Sequence[float]) -> dict[tuple[str, str, str], float]:
    """Per program (a row's :meth:`~dcaccel.costmodel.measure.Row.run`, given in ``runs``), the sum of its
    rows' ``values`` (times, measured or predicted)."""
    totals: dict[tuple[str, str, str], float] = {}
    for run, value in zip(runs, values, strict=True):
        totals[run] = totals.get(run, 0.0) + float(value)
    return totals


def _quantile(values: np.ndarray) -> float:
    return float(np.quantile(values, FLOOR_QUANTILE)) if len(values) else 0.0


@dataclass
class Floors:
    """A step's fixed cost in nanoseconds, per kind of step (:func:`serial`): a learned model predicts the time
    above it, since a step of a few elements takes its floor, which a time per unit learned from larger steps
    cannot follow down. Fitted as the :data:`FLOOR_QUANTILE` of the training rows' times of each kind."""

    parallel: float = 0.0  # a map, or a copy made a parallel map
    serial: float = 0.0  # a copy made a memcpy or one tasklet

    @classmethod
    def fit(cls, rows: Sequence[Row]) -> Floors:
        measured, steps_serial = times(rows), serial(rows)
        return cls(_quantile(measured[~steps_serial]), _quantile(measured[steps_serial]))

    def of(self, rows: Sequence[Row]) -> np.ndarray:
        """The floor of each of ``rows``."""
        return np.where(serial(rows), self.serial, self.parallel)

    def to_json(self) -> dict:
        return {"parallel": self.parallel, "serial": self.serial}

    @classmethod
    def from_json(cls, data: dict) -> Floors:
        floors = cls(*(_finite(data[name], f"{name} floor") for name in ("parallel", "serial")))
        if min(floors.parallel, floors.serial) < 0:
            raise DcaccelError("costmodel model: a floor is below 0")
        return floors


#: The least miss cost per unit (ns) a step is given: a fit that prices nothing a step has does not divide by 0.
LEAST_MISS_COST = 1e-3


@dataclass
class MissCost:
    """What a step's time per unit (:func:`units`) is where its accesses hit, in nanoseconds: a constant for
    each kind of step (:data:`CONSTANTS`: maps whose loop the compiler does not vectorise, maps whose loop it does,
    by the feature ``vector_loop``, and copies), plus, for each level of the cache model
    (:data:`~dcaccel.costmodel.features.CACHE`), a price per miss times the level's misses per access times the
    step's accesses per unit (its volumes in and out over its units). The prices are fitted on the training
    rows' time per unit above their floors by non-negative least squares of the relative error (each row
    weighted by 1 / its time per unit), together with a price per atomic write (``atomic_writes``: a
    reduction's parallel map updates its outputs with a locked read-modify-write, 2.8–6.2 ns an element
    measured, where a map that hits takes 0.1–0.5). That price is not part of the miss cost the models scale
    (:meth:`per_unit`): a step's atomic writes (:meth:`atomic`) cost what they cost whatever else it does, and
    the models learn the time above them and the floor (:func:`above_fixed`). A level a step's window could
    not be read for (-1) counts the training rows' mean rate (``rates``). A kind absent from the training rows
    takes the constant of the nearest kind present (:data:`STAND_INS`).

    The learned models' default target (``over-misses``) is the time over it: they learn what the misses do
    not explain, and a step that misses more than any training step of its kind (OP's partial sums of a large
    convolution, read a page apart) is no longer put at the time per unit of the steps that hit. On the shipped
    set's folds it moved the boosted model's means from 0.266, 0.184, 0.845, 0.233, 0.832 (task MAPE, median
    APE, τ, program MAPE, pair order) to 0.256, 0.177, 0.856, 0.186, 0.891, and the constant of vectorised maps
    (with ``vector_loop`` among the trees' features) on to 0.242, 0.179, 0.858, 0.155, 0.786, and the atomic
    writes on to 0.237, 0.177, 0.865, 0.148, 0.819 (docs/costmodel.md)."""

    map_ns: float = 0.0
    vector_ns: float = 0.0
    copy_ns: float = 0.0
    per_miss: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CACHE, 0.0))  # ns per miss, by level
    rates: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CACHE, 0.0))  # mean rates, by level
    atomic_ns: float = 0.0  # ns per atomic write

    #: The constants, one per kind of step, each named by its field.
    CONSTANTS: ClassVar[tuple[str, ...]] = ("map_ns", "vector_ns", "copy_ns")
    #: The kinds whose constant a kind absent from the training rows takes, the nearest first.
    STAND_INS: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType(
        {"map_ns": ("vector_ns", "copy_ns"), "vector_ns": ("map_ns", "copy_ns"), "copy_ns": ("map_ns", "vector_ns")}
    )

    @classmethod
    def fit(cls, rows: Sequence[Row], floors: Floors) -> MissCost:
        from scipy.optimize import nnls

        read = {level: np.array([float(row.features[level]) for row in rows]) for level in CACHE}
        rates = {
            level: float(np.mean(values[values >= 0])) if (values >= 0).any() else 0.0 for level, values in read.items()
        }
        columns = cls(rates=rates)._columns(rows)
        per_unit = above_fixed(rows, floors, cls()) / units(rows)  # above the floors: the atomic price is fitted here
        prices, _ = nnls(columns / per_unit[:, None], np.ones(len(rows)))
        present = dict(zip(cls.CONSTANTS, columns[:, : len(cls.CONSTANTS)].any(axis=0), strict=True))
        constants = dict(zip(cls.CONSTANTS, map(float, prices[: len(cls.CONSTANTS)]), strict=True))
        for kind in (kind for kind in cls.CONSTANTS if not present[kind]):
            constants[kind] = next((constants[other] for other in cls.STAND_INS[kind] if present[other]), 0.0)
        per_miss = dict(zip(CACHE, map(float, prices[len(cls.CONSTANTS) : -1]), strict=True))
        return cls(**constants, per_miss=per_miss, rates=rates, atomic_ns=float(prices[-1]))

    def _columns(self, rows: Sequence[Row]) -> np.ndarray:
        """Per row: 1 in its kind's column (:data:`CONSTANTS`), each level's misses per unit and the atomic
        writes per unit (the prices' factors)."""
        copies = _copies(rows)
        vector = np.array([float(row.features["vector_loop"]) > 0 for row in rows], dtype=bool) & ~copies
        volumes = np.array([float(row.features["volume_in"]) + float(row.features["volume_out"]) for row in rows])
        rates = np.array([[float(row.features[level]) for level in CACHE] for row in rows]).reshape(-1, len(CACHE))
        rates = np.where(rates < 0, np.array([self.rates[level] for level in CACHE]), rates)
        kinds = [~copies & ~vector, vector, copies]
        factors = np.column_stack([rates * volumes[:, None], _atomic_writes(rows)]) / units(rows)[:, None]
        return np.column_stack([*kinds, factors]).astype(np.float64)

    def per_unit(self, rows: Sequence[Row]) -> np.ndarray:
        """The miss cost of each of ``rows`` per unit (ns, at least :data:`LEAST_MISS_COST`), its atomic writes
        apart (:meth:`atomic`)."""
        constants = [getattr(self, kind) for kind in self.CONSTANTS]
        prices = np.array([*constants, *(self.per_miss[level] for level in CACHE)])
        return np.maximum(self._columns(rows)[:, :-1] @ prices, LEAST_MISS_COST)

    def atomic(self, rows: Sequence[Row]) -> np.ndarray:
        """What the atomic writes of each of ``rows`` cost (ns): the price of one times their number."""
        return self.atomic_ns * _atomic_writes(rows)

    def to_json(self) -> dict:
        return {
            **{kind: getattr(self, kind) for kind in self.CONSTANTS},
            "per_miss": self.per_miss,
            "rates": self.rates,
            "atomic_ns": self.atomic_ns,
        }

    @classmethod
    def from_json(cls, data: dict) -> MissCost:
        per_miss = {level: _finite(data["per_miss"][level], f"price of a miss of {level}") for level in CACHE}
        rates = {level: _finite(data["rates"][level], f"mean rate of {level}") for level in CACHE}
        constants = {kind: _finite(data[kind], f"miss cost {kind}") for kind in cls.CONSTANTS}
        atomic = _finite(data["atomic_ns"], "price of an atomic write")
        cost = cls(**constants, per_miss=per_miss, rates=rates, atomic_ns=atomic)
        if min(*constants.values(), *per_miss.values(), *rates.values(), atomic) < 0:
            raise DcaccelError("costmodel model: a price or rate of the miss cost is below 0")
        if max(rates.values()) > 1:
            raise DcaccelError("costmodel model: a mean rate of the miss cost is above 1 miss per access")
        return cost


def _atomic_writes(rows: Sequence[Row]) -> np.ndarray:
    """The elements each of ``rows`` writes atomically (the feature ``atomic_writes``)."""
    return np.array([float(row.features["atomic_writes"]) for row in rows])


def _fixed(rows: Sequence[Row], floors: Floors, misses: MissCost) -> np.ndarray:
    """What ``rows`` take whatever a learned model says (ns): their floors and their atomic writes."""
    return floors.of(rows) + misses.atomic(rows)


def above_fixed(rows: Sequence[Row], floors: Floors, misses: MissCost) -> np.ndarray:
    """The measured times of ``rows`` above what they take whatever a learned model says (:func:`_fixed`), at
    least :data:`LEAST_LEARNED` of the time."""
    measured = times(rows)
    return np.maximum(measured - _fixed(rows, floors, misses), LEAST_LEARNED * measured)


def _fit_bases(rows: Sequence[Row], target: str, floored: bool) -> tuple[Floors, MissCost]:
    """A learned model's floors (zero unless ``floored``) and its miss cost (zero unless its ``target`` is
    ``over-misses``), fitted on its training ``rows``."""
    floors = Floors.fit(rows) if floored else Floors()
    return floors, MissCost.fit(rows, floors) if target == "over-misses" else MissCost()


def _read_bases(data: dict) -> tuple[Floors, MissCost]:
    """A learned model's floors and miss cost as its file holds them, checked."""
    return Floors.from_json(data["floors"]), MissCost.from_json(data["misses"])


def _loss(data: dict) -> str:
    loss = str(data["loss"])
    if loss not in LOSSES:
        raise DcaccelError(f"costmodel model: the loss is '{loss}', expected one of {', '.join(LOSSES)}")
    return loss


@dataclass
class AnalyticModel:
    """The analytic time of a step, scaled as the learned models' target: a map's work (``max(I, O)``
    elements) times one fitted factor (ns per element), a copy's bytes (:func:`units`) times another (ns per
    byte); each factor the geometric mean over the training rows of their kind (the factor of maps where
    there are no copies)."""

    factor: float = 1.0
    copy_factor: float = 1.0

    def fit(self, rows: Sequence[Row]) -> AnalyticModel:
        per_unit, copies = np.log(times(rows)) - np.log(units(rows)), _copies(rows)
        self.factor = float(np.exp(np.mean(per_unit[~copies]))) if (~copies).any() else 1.0
        self.copy_factor = float(np.exp(np.mean(per_unit[copies]))) if copies.any() else self.factor
        return self

    def predict(self, rows: Sequence[Row]) -> np.ndarray:
        return np.where(_copies(rows), self.copy_factor, self.factor) * units(rows)

    def to_json(self) -> dict:
        return {"factor": self.factor, "copy_factor": self.copy_factor}

    @classmethod
    def from_json(cls, data: dict) -> AnalyticModel:
        return cls(
            _finite(data["factor"], "analytic factor", positive=True),
            _finite(data["copy_factor"], "analytic copy factor", positive=True),
        )


@dataclass
class BoostedModel:
    """Gradient-boosted regression trees on the hand features, predicting a step's time above its floor
    (:class:`Floors`) and its atomic writes (:func:`above_fixed`) over its miss cost (:class:`MissCost`), or per
    unit of work, or itself (``target``, :data:`TARGETS`): its logarithm under the ``squared`` and ``absolute``
    losses, itself under ``relative`` (``loss``, :data:`LOSSES`)."""

    target: str = "over-misses"
    loss: str = BOOSTED_LOSS
    categories: dict[str, list[str]] = field(default_factory=dict)
    baseline: float = 0.0
    trees: list[dict[str, list]] = field(default_factory=list)  # per tree: feature, threshold, left, right, value
    floors: Floors = field(default_factory=Floors)
    misses: MissCost = field(default_factory=MissCost)
    floored: bool = True  # False: the floors stay 0 (the whole time is learned)
    iterations: int = 300
    leaf_rows: int = LEAF_ROWS  # the fewest training rows in a leaf
    seed: int = 0

    def fit(self, rows: Sequence[Row]) -> BoostedModel:
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        self.categories = {name: sorted({str(row.features[name]) for row in rows}) for name in CATEGORICAL}
        features = feature_matrix([row.features for row in rows], self.categories)
        regressor = HistGradientBoostingRegressor(
            loss="squared_error" if self.loss == "squared" else "absolute_error",
            max_iter=self.iterations,
            learning_rate=0.05,
            max_leaf_nodes=15,
            min_samples_leaf=self.leaf_rows,
            random_state=self.seed,
        )
        self.floors, self.misses = _fit_bases(rows, self.target, self.floored)
        measured, scale = times(rows), _scale(rows, self.target, self.misses)
        target = above_fixed(rows, self.floors, self.misses) / scale
        with threadpool_limits(1, user_api="openmp"):  # a shared machine: OpenMP threads spin-wait for cores
            if self.loss == "relative":  # |predicted - measured| / measured = |error of the target| * scale / measured
                regressor.fit(features, target, sample_weight=scale / measured * program_weights(rows))
            else:
                regressor.fit(features, np.log(target))
        self.baseline = float(np.ravel(regressor._baseline_prediction)[0])
        self.trees = [_tree_json(predictors[0].nodes) for predictors in regressor._predictors]
        return self

    def predict(self, rows: Sequence[Row]) -> np.ndarray:
        features = feature_matrix([row.features for row in rows], self.categories)
        raw = np.full(len(rows), self.baseline)
        for tree in self.trees:
            raw += _evaluate_tree(tree, features)
        target = np.maximum(raw, 0.0) if self.loss == "relative" else np.exp(raw)  # relative: the target itself
        fixed = _fixed(rows, self.floors, self.misses)
        return np.maximum(fixed + target * _scale(rows, self.target, self.misses), 1.0)  # 1 ns, as times are read

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "loss": self.loss,
            "categories": self.categories,
            "baseline": self.baseline,
            "trees": self.trees,
            "floors": self.floors.to_json(),
            "misses": self.misses.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict) -> BoostedModel:
        categories = {name: [str(v) for v in data["categories"][name]] for name in CATEGORICAL}
        trees = []
        for tree in data["trees"]:
            checked = {key: [float(v) for v in tree[key]] for key in ("threshold", "value")}
            checked.update({key: [int(v) for v in tree[key]] for key in ("feature", "left", "right", "missing_left")})
            sizes = {len(values) for values in checked.values()}
            width = len(NUMERIC) + len(DERIVED) + len(CATEGORICAL)
            inner = [node for node, f in enumerate(checked["feature"]) if f >= 0]
            if (
                len(sizes) != 1
                or not checked["value"]
                or any(not -1 <= f < width for f in checked["feature"])
                or any(not node < checked[side][node] < len(checked["value"]) for node in inner for side in BRANCHES)
                or not all(map(math.isfinite, checked["value"]))
                or any(math.isnan(t) for t in checked["threshold"])
            ):
                raise DcaccelError("costmodel model: a tree of the boosted model is malformed")
            trees.append(checked)
        baseline = _finite(data["baseline"], "boosted baseline")
        return cls(_target(data), _loss(data), categories, baseline, trees, *_read_bases(data))


def _tree_json(nodes: np.ndarray) -> dict[str, list]:
    """A scikit-learn tree (its ``nodes`` array) as lists; a leaf has feature -1."""
    leaf = nodes["is_leaf"].astype(bool)
    return {
        "feature": np.where(leaf, -1, nodes["feature_idx"]).tolist(),
        "threshold": nodes["num_threshold"].tolist(),
        "missing_left": nodes["missing_go_to_left"].astype(int).tolist(),
        "left": nodes["left"].astype(int).tolist(),
        "right": nodes["right"].astype(int).tolist(),
        "value": nodes["value"].tolist(),
    }


def _evaluate_tree(tree: dict[str, list], features: np.ndarray) -> np.ndarray:
    """The leaf value each row of ``features`` reaches (left when the feature is at most the threshold)."""
    feature = np.asarray(tree["feature"])
    threshold, value = np.asarray(tree["threshold"]), np.asarray(tree["value"])
    left, right, missing_left = np.asarray(tree["left"]), np.asarray(tree["right"]), np.asarray(tree["missing_left"])
    node = np.zeros(len(features), dtype=np.int64)
    rows = np.arange(len(features))
    for _ in range(len(feature)):
        inner = feature[node] >= 0
        if not inner.any():
            break
        x = features[rows[inner], feature[node[inner]]]
        go_left = np.where(np.isnan(x), missing_left[node[inner]] == 1, x <= threshold[node[inner]])
        node[inner] = np.where(go_left, left[node[inner]], right[node[inner]])
    return value[node]


#: Token ids of the sequence model: padding and unknown tokens.
PAD, UNKNOWN = 0, 1


def mean_loss(loss: str, error):
    """The mean ``loss`` (:data:`LOSSES`) of a batch whose predicted logarithms are off by ``error``."""
    import torch

    if loss == "relative":
        return torch.expm1(error).abs().mean()  # |predicted - measured| / measured
    return error.abs().mean() if loss == "absolute" else error.square().mean()


@dataclass
class SequenceModel:
    """A convolutional encoder of a step's IR tokens with the logarithm of its analytic work, predicting the
    logarithm of the time above the step's floor (:class:`Floors`) and its atomic writes (:func:`above_fixed`)
    over its miss cost (:class:`MissCost`), or per unit of work, or of itself (``target``, :data:`TARGETS`)."""

    target: str = "over-misses"
    loss: str = SEQUENCE_LOSS
    vocabulary: list[str] = field(default_factory=list)
    state: dict[str, dict] = field(default_factory=dict)  # the network's weights: name -> shape, values
    floors: Floors = field(default_factory=Floors)
    misses: MissCost = field(default_factory=MissCost)
    floored: bool = True  # False: the floors stay 0 (the whole time is learned)
    width: int = 32
    epochs: int = 25
    seed: int = 0

    def _network(self):
        import torch

        class Encoder(torch.nn.Module):
            def __init__(self, tokens: int, width: int):
                super().__init__()
                self.embed = torch.nn.Embedding(tokens, width, padding_idx=PAD)
                self.conv = torch.nn.Conv1d(width, width, kernel_size=3, padding=1)
                self.head = torch.nn.Sequential(
                    torch.nn.Linear(2 * width + 1, width), torch.nn.ReLU(), torch.nn.Linear(width, 1)
                )

            def forward(self, ids, lengths, work):
                mask = (ids != PAD).unsqueeze(2)
                hidden = torch.relu(self.conv(self.embed(ids).transpose(1, 2))).transpose(1, 2) * mask
                mean = hidden.sum(dim=1) / lengths[:, None]
                peak = hidden.masked_fill(~mask, 0.0).amax(dim=1)
                return self.head(torch.cat([mean, peak, work[:, None]], dim=1))[:, 0]

        return Encoder(len(self.vocabulary) + 2, self.width)

    def _inputs(self, rows: Sequence[Row]):
        import torch

        index = {token: i + 2 for i, token in enumerate(self.vocabulary)}
        lengths = [max(len(row.tokens), 1) for row in rows]
        ids = torch.full((len(rows), max(lengths, default=1)), PAD, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : lengths[i]] = torch.tensor([index.get(token, UNKNOWN) for token in row.tokens] or [UNKNOWN])
        return ids, torch.tensor(lengths), torch.tensor(np.log(_work(rows)), dtype=torch.float32)

    def fit(self, rows: Sequence[Row]) -> SequenceModel:
        import torch

        torch.manual_seed(self.seed)
        torch.set_num_threads(1)
        self.vocabulary = sorted({token for row in rows for token in row.tokens})
        network = self._network()
        ids, lengths, work = self._inputs(rows)
        self.floors, self.misses = _fit_bases(rows, self.target, self.floored)
        target = torch.tensor(
            np.log(above_fixed(rows, self.floors, self.misses) / _scale(rows, self.target, self.misses)),
            dtype=torch.float32,
        )
        shift = float(target.mean())
        optimizer = torch.optim.Adam(network.parameters(), lr=3e-3)
        generator = torch.Generator().manual_seed(self.seed)
        for _ in range(self.epochs):
            # batches of sequences of similar lengths (ties broken at random), in random order, each padded
            # to its own longest sequence only: the scopes' token counts range from 5 to 256
            jitter = torch.rand(len(rows), generator=generator)
            batches = torch.argsort(lengths + jitter).split(64)
            for index in torch.randperm(len(batches), generator=generator).tolist():
                batch = batches[index]
                longest = int(lengths[batch].max())
                optimizer.zero_grad()
                predicted = network(ids[batch, :longest], lengths[batch], work[batch])
                mean_loss(self.loss, predicted + shift - target[batch]).backward()
                optimizer.step()
        self.state = {
            name: {"shape": list(t.shape), "values": t.flatten().tolist()} for name, t in network.state_dict().items()
        }
        self.state["shift"] = {"shape": [], "values": [shift]}
        return self

    def predict(self, rows: Sequence[Row]) -> np.ndarray:
        import torch

        network = self._network()
        weights = {
            name: torch.tensor(item["values"], dtype=torch.float32).reshape(item["shape"])
            for name, item in self.state.items()
            if name != "shift"
        }
        try:
            network.load_state_dict(weights)
        except RuntimeError as err:
            raise DcaccelError(
                f"costmodel model: the sequence model's weights do not fit its network ({str(err).splitlines()[0]})"
            ) from None
        network.eval()
        with torch.no_grad():
            log_time = network(*self._inputs(rows)).numpy() + self.state["shift"]["values"][0]
        fixed = _fixed(rows, self.floors, self.misses)
        return fixed + np.exp(log_time.astype(np.float64)) * _scale(rows, self.target, self.misses)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "loss": self.loss,
            "vocabulary": self.vocabulary,
            "width": self.width,
            "state": self.state,
            "floors": self.floors.to_json(),
            "misses": self.misses.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict) -> SequenceModel:
        state = {
            str(name): {"shape": [int(s) for s in item["shape"]], "values": [float(v) for v in item["values"]]}
            for name, item in data["state"].items()
        }
        if (
            any(min(item["shape"], default=0) < 0 for item in state.values())
            or any(math.prod(item["shape"]) != len(item["values"]) for item in state.values())
            or any(not all(map(math.isfinite, item["values"])) for item in state.values())
            or len(state.get("shift", {}).get("values", ())) != 1
        ):
            raise DcaccelError("costmodel model: the sequence model's weights are malformed")
        width = int(data["width"])
        if not 1 <= width <= MAX_WIDTH:
            raise DcaccelError(f"costmodel model: the sequence model's width is {width}, expected 1 to {MAX_WIDTH}")
        vocabulary = [str(t) for t in data["vocabulary"]]
        return cls(_target(data), _loss(data), vocabulary, state, *_read_bases(data), width=width)


@dataclass
class CostModel:
    """The analytic baseline and the two learned models, trained on the same rows; ``scales``, each model's
    factor for the machine it is used on (:meth:`calibrated`; 1 for a model not calibrated)."""

    analytic: AnalyticModel
    boosted: BoostedModel
    sequence: SequenceModel
    trained_on: dict[str, int] = field(default_factory=dict)  # family -> rows
    scales: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MODELS, 1.0))
    calibrated_on: dict[str, int] = field(default_factory=dict)  # family -> rows; empty: not calibrated

    @classmethod
    def train(cls, rows: Sequence[Row], seed: int = 0) -> CostModel:
        if not rows:
            raise DcaccelError("costmodel train: no rows to train on")
        return cls(
            AnalyticModel().fit(rows),
            BoostedModel(seed=seed).fit(rows),
            SequenceModel(seed=seed).fit(rows),
            _families(rows),
        )

    def calibrated(self, rows: Sequence[Row]) -> CostModel:
        """This model for the machine ``rows`` were measured on: each model's predictions times the factor of
        least task MAPE on ``rows`` (:func:`relative_scale`, fitted anew on the unscaled predictions), its
        trees, network and miss cost unchanged. Another host of the project's machine kind ran whole programs
        0.78 to 0.86 times as long as the shipped rows' host (docs/costmodel.md, "On another machine"): one
        factor fitted on programs like the ones to be predicted follows most of that."""
        if not rows:
            raise DcaccelError("costmodel calibrate: no rows to calibrate on")
        measured = times(rows)
        unscaled = replace(self, scales=dict.fromkeys(MODELS, 1.0))
        scales = {
            kind: _finite(
                relative_scale(unscaled.predict(rows, kind), measured), f"scale of the {kind} model", positive=True
            )
            for kind in MODELS
        }
        return replace(self, scales=scales, calibrated_on=_families(rows))

    def predict(self, rows: Sequence[Row], kind: str) -> np.ndarray:
        """The predicted time in nanoseconds of each of ``rows`` by the model ``kind`` (``analytic`` or one of
        :data:`KINDS`), times its scale."""
        if kind not in MODELS:
            raise DcaccelError(f"costmodel: no model '{kind}' (models: {', '.join(MODELS)})")
        with np.errstate(over="ignore"):
            predicted = getattr(self, kind).predict(rows) * self.scales[kind]
        if not np.isfinite(predicted).all():
            raise DcaccelError(f"costmodel: the {kind} model predicts a time that is not a finite number")
        return predicted

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "trained_on": self.trained_on,
            "scales": self.scales,
            "calibrated_on": self.calibrated_on,
            "analytic": self.analytic.to_json(),
            "boosted": self.boosted.to_json(),
            "sequence": self.sequence.to_json(),
        }

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: str | os.PathLike) -> CostModel:
        """The model in ``path``; a file that is not a cost model of this version is refused in one line."""
        path = Path(path)
        if path.is_dir():
            raise DcaccelError(f"costmodel model {path}: is a folder")
        if not path.is_file():
            raise DcaccelError(f"costmodel model {path}: no such file")
        if path.stat().st_size > MAX_MODEL_BYTES:
            raise DcaccelError(f"costmodel model {path}: larger than {MAX_MODEL_BYTES} bytes")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DcaccelError(f"costmodel model {path}: not JSON ({err})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
            raise DcaccelError(f"costmodel model {path}: not a {FORMAT} file of version {VERSION}")
        try:
            return cls(
                AnalyticModel.from_json(data["analytic"]),
                BoostedModel.from_json(data["boosted"]),
                SequenceModel.from_json(data["sequence"]),
                _counts(data["trained_on"], "trained_on"),
                _scales(data["scales"]),
                _counts(data["calibrated_on"], "calibrated_on"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DcaccelError(f"costmodel model {path}: field {err} missing or of the wrong type") from None
        except DcaccelError as err:
            raise DcaccelError(f"costmodel model {path}: {str(err).removeprefix('costmodel model: ')}") from None


def _mapping(data, name: str) -> dict:
    """A file's field ``name`` that must be a JSON object."""
    if not isinstance(data, dict):
        raise DcaccelError(f"costmodel model: {name} is {type(data).__name__}, expected an object")
    return data


def _counts(data, name: str) -> dict[str, int]:
    """A file's rows per family (``trained_on``, ``calibrated_on``): each a whole number above 0."""
    for family, count in _mapping(data, name).items():
        if type(count) is not int or count <= 0:
            raise DcaccelError(f"costmodel model: {name}[{family!r}] is {count!r}, expected a whole number above 0")
    return {str(family): count for family, count in data.items()}


def _scales(data) -> dict[str, float]:
    """A file's scales: one finite number above 0 for each of :data:`MODELS`, and no other."""
    if set(_mapping(data, "scales")) != set(MODELS):
        raise DcaccelError(f"costmodel model: the scales are of {sorted(data)}, expected one of each of {list(MODELS)}")
    for kind, scale in data.items():
        if isinstance(scale, bool) or not isinstance(scale, int | float):
            raise DcaccelError(f"costmodel model: the scale of the {kind} model is {scale!r}, expected a number")
    return {kind: _finite(data[kind], f"scale of the {kind} model", positive=True) for kind in MODELS}


def _families(rows: Sequence[Row]) -> dict[str, int]:
    """The rows per family of ``rows``, by family name."""
    families: dict[str, int] = {}
    for row in rows:
        families[row.family] = families.get(row.family, 0) + 1
    return dict(sorted(families.items()))
