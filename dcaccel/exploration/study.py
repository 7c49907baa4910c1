"""A study: what one exploration covers, declared once, validated, and kept as YAML beside its results.

A :class:`Study` names the models (and their symbolic sizes), the implementation space and how it is
enumerated, the architectures and their swept parameters, the PE counts, schedulers and on-chip sizes,
the partition policies, the objective and cost proxy, how task DAGs are built (:class:`DagOptions`),
where assignments run (:class:`Execution`) and the result store (:class:`Store`). Every field carries its
description (and unit) and its default, the defaults of :func:`dcaccel.explore`, so a study that sets
nothing explores as ``explore(model)`` does.

A study file is data, never code: it is read within the bounds of the architecture reader
(:func:`~dcaccel.architecture.reader.read_yaml`: size, nesting, aliases, no duplicate key), and any field the
study does not have, or a value out of range, is refused in one line naming the field
(``study s.yaml: execution.workers: Input should be greater than 0``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator, model_validator

from dcaccel.architecture import DEFAULT as DEFAULT_ARCHITECTURE
from dcaccel.architecture import DEFAULT_PES, Architecture, design_pes
from dcaccel.architecture.reader import first_problem, read_file, read_yaml, shown, validated
from dcaccel.cost.learned import ANALYTIC, check_cost
from dcaccel.cost.proxy import CostModel
from dcaccel.dag.walk import EDGE_VOLUME_RULES, Granularity
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import STRATEGIES
from dcaccel.exploration.executors import check_executor
from dcaccel.exploration.mapping import MAPPING
from dcaccel.exploration.points import SWEEP_SCHEDULERS, metrics
from dcaccel.exploration.store import MAX_INTEGER
from dcaccel.mapping.onchip import OBJECTIVES as MAPPING_OBJECTIVES
from dcaccel.partitioning import OBJECTIVES as PARTITION_OBJECTIVES
from dcaccel.scheduler import HETEROGENEOUS, PARTITIONINGS
from dcaccel.transforms.offload import POLICIES

#: The ``partition_policy`` of a point of the plain pipeline (no operator kept on a host).
NO_PARTITION = "none"
#: The values of the ``partition_policy`` column.
PARTITION_POLICIES = (NO_PARTITION, *POLICIES)
DEFAULT_SCHEDULERS = ("streaming", "list")
#: The most PEs a schedule takes (the schedulers keep per-PE state: 2**20 PEs take a few seconds).
MAX_PES = 2**20
#: The objectives the commands share, and the results column each ranks points by.
OBJECTIVE_COLUMNS = {"makespan": "makespan_cycles", "energy": "energy_pj"}

#: A value of an architecture parameter: a YAML scalar.
Scalar = str | int | float | bool
#: An architecture as a study holds it: a shipped name, a YAML file, or a description (a mapping, or an
#: :class:`Architecture` given to :func:`dcaccel.explore`, written as its description).
ArchitectureEntry = (
    str | dict[str, Any] | Annotated[Architecture, PlainSerializer(lambda arch: arch.to_dict(), return_type=dict)]
)


def _one_of(value: str, known: tuple[str, ...], what: str) -> str:
    """``value`` if it is one of ``known``, else a ValueError naming it as a ``what``."""
    if value not in known:
        raise ValueError(f"unknown {what} {value!r} (expected one of {', '.join(known)})")
    return value


def _several(value: Any, name: str, low: int | None = None, high: int | None = None) -> tuple:
    """``value`` (one or several) as a non-empty tuple; with ``low``, of integers at least ``low`` (and at most
    ``high``). A value that is not a sequence (a number, a name, nothing, a mapping) is one value, checked as
    such."""
    values = _values(value)
    with contextlib.suppress(TypeError):  # an unhashable value is refused below or by the field's type
        values = tuple(dict.fromkeys(values))  # each once: a value given twice gave every point twice
    if not values:
        raise ValueError(f"{name} is empty")
    if low is not None:
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < low]
        if bad:
            raise ValueError(f"{name} must be integers of at least {low}, got {bad[0]!r}")
        large = [v for v in values if high is not None and v > high]
        if large:
            raise ValueError(f"{name} {large[0]}: at most {high}")
    return values


def _values(value: Any) -> tuple:
    """``value`` as a tuple: its items when it is a sequence or set, else ``value`` alone."""
    return tuple(value) if isinstance(value, (list, tuple, set, frozenset, range)) else (value,)


class _Part(BaseModel):
    """A part of a study: validated, frozen, no field it does not declare."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class DagOptions(_Part):
    """How each assignment's task DAG is built."""

    granularity: str = Field(
        "task", description="task: one task per iteration of a task map; coarse: one per task map; tiles=T: T per map"
    )
    edge_volume: str = Field(
        "exact", description="edge volume rule of the task DAG: exact, or reference (as the seed's tool counted)"
    )
    compose: bool = Field(True, description="compose each DAG from the nodes' fragments (the same DAG, no re-lowering)")
    strict: bool = Field(False, description="refuse an op with no canonical implementation (else one opaque task)")

    @field_validator("granularity", mode="before")
    @classmethod
    def _granularity(cls, value: Any) -> str:
        try:
            parsed = Granularity.parse(value)
        except DcaccelError as err:
            raise ValueError(str(err)) from None
        return f"tiles={parsed.tiles}" if parsed.mode == "tiles" else parsed.mode

    @field_validator("edge_volume")
    @classmethod
    def _edge_volume(cls, value: str) -> str:
        return _one_of(value, EDGE_VOLUME_RULES, "edge volume")


class PartitionOptions(_Part):
    """The split of every assignment between an architecture's host and its accelerator (``docs/partitioning.md``)."""

    partition_policy: tuple[str, ...] | None = Field(
        None,
        description="how operators are split between the architecture's host and its accelerator: greedy, "
        "min-region, cost, or none (the plain pipeline, no split); unset: none only",
    )
    min_nodes: int = Field(
        2, description="min-region: fewest operators of an offloaded region", json_schema_extra={"unit": "operators"}
    )
    min_work_share: float = Field(
        0.05,
        description="min-region: least share of the work of an offloaded region",
        json_schema_extra={"unit": "a fraction, 0 to 1"},
    )
    partition_objective: str = Field("makespan", description="what the cost policy minimises: makespan, energy, edp")

    @field_validator("partition_policy", mode="before")
    @classmethod
    def _policies(cls, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        policies = _several(value, "partition_policy")
        for name in policies:
            _one_of(name, PARTITION_POLICIES, "partition policy")
        return tuple(dict.fromkeys(policies))

    @field_validator("min_nodes", mode="before")
    @classmethod
    def _min_nodes(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"min_nodes must be an integer of at least 0, got {value!r}")
        return value

    @field_validator("min_work_share")
    @classmethod
    def _work_share(cls, value: float) -> float:
        if not 0 <= value <= 1:
            raise ValueError(f"min_work_share must be between 0 and 1, got {value}")
        return value

    @field_validator("partition_objective")
    @classmethod
    def _objective(cls, value: str) -> str:
        return _one_of(value, PARTITION_OBJECTIVES, "partition objective")

    @property
    def policies(self) -> tuple[str, ...]:
        """The ``partition_policy`` values of the sweep's points."""
        return self.partition_policy or (NO_PARTITION,)


class Execution(_Part):
    """Where the assignments are evaluated."""

    executor: str = Field("local", description="local (this process), process (a pool), or dask (a cluster)")
    workers: int | None = Field(
        None,
        description="processes of the pool or of the local Dask cluster (unset: cores)",
        json_schema_extra={"unit": "processes"},
    )
    address: str | None = Field(None, description="Dask scheduler address (unset: a local cluster on loopback)")

    @model_validator(mode="after")
    def _checked(self) -> Execution:
        try:
            check_executor(self.executor, self.address, self.workers)
        except DcaccelError as err:
            raise ValueError(str(err)) from None
        return self


class Store(_Part):
    """The result file the points stream into as their assignments finish."""

    results: str | None = Field(None, description="SQLite result file (.sqlite, .sqlite3, .db); unset: none")
    resume: bool = Field(False, description="continue the result file, skipping the stored points")

    @field_validator("results", mode="before")
    @classmethod
    def _path(cls, value: Any) -> str | None:
        return None if value is None else str(value)


#: The parts of a study, by field name.
PARTS = {"dag": DagOptions, "partition": PartitionOptions, "execution": Execution, "store": Store}


class Study(_Part):
    """What one exploration covers (see the module docstring); :meth:`of` builds one from
    :func:`dcaccel.explore`'s flat keywords, :meth:`load` from a YAML file."""

    models: tuple[str, ...] = Field(
        description="built-in workload names, .onnx files or path/to/file.py:attribute specs", min_length=1
    )
    symbols: dict[str, int] = Field(default_factory=dict, description="values of the models' symbolic sizes")
    implementations: dict[str, tuple[str, ...]] | None = Field(
        None,
        description="op type or node name -> implementations to try (unset: every op type with a choice, all of them)",
    )
    strategy: str = Field(
        "per-op-type", description="per-op-type, per-node, greedy, or mapping (the mapping search per layer)"
    )
    max_assignments: int = Field(
        4096,
        gt=0,
        description="the most assignments of the per-node strategy",
        json_schema_extra={"unit": "assignments"},
    )
    objective: str = Field(
        "makespan",
        description="what is minimised (greedy, the mapping search): makespan (cycles on the architecture), "
        "energy (pJ), edp (their product; the mapping search) or a numeric results column (greedy)",
    )
    arch: tuple[ArchitectureEntry, ...] = Field(
        (DEFAULT_ARCHITECTURE,),
        description="accelerator designs the schedules are placed and costed on: shipped names "
        "(dcaccel arch list), YAML files or descriptions",
    )
    arch_params: dict[str, tuple[Scalar, ...]] | None = Field(
        None, description="architecture parameter path -> values: each architecture swept over their product"
    )
    pes: tuple[int, ...] | None = Field(
        None,
        description="PE counts P: the processing elements a schedule uses, and the count of a unit kind the "
        "architecture leaves open (heft: the architecture's units)",
        json_schema_extra={
            "unit": "PEs",
            "unset": "the designs' units when every architecture fixes its unit counts, "
            f"else {','.join(map(str, DEFAULT_PES))}",
        },
    )
    scheduler: tuple[str, ...] = Field(
        DEFAULT_SCHEDULERS, description="streaming, list, or heft (on the unit kinds of the architecture)"
    )
    onchip_memory: tuple[int, ...] = Field(
        (0,),
        description="on-chip memory per block (0: the architecture's on-chip capacity)",
        json_schema_extra={"unit": "elements"},
    )
    partitioning: str = Field("relaxed", description="how the streaming scheduler splits the DAG: relaxed or strict")
    cost_model: CostModel = Field(default_factory=CostModel, description="coefficients of the area and power proxy")
    cost: str = Field(
        ANALYTIC,
        description="analytic, or learned:FILE: also the makespan on this machine's CPU predicted by the model "
        "file of dcaccel costmodel train or calibrate (the learned_seconds column)",
    )
    partition: PartitionOptions = Field(default_factory=PartitionOptions, description="host/accelerator split")
    dag: DagOptions = Field(default_factory=DagOptions, description="how task DAGs are built")
    execution: Execution = Field(default_factory=Execution, description="where assignments are evaluated")
    store: Store = Field(default_factory=Store, description="the result file")

    @field_validator("models", mode="before")
    @classmethod
    def _models(cls, value: Any) -> tuple:
        return _several(value, "models")

    @field_validator("symbols", mode="before")
    @classmethod
    def _symbols_not_true(cls, value: Any) -> Any:
        """A size written true or false is refused (pydantic would read it as 1 or 0)."""
        flags = [name for name, size in value.items() if isinstance(size, bool)] if isinstance(value, dict) else []
        if flags:
            raise ValueError(f"symbols: {shown(flags[0])}={value[flags[0]]}: a size is an integer, not a boolean")
        return value

    @field_validator("symbols")
    @classmethod
    def _symbols(cls, value: dict[str, int]) -> dict[str, int]:
        for name, size in value.items():
            if not name.isidentifier() or size < 1:
                raise ValueError(f"symbols: {name}={size}: a name must be an identifier, a size at least 1")
        return value

    @field_validator("implementations")
    @classmethod
    def _implementations(cls, value: dict[str, tuple[str, ...]] | None) -> dict[str, tuple[str, ...]] | None:
        empty = [key for key, names in (value or {}).items() if not names]
        if empty:
            raise ValueError(f"implementations: {shown(empty[0])} has no implementation to try (a sweep of no points)")
        return value

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        return _one_of(value, (*STRATEGIES, MAPPING), "strategy")

    @field_validator("arch", mode="before")
    @classmethod
    def _arch(cls, value: Any) -> tuple:
        value = tuple(str(entry) if isinstance(entry, Path) else entry for entry in _values(value))
        if not value:
            raise ValueError("arch is empty")
        return value

    @field_validator("pes", mode="before")
    @classmethod
    def _pes(cls, value: Any) -> tuple | None:
        return None if value is None else _several(value, "pes", 1, MAX_PES)

    @field_validator("onchip_memory", mode="before")
    @classmethod
    def _onchip(cls, value: Any) -> tuple:
        return _several(value, "onchip_memory", 0, MAX_INTEGER)

    @field_validator("scheduler", mode="before")
    @classmethod
    def _schedulers(cls, value: Any) -> tuple:
        return tuple(_one_of(name, SWEEP_SCHEDULERS, "scheduler") for name in _several(value, "scheduler"))

    @field_validator("cost")
    @classmethod
    def _cost(cls, value: str) -> str:
        return check_cost(value)

    @field_validator("partitioning")
    @classmethod
    def _partitioning(cls, value: str) -> str:
        return _one_of(value, PARTITIONINGS, "partitioning")

    @model_validator(mode="after")
    def _together(self) -> Study:
        """The checks of several fields: the objective of the strategy, the schedulers a partition needs."""
        if self.strategy == MAPPING:
            if self.objective not in MAPPING_OBJECTIVES:
                raise ValueError(
                    f"the mapping strategy's objective is one of {', '.join(MAPPING_OBJECTIVES)}, "
                    f"not {self.objective!r}"
                )
            if self.partition.partition_policy is not None:
                raise ValueError("the mapping strategy takes no partition policy (its rows are mappings)")
        elif objective_column(self.objective) not in metrics():
            raise ValueError(
                f"objective {self.objective!r} is neither makespan, energy nor a numeric column of the results"
            )
        policies = self.partition.policies
        if any(name != NO_PARTITION for name in policies) and HETEROGENEOUS not in self.scheduler:
            raise ValueError(
                f"a partition policy places tasks on the host and accelerator units, which only the "
                f"{HETEROGENEOUS} scheduler honours: add it to the schedulers"
            )
        unused = [name for name in self.scheduler if name != HETEROGENEOUS]
        if unused and NO_PARTITION not in policies:
            raise ValueError(
                f"scheduler {unused[0]} gives no points under partition policy {policies[0]} (a partition is "
                f"scheduled with {HETEROGENEOUS}): add partition policy {NO_PARTITION} for the plain pipeline's points"
            )
        return self

    def pe_counts(self, archs: tuple[Architecture, ...]) -> tuple[int, ...]:
        """The PE counts of the study's points on the designs ``archs`` (``arch`` swept over ``arch_params``):
        ``pes``, or unset the designs' units (:func:`~dcaccel.architecture.design_pes`)."""
        return self.pes or design_pes(archs)

    # ------------------------------------------------------------------ building, reading, writing

    @classmethod
    def of(cls, source: str = "explore", **fields: Any) -> Study:
        """The study of ``fields``, each a field of the study or of one of its parts (:data:`PARTS`), named
        flat as :func:`dcaccel.explore` takes them (``executor="process"`` sets ``execution.executor``).
        Raises :class:`DcaccelError` in one line starting with ``source`` for an unknown field or bad value."""
        data: dict[str, Any] = {}
        for name, value in fields.items():
            part = next((part for part, model in PARTS.items() if name in model.model_fields), None)
            if part is not None:
                data.setdefault(part, {})[name] = value
            elif name in cls.model_fields and name not in PARTS:
                data[name] = value
            else:
                raise DcaccelError(f"{source}: unknown option {name!r} (not a field of dcaccel.Study)")
        return cls.validated(data, source)

    @classmethod
    def validated(cls, data: Any, source: str) -> Study:
        """The study of ``data`` (the parsed YAML, or keyword fields by part); raises :class:`DcaccelError`
        in one line starting with ``source``, naming the field."""
        expected = "a mapping of the study's fields"
        return validated(cls, data, source, lambda err: describe_error(err, source), DcaccelError, expected)

    @classmethod
    def from_yaml(cls, text: str, source: str = "?") -> Study:
        """The study written in YAML ``text`` (``source`` names it in errors)."""
        return cls.validated(read_yaml(text, source, what="study"), f"study {source}")

    @classmethod
    def load(cls, path: str | Path) -> Study:
        """The study in the YAML file ``path``."""
        return cls.from_yaml(read_file(path, "study file"), str(path))

    def to_yaml(self) -> str:
        """The study as YAML, every field written (:meth:`from_yaml` reads it back equal)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)

    def replace(self, **fields: Any) -> Study:
        """This study with ``fields`` changed, named flat as in :meth:`of`, validated again."""
        return Study.of("study", **{**flat(self), **fields})


def objective_column(objective: str) -> str:
    """The results column an ``objective`` ranks points by: ``makespan`` the cycles on the point's
    architecture (``makespan_cycles``: the abstract makespan on ``abstract``), ``energy`` its energy in pJ; any
    other objective names its column."""
    return OBJECTIVE_COLUMNS.get(objective, objective)


def describe_error(error: pydantic.ValidationError, source: str) -> str:
    """One line for a failed validation: ``source``, the first problem and where it is
    (``execution.workers``), and how many more there are. A check of this module says what is wrong in its
    own words, naming the field; pydantic's own reports are prefixed with the field's path."""
    first, where, more = first_problem(error)
    if first["type"] == "value_error":
        return f"{source}: {first['msg'].removeprefix('Value error, ')}{more}"
    if first["type"] == "extra_forbidden":
        return f"{source}: {where}: not a field of the study{more}"
    return f"{source}: {where + ': ' if where else ''}{first['msg']}{more}"


def flat(study: Study) -> Mapping[str, Any]:
    """The study's fields named flat (:meth:`Study.of`), parts expanded."""
    found = {name: getattr(study, name) for name in type(study).model_fields if name not in PARTS}
    for part in PARTS:
        found.update(getattr(study, part).model_dump())
    return found
