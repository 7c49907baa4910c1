"""The canonical shapes of the MMM node, one expansion per module."""

from dcaccel.expansions.mmm.expansions.lmv import ExpandLMV, build_lmv_sdfg
from dcaccel.expansions.mmm.expansions.mv import ExpandMV, build_mv_sdfg
from dcaccel.expansions.mmm.expansions.op import ExpandOP, build_op_sdfg

__all__ = ["ExpandLMV", "ExpandMV", "ExpandOP", "build_lmv_sdfg", "build_mv_sdfg", "build_op_sdfg"]
