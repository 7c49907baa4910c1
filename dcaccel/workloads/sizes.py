"""Size options of the built-in workloads."""

from collections.abc import Mapping

from dcaccel.errors import DcaccelError


def merge_sizes(workload: str, defaults: Mapping[str, int], sizes: Mapping[str, int]) -> dict[str, int]:
    """``defaults`` updated by ``sizes``; raises :class:`DcaccelError` for a size the workload does not have."""
    unknown = sorted(set(sizes) - set(defaults))
    if unknown:
        raise DcaccelError(f"workload '{workload}' has no size '{unknown[0]}' (sizes: {', '.join(defaults)})")
    return {**defaults, **{name: int(value) for name, value in sizes.items()}}
