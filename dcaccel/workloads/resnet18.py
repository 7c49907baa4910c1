"""``resnet18``: the standard ResNet-18 (BasicBlock, stages of 2-2-2-2 blocks) for 1000 classes.

Written here in PyTorch (torchvision has no CPU build on this machine); weights are random from a
fixed seed. The input is 1×3×224×224 by default (``workload(image=...)`` changes the side).
"""

import torch
from torch import nn

from dcaccel.frontend import Workload, load
from dcaccel.workloads.init import seeded

SEED = 0


class BasicBlock(nn.Module):
    """Two 3×3 convolutions with batch norm, and a shortcut (a strided 1×1 convolution when the shape changes)."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18: a 7×7 stem, four stages of two basic blocks (64, 128, 256, 512 channels), pooling, fc."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        inplanes = 64
        for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def model(num_classes: int = 1000) -> ResNet18:
    """ResNet-18 with weights drawn from a fixed seed."""
    return seeded(lambda: ResNet18(num_classes), SEED)


def workload(image: int = 224, num_classes: int = 1000) -> Workload:
    """The ``resnet18`` workload on one 3×image×image input."""
    return load(model(num_classes), (torch.zeros(1, 3, image, image),), name="resnet18")
