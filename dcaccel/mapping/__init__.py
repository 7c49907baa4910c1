"""Mapping search: every layer's mapping in one notation, searched off-chip first, then on-chip.

- :mod:`~dcaccel.mapping.notation`: :class:`Mapping` and its text form (``parse``);
- :mod:`~dcaccel.mapping.layers`: the mapped layers of a model and their loop nests;
- :mod:`~dcaccel.mapping.space`: the bounded mapping space of a layer, its size as formula and number;
- :mod:`~dcaccel.mapping.realise`: a mapping applied to the lowered layer with DaCe's ``MapTiling``;
- :mod:`~dcaccel.mapping.offchip`: the off-chip stage (traffic from closed forms, no scheduling);
- :mod:`~dcaccel.mapping.onchip`: the on-chip stage's cost of a mapping on an architecture;
- :mod:`~dcaccel.mapping.search`: ``map`` (``dcaccel.map``), the search of a whole model.

See ``docs/mapping.md``.
"""

from dcaccel.mapping.notation import Mapping, parse
from dcaccel.mapping.onchip import OBJECTIVES
from dcaccel.mapping.search import SEARCHES, MappingResult, map_workload

#: ``dcaccel.map(workload, arch, objective=...)``.
map = map_workload  # noqa: A001

__all__ = ["OBJECTIVES", "SEARCHES", "Mapping", "MappingResult", "map", "map_workload", "parse"]
