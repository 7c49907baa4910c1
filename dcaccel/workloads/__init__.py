"""Built-in workloads, by name: ``get(name)`` builds one (deterministic weights), ``names()`` lists them.

Each workload lives in its own module, which defines the model and a ``workload(**options)``
function returning the :class:`~dcaccel.frontend.workload.Workload`; options (sizes) are passed
through ``get(name, **options)``.
"""

import importlib

from dcaccel.errors import DcaccelError

#: Workload name → module of this package that builds it.
_MODULES = {
    "conv-seed": "conv_seed",
    "lenet": "lenet",
    "resnet18": "resnet18",
    "mobilenetv2-block": "mobilenetv2_block",
    "transformer-encoder": "transformer_encoder",
    "mmm": "mmm",
    "pusch-mimo": "pusch_mimo",
}


def names() -> list[str]:
    """Names of the built-in workloads."""
    return list(_MODULES)


def get(name: str, **options):
    """Build the built-in workload ``name``; ``options`` (e.g. sizes) go to its module's ``workload()``.

    Raises :class:`DcaccelError` listing the names when ``name`` is unknown.
    """
    if name not in _MODULES:
        raise DcaccelError(f"unknown workload '{name}' (built-in workloads: {', '.join(_MODULES)})")
    module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
    return module.workload(**options)
