"""``transformer-encoder``: one post-norm transformer encoder layer, written with explicit operators.

Multi-head self-attention (query, key and value projections, scores = Q·Kᵀ/√d, softmax, context =
scores·V, output projection), residual add and LayerNorm, then a feed-forward network (linear, exact
GELU, linear), residual add and LayerNorm. The input is 1×seq×d_model (default 1×16×64, 4 heads,
feed-forward width 128). In ONNX: MatMul, Add, Mul, Softmax, Transpose, Reshape, LayerNormalization,
and GELU as Div, Erf, Add, Mul.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from dcaccel.frontend import Workload, load
from dcaccel.workloads.init import seeded

SEED = 0


class EncoderLayer(nn.Module):
    """A transformer encoder layer on a batch of one sequence."""

    def __init__(self, d_model: int = 64, heads: int = 4, ff: int = 128):
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(d_model // heads)
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, ff)
        self.ff2 = nn.Linear(ff, d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def _split_heads(self, x):
        batch, seq, d_model = x.shape
        return x.reshape(batch, seq, self.heads, d_model // self.heads).transpose(1, 2)

    def forward(self, x):
        batch, seq, d_model = x.shape
        q, k, v = (self._split_heads(proj(x)) for proj in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.transpose(1, 2).reshape(batch, seq, d_model)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


def model(d_model: int = 64, heads: int = 4, ff: int = 128) -> EncoderLayer:
    """The encoder layer with weights drawn from a fixed seed."""
    return seeded(lambda: EncoderLayer(d_model, heads, ff), SEED)


def workload(seq: int = 16, d_model: int = 64, heads: int = 4, ff: int = 128) -> Workload:
    """The ``transformer-encoder`` workload on one seq×d_model input."""
    return load(model(d_model, heads, ff), (torch.zeros(1, seq, d_model),), name="transformer-encoder")
