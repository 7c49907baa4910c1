"""``lenet``: the seed's LeNet (conv 1→6 and 6→16 with 5×5 kernels, max-pool, ReLU, fc 256-120-84-10, softmax).

Written as in the seed slide deck; the input is one 1×1×28×28 image, the output 1×10 class probabilities.
"""

import torch
import torch.nn.functional as F
from torch import nn

from dcaccel.frontend import Workload, load

SEED = 0


class LeNet(nn.Module):
    """LeNet-5 as on the seed slide."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(256, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, 256)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return F.softmax(x, dim=1)


def model() -> LeNet:
    """LeNet with weights drawn from a fixed seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return LeNet()


def example_inputs() -> tuple[torch.Tensor]:
    """One 1×1×28×28 input image."""
    return (torch.zeros(1, 1, 28, 28),)


def workload() -> Workload:
    """The ``lenet`` workload."""
    return load(model(), example_inputs(), name="lenet")
