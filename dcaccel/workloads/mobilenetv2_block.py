"""``mobilenetv2-block``: one MobileNetV2 inverted-residual block on a 1×32×56×56 input.

1×1 expansion convolution (32 → 32·6 channels), batch norm, ReLU6; 3×3 depthwise convolution
(groups = channels), batch norm, ReLU6; 1×1 projection back to 32 channels, batch norm; residual add.
"""

import torch
from torch import nn

from dcaccel.frontend import Workload, load
from dcaccel.workloads.init import seeded

SEED = 0


class InvertedResidual(nn.Module):
    """MobileNetV2's inverted residual block (stride 1, same input and output channels)."""

    def __init__(self, channels: int = 32, expansion: int = 6):
        super().__init__()
        hidden = channels * expansion
        self.expand = nn.Sequential(nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6())
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()
        )
        self.project = nn.Sequential(nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        return x + self.project(self.depthwise(self.expand(x)))


def model(channels: int = 32, expansion: int = 6) -> InvertedResidual:
    """The block with weights drawn from a fixed seed."""
    return seeded(lambda: InvertedResidual(channels, expansion), SEED)


def workload(channels: int = 32, image: int = 56, expansion: int = 6) -> Workload:
    """The ``mobilenetv2-block`` workload on one channels×image×image input."""
    return load(model(channels, expansion), (torch.zeros(1, channels, image, image),), name="mobilenetv2-block")
