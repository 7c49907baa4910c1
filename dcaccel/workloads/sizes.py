"""Size options of the built-in workloads."""

from collections.abc import Mapping

from dcaccel.errors import DcaccelError
from dcaccel.frontend.shapes import positive_size


def check_sizes(workload: str, known: Mapping[str, int], sizes: Mapping[str, int]) -> dict[str, int]:
    """``sizes`` as ints; raises :class:`DcaccelError` for a size the workload does not have (naming the
    ones it has, ``known`` by name) or a value that is not a positive integer."""
    unknown = sorted(set(sizes) - set(known))
    if unknown:
        valid = f"sizes: {', '.join(known)}" if known else "it has no size options"
        raise DcaccelError(f"workload '{workload}' has no size '{unknown[0]}' ({valid})")
    return {name: positive_size(f"workload '{workload}': size '{name}'", value) for name, value in sizes.items()}


def merge_sizes(workload: str, defaults: Mapping[str, int], sizes: Mapping[str, int]) -> dict[str, int]:
    """``defaults`` updated by ``sizes``; raises :class:`DcaccelError` as :func:`check_sizes` does."""
    return {**defaults, **check_sizes(workload, defaults, sizes)}
