"""``conv-seed``: the seed's convolution, Conv2d(1 → 6, 5×5, with bias) on a 1×1×28×28 input.

K = C·kh·kw = 25, N = 6 filters, M = OH·OW = 576: the anchor of the seed table (I/O volume and
makespan of the im2col + MV / OP / LMV implementations; see docs/architecture.md, Contract 3).
"""

import torch

from dcaccel.frontend import Workload, load

SEED = 0


def model() -> torch.nn.Conv2d:
    """The convolution, with weights drawn from a fixed seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return torch.nn.Conv2d(1, 6, 5)


def example_inputs() -> tuple[torch.Tensor]:
    """One 1×1×28×28 input image."""
    return (torch.zeros(1, 1, 28, 28),)


def workload() -> Workload:
    """The ``conv-seed`` workload."""
    return load(model(), example_inputs(), name="conv-seed")
