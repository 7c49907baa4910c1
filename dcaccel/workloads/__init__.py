"""Built-in workloads, by name: ``get(name)`` builds one (deterministic weights), ``names()`` lists them.

Each workload lives in its own module, which defines the model and a ``workload(**options)``
function returning the :class:`~dcaccel.frontend.workload.Workload`; options (sizes) are passed
through ``get(name, **options)``.
"""

import importlib
import inspect

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


def size_options(name: str) -> dict[str, int]:
    """The size options of the built-in workload ``name`` with their defaults: the keyword parameters of
    its module's ``workload()``, or its ``DEFAULT_SIZES`` when ``workload()`` takes ``**sizes``.

    Raises :class:`DcaccelError` listing the names when ``name`` is unknown.
    """
    module = _module(name)
    parameters = inspect.signature(module.workload).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(module.DEFAULT_SIZES)
    return {p.name: p.default for p in parameters}


def get(name: str, **options):
    """Build the built-in workload ``name``; ``options`` (sizes, positive integers) go to its module's
    ``workload()``.

    Raises :class:`DcaccelError` listing the names when ``name`` is unknown, and naming the valid
    options for an unknown option or a value that is not a positive integer.
    """
    from dcaccel.workloads.sizes import check_sizes

    sizes = check_sizes(name, size_options(name), options)
    return _module(name).workload(**sizes)


def _module(name: str):
    """The module that builds the built-in workload ``name``."""
    if name not in _MODULES:
        raise DcaccelError(f"unknown workload '{name}' (built-in workloads: {', '.join(_MODULES)})")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")
